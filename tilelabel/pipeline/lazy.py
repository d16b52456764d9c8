"""The lazy path: a dask array in, a lazy dask array of labels and a lazy count out."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np

from tilelabel.connectivity import max_components
from tilelabel.dtypes import LabelOverflowError, label_dtype
from tilelabel.pipeline.graph import build_merge_graph, build_summaries, relabel
from tilelabel.pipeline.plan import ChunkPlan


def _relabel_checked(block, spec, total, backend, connectivity, algorithm, dtype):
    if total > np.iinfo(dtype).max:
        raise LabelOverflowError(
            f"{total} labels do not fit in {np.dtype(dtype)}; use uint64 or auto"
        )
    return relabel(block, spec, backend, connectivity, algorithm, dtype)


def label_dask(
    x: da.Array, connectivity: int, backend: str, algorithm: str | None, dtype: str
) -> tuple[da.Array, da.Array]:
    plan = ChunkPlan(tuple(x.shape), tuple(tuple(c) for c in x.chunks))
    blocks = x.to_delayed()
    summaries = build_summaries(lambda idx: blocks[idx], plan, connectivity, backend, algorithm)
    graph = build_merge_graph(summaries, plan, connectivity, backend, algorithm)
    # the dtype of a lazy array is fixed before the count is known: choose it from the largest
    # count this shape can have, and check the real count at compute time if forced smaller
    out = label_dtype(
        max_components(plan.shape, connectivity), dtype if dtype == "uint64" else "auto"
    )
    if dtype == "uint32":
        out = np.dtype(np.uint32)
    total = graph.count.to_delayed().item()
    parts = np.empty(plan.grid, dtype=object)
    for idx in plan.indices():
        d = dask.delayed(_relabel_checked, pure=True)(
            blocks[idx], graph.specs[idx], total, backend, connectivity, algorithm, out
        )
        parts[idx] = da.from_delayed(d, shape=plan.block_shape(idx), dtype=out)
    return da.block(parts.tolist()), graph.count
