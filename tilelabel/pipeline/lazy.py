"""The lazy path: a dask array in, a lazy dask array of labels and a lazy count out."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.highlevelgraph import HighLevelGraph

from tilelabel.connectivity import max_components
from tilelabel.dtypes import LabelOverflowError, label_dtype
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.graph import Source, build_merge_graph, materialize, relabel
from tilelabel.pipeline.plan import ChunkPlan


def _relabel_checked(block, slices, spec, total, backend, connectivity, algorithm, dtype):
    if total > np.iinfo(dtype).max:
        raise LabelOverflowError(
            f"{total} labels do not fit in {np.dtype(dtype)}; use uint64 or auto"
        )
    return relabel(materialize(block, slices), spec, backend, connectivity, algorithm, dtype)


def _source(x: da.Array) -> Source:
    return Source(lambda idx: (x.name, *idx), [x], token=x.name)


def label_dask(
    x: da.Array,
    connectivity: int,
    backend: str,
    algorithm: str | None,
    dtype: str,
    min_size: int | None = None,
    max_size: int | None = None,
) -> tuple[da.Array, da.Array]:
    plan = ChunkPlan(tuple(x.shape), tuple(tuple(c) for c in x.chunks))
    opts = stats_mod.options(min_size=min_size, max_size=max_size)
    source = _source(x)
    if opts is not None:
        # a filtered graph must not share key names with the unfiltered one of the same array
        source.token = f"{x.name}-{opts.min_size}-{opts.max_size}"
    graph = build_merge_graph(source, plan, connectivity, backend, algorithm, opts)
    # the dtype of a lazy array is fixed before the count is known: choose it from the largest
    # count this shape can have; a forced uint32 is checked against the real count when computed
    bound = max_components(plan.shape, connectivity)
    out = np.dtype(np.uint32) if dtype == "uint32" else label_dtype(bound, dtype)
    name = f"tilelabel-labels-{source.token}-{connectivity}-{backend}-{algorithm}-{out}"
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


def regionprops_dask(
    x: da.Array,
    connectivity: int,
    backend: str,
    algorithm: str | None,
    intensity: da.Array | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
):
    """The statistics table of the labeling of ``x`` (computed now, a pandas DataFrame)."""
    import dask

    plan = ChunkPlan(tuple(x.shape), tuple(tuple(c) for c in x.chunks))
    opts = stats_mod.options(True, min_size, max_size, intensity is not None)
    isource = None
    if intensity is not None:
        if tuple(intensity.shape) != plan.shape:
            raise ValueError(f"intensity shape {intensity.shape} differs from {plan.shape}")
        intensity = intensity.rechunk(x.chunks)
        isource = _source(intensity)
    source = _source(x)
    source.token = f"{x.name}-stats-{isource and isource.token}-{min_size}-{max_size}"
    graph = build_merge_graph(source, plan, connectivity, backend, algorithm, opts, isource)
    idxs = list(plan.indices())
    pieces = dask.compute(*(graph.delayed(graph.table_keys[i]) for i in idxs))
    names = stats_mod.columns(x.ndim, intensity is not None)
    return stats_mod.to_frame(stats_mod.concat(pieces, names))
