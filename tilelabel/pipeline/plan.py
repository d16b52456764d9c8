"""The chunk plan: how a volume is cut into processing chunks.

Processing chunks are whole multiples of the storage chunks, so every processing chunk reads and
writes whole storage chunks and no two tasks ever write the same storage chunk.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

#: Voxels per processing chunk aimed for when the user gives none: big enough to amortise task
#: overhead (and to feed a GPU), small enough that a worker holds a few chunks at once. On an
#: H200 (8 host threads per GPU worker, 2026-11-21) 256^3 GPU chunks made the 1024^3 pipeline
#: slower than 512^3 (11.9 s vs 8.3 s): per-chunk host work outweighs finer overlap.
DEFAULT_TARGET_VOXELS = {"cpu": 256**3, "cuda": 512**3}


@dataclass(frozen=True)
class ChunkPlan:
    """Per-axis chunk sizes of the processing chunks (dask's ``chunks`` convention)."""

    shape: tuple[int, ...]
    chunks: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        for axis, (s, c) in enumerate(zip(self.shape, self.chunks, strict=True)):
            if sum(c) != s or any(v <= 0 for v in c):
                raise ValueError(f"chunks {c} do not tile axis {axis} of size {s}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def grid(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(len(c) for c in self.chunks)

    @property
    def nchunks(self) -> int:
        return math.prod(self.grid)

    def indices(self) -> Iterator[tuple[int, ...]]:
        """Chunk indices in C (raster) order."""
        return itertools.product(*(range(g) for g in self.grid))

    def offset(self, index: Sequence[int]) -> tuple[int, ...]:
        return tuple(int(sum(c[:i])) for c, i in zip(self.chunks, index, strict=True))

    def block_shape(self, index: Sequence[int]) -> tuple[int, ...]:
        return tuple(c[i] for c, i in zip(self.chunks, index, strict=True))

    def slices(self, index: Sequence[int]) -> tuple[slice, ...]:
        off = self.offset(index)
        return tuple(slice(o, o + b) for o, b in zip(off, self.block_shape(index), strict=True))

    def neighbour(self, index: Sequence[int], step: Sequence[int]) -> tuple[int, ...] | None:
        """The chunk at ``index + step``, or None outside the grid."""
        nb = tuple(i + s for i, s in zip(index, step, strict=True))
        if all(0 <= v < g for v, g in zip(nb, self.grid, strict=True)):
            return nb
        return None

    def max_block_shape(self) -> tuple[int, ...]:
        return tuple(max(c) for c in self.chunks)


def regular_chunks(size: int, chunk: int) -> tuple[int, ...]:
    full, rest = divmod(size, chunk)
    return (chunk,) * full + ((rest,) if rest else ())


def plan_for_storage(
    shape: Sequence[int],
    storage_chunks: Sequence[int],
    chunks: Sequence[int] | None = None,
    target_voxels: int = DEFAULT_TARGET_VOXELS["cpu"],
) -> ChunkPlan:
    """Plan processing chunks over a store whose chunks are ``storage_chunks``.

    ``chunks`` (optional, per axis) must be whole multiples of the storage chunks; a chunk larger
    than the axis is clipped to it. Without ``chunks``, storage chunks are grown, smallest axis
    first, until a chunk would exceed ``target_voxels``.
    """
    shape = tuple(int(s) for s in shape)
    storage = tuple(min(int(c), s) for c, s in zip(storage_chunks, shape, strict=True))
    if chunks is not None:
        chunks = tuple(int(c) for c in chunks)
        if len(chunks) != len(shape):
            raise ValueError(f"chunks {chunks} must give one size per axis of shape {shape}")
        bad = [
            (a, c, s)
            for a, (c, s, n) in enumerate(zip(chunks, storage, shape, strict=True))
            if c <= 0 or (c % s and c < n)
        ]
        if bad:
            a, c, s = bad[0]
            near = max(s, round(c / s) * s)
            raise ValueError(
                f"processing chunk size {c} on axis {a} is not a whole multiple of the storage "
                f"chunk size {s}; use e.g. {near}"
            )
        sizes = tuple(min(c, n) for c, n in zip(chunks, shape, strict=True))
    else:
        sizes = list(storage)
        while True:
            # grow the smallest axis (the last one on ties): near-cubic chunks keep faces small
            growable = [a for a in range(len(shape)) if sizes[a] < shape[a]]
            if not growable:
                break
            axis = min(growable, key=lambda a: (sizes[a], -a))
            grown = min(sizes[axis] + storage[axis], shape[axis])
            if math.prod(sizes) // sizes[axis] * grown > target_voxels:
                break
            sizes[axis] = grown
        sizes = tuple(sizes)
    return ChunkPlan(shape, tuple(regular_chunks(n, c) for n, c in zip(shape, sizes, strict=True)))


def plan_for_run(
    shape: Sequence[int],
    storage_chunks: Sequence[int],
    chunks: Sequence[int] | None,
    backend: str,
    threads: int,
    min_tiles: int = 1,
    largest: int | None = None,
) -> ChunkPlan:
    """A run's plan: ``chunks`` when given, else the backend's target chunk size (or
    ``largest`` voxels), made smaller for small volumes so that each of the cluster's
    ``threads`` worker threads gets two chunks, but not below ``min_tiles`` storage chunks (nor
    above the target for that): a GPU that compresses the output does so one chunk's tiles at
    a time, and needs many of them at once (see :mod:`tilelabel.pipeline.encoders`)."""
    if chunks is not None:
        return plan_for_storage(shape, storage_chunks, chunks)
    voxels = int(np.prod([int(s) for s in shape], dtype=np.int64))
    largest = DEFAULT_TARGET_VOXELS[backend] if largest is None else largest
    tile = math.prod(min(int(c), int(s)) for c, s in zip(storage_chunks, shape, strict=True))
    target = max(voxels // (2 * max(threads, 1)), min(min_tiles * tile, largest))
    return plan_for_storage(shape, storage_chunks, None, max(int(min(target, largest)), 1))


def forward_steps(ndim: int) -> list[tuple[int, ...]]:
    """The 3^ndim-1 neighbour steps halved: those whose first nonzero component is +1.

    Every pair of touching chunks is visited once, through the step from the earlier to the later
    chunk in raster order.
    """
    steps = []
    for step in itertools.product((-1, 0, 1), repeat=ndim):
        nz = [s for s in step if s]
        if nz and nz[0] == 1:
            steps.append(step)
    return steps


def dtype_bytes(dtype) -> int:
    return np.dtype(dtype).itemsize


def shrink_to_fit(
    block: tuple[int, ...], storage: tuple[int, ...], ratio: float
) -> tuple[int, ...]:
    """A chunk shape, whole multiples of ``storage``, holding at most ``ratio`` of ``block``'s
    voxels: every axis scaled by ratio^(1/ndim), the largest first where rounding leaves room."""
    scale = ratio ** (1.0 / len(block))
    out = [max(s, int(b * scale) // s * s) for b, s in zip(block, storage, strict=True)]
    limit = ratio * math.prod(block)
    while math.prod(out) > limit and any(o > s for o, s in zip(out, storage, strict=True)):
        axis = max(range(len(out)), key=lambda a: out[a] if out[a] > storage[a] else -1)
        out[axis] -= storage[axis]
    return tuple(out)
