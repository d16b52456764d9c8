"""The lazy path: a dask array in, a lazy dask array of labels and a lazy count out."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.highlevelgraph import HighLevelGraph

from tilelabel.connectivity import max_components
from tilelabel.dtypes import LabelOverflowError, label_dtype
from tilelabel.pipeline.graph import Source, build_merge_graph, materialize, relabel
from tilelabel.pipeline.plan import ChunkPlan


def _relabel_checked(block, slices, spec, total, backend, connectivity, algorithm, dtype):
    if total > np.iinfo(dtype).max:
        raise LabelOverflowError(
            f"{total} labels do not fit in {np.dtype(dtype)}; use uint64 or auto"
        )
    return relabel(materialize(block, slices), spec, backend, connectivity, algorithm, dtype)


def label_dask(
    x: da.Array, connectivity: int, backend: str, algorithm: str | None, dtype: str
) -> tuple[da.Array, da.Array]:
    plan = ChunkPlan(tuple(x.shape), tuple(tuple(c) for c in x.chunks))
    source = Source(lambda idx: (x.name, *idx), [x], token=x.name)
    graph = build_merge_graph(source, plan, connectivity, backend, algorithm)
    # the dtype of a lazy array is fixed before the count is known: choose it from the largest
    # count this shape can have; a forced uint32 is checked against the real count when computed
    bound = max_components(plan.shape, connectivity)
    out = np.dtype(np.uint32) if dtype == "uint32" else label_dtype(bound, dtype)
    name = f"tilelabel-labels-{x.name}-{connectivity}-{backend}-{algorithm}-{out}"
    (total_key,) = graph.count.__dask_keys__()
    dsk = {
        (name, *idx): (
            _relabel_checked,
            (x.name, *idx),
            plan.slices(idx),
            graph.spec_keys[idx],
            total_key,
            backend,
            connectivity,
            algorithm,
            out,
        )
        for idx in plan.indices()
    }
    hlg = HighLevelGraph.from_collections(
        name, dsk, dependencies=[x, graph.delayed(graph.spec_keys[(0,) * x.ndim]), graph.count]
    )
    return da.Array(hlg, name, plan.chunks, dtype=out), graph.count
