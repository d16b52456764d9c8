"""Assembles the pipeline's task graph: summaries -> pairs -> resolve -> numbering -> LUT specs.

The graph is built from ``dask.delayed`` pieces over any per-chunk block source, so the lazy API
(dask array in) and the zarr runner (which executes it on a distributed cluster in phases) share
every step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed

from tilelabel.pipeline import merge, numbering
from tilelabel.pipeline.local import label_block, summarize
from tilelabel.pipeline.plan import ChunkPlan, forward_steps

#: A block source gives, for a chunk index, either a Delayed numpy block or a picklable callable
#: ``read(slices) -> numpy`` run inside the task (so that a store is read inside the task that
#: needs the data, never held between phases).
BlockSource = Callable[[tuple[int, ...]], Any]


def materialize(block: Any, slices: tuple[slice, ...]) -> np.ndarray:
    if isinstance(block, np.ndarray):
        return block
    return np.asarray(block(slices))


def _summarize(block, slices, *args):
    return summarize(materialize(block, slices), *args)


@dataclass
class MergeGraph:
    plan: ChunkPlan
    connectivity: int
    backend: str
    algorithm: str | None
    #: per chunk index, a Delayed :class:`numbering.LutSpec`
    specs: dict[tuple[int, ...], Delayed]
    #: a 0-d dask array: the number of components
    count: da.Array


Summaries = dict[tuple[int, ...], tuple[Delayed, Delayed]]


def build_summaries(
    source: BlockSource,
    plan: ChunkPlan,
    connectivity: int,
    backend: str,
    algorithm: str | None = None,
) -> Summaries:
    """Per chunk, Delayed (:class:`Borders`, :class:`Counts`) of its local labeling."""
    out = {}
    for idx in plan.indices():
        open_faces = tuple((idx[a] > 0, idx[a] < plan.grid[a] - 1) for a in range(plan.ndim))
        name = f"chunk {idx} at {plan.offset(idx)}"
        out[idx] = tuple(
            dask.delayed(_summarize, nout=2, pure=True)(
                source(idx),
                plan.slices(idx),
                name,
                plan.offset(idx),
                plan.shape,
                open_faces,
                backend,
                connectivity,
                algorithm,
            )
        )
    return out


def build_merge_graph(
    summaries: Summaries,
    plan: ChunkPlan,
    connectivity: int,
    backend: str,
    algorithm: str | None = None,
) -> MergeGraph:
    """From chunk summaries to per-chunk LUT specs and the component count."""
    shape = plan.shape
    idxs = list(plan.indices())
    borders = {idx: summaries[idx][0] for idx in idxs}
    counts = {idx: summaries[idx][1] for idx in idxs}
    steps = forward_steps(plan.ndim)
    pairs = []
    for idx in idxs:
        nbs = [
            (step, borders[nb]) for step in steps if (nb := plan.neighbour(idx, step)) is not None
        ]
        if nbs:
            pairs.append(
                dask.delayed(merge.chunk_pairs, pure=True)(borders[idx], nbs, connectivity)
            )
    keys = [counts[idx].keys for idx in idxs]
    resolved = dask.delayed(merge.resolve, nout=len(idxs), pure=True)(pairs, *keys)
    roots = dict(zip(idxs, resolved, strict=True))

    blocks = np.empty(plan.grid, dtype=object)
    for idx in idxs:
        bs = plan.block_shape(idx)
        d = dask.delayed(numbering.corrected_counts, pure=True)(
            counts[idx], roots[idx], plan.offset(idx), shape, bs
        )
        blocks[idx] = da.from_delayed(d, shape=bs[:-1] + (1,), dtype=np.int64)
    row_counts = da.block(blocks.tolist())
    offsets, total = numbering.raster_exclusive_prefix(row_counts)
    offset_blocks = offsets.rechunk(row_counts.chunks).to_delayed()

    finals = [
        dask.delayed(numbering.border_finals, pure=True)(
            counts[idx],
            roots[idx],
            offset_blocks[idx],
            plan.offset(idx),
            shape,
            plan.block_shape(idx),
        )
        for idx in idxs
    ]
    dist = dask.delayed(numbering.distribute, nout=len(idxs), pure=True)(
        finals, *(roots[idx] for idx in idxs)
    )
    specs = {
        idx: dask.delayed(numbering.lut_spec, pure=True)(
            counts[idx], roots[idx], offset_blocks[idx], d
        )
        for idx, d in zip(idxs, dist, strict=True)
    }
    return MergeGraph(plan, connectivity, backend, algorithm, specs, total)


def relabel(
    block: np.ndarray,
    spec: numbering.LutSpec,
    backend: str,
    connectivity: int,
    algorithm: str | None,
    dtype: np.dtype,
) -> np.ndarray:
    """Label a chunk again and map its local labels to final ones (host array of ``dtype``).

    Relabeling from the input rather than keeping local labels keeps memory per worker O(chunk)
    for any volume size; the kernels' canonical numbering makes the second pass identical to the
    first.
    """
    labels, n, be = label_block(block, backend, connectivity, algorithm)
    if n != spec.n:
        raise RuntimeError(
            f"relabel pass found {n} local labels where the first pass found {spec.n}"
        )
    return be.apply_lut(labels, numbering.build_lut(spec, dtype))
