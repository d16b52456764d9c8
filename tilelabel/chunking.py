"""The chunk plan: how a volume is cut into processing chunks.

Processing chunks are whole multiples of the storage chunks, so every processing chunk reads and
writes whole storage chunks and no two tasks ever write the same storage chunk. Each chunk has
an index in the chunk grid and a global offset (:class:`Chunk`). On a wrapped axis (periodic
boundaries, :mod:`tilelabel.periodic`) the chunks at its two ends are neighbours. The
pipeline's tasks, the resources' budgets and the run's plan share this geometry.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Chunk:
    """One processing chunk, as the tasks that work on it see it."""

    #: its index in the chunk grid
    index: tuple[int, ...]
    #: its first voxel's position in the volume
    offset: tuple[int, ...]
    #: its own shape
    shape: tuple[int, ...]
    #: the whole volume's shape
    volume: tuple[int, ...]
    #: per axis, (low, high): whether another chunk lies beyond that face
    open_faces: tuple[tuple[bool, bool], ...]

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(o, o + b) for o, b in zip(self.offset, self.shape, strict=True))

    @property
    def where(self) -> str:
        """How errors name it."""
        return f"chunk {self.index} at {self.offset}"


@dataclass(frozen=True)
class ChunkPlan:
    """Per-axis chunk sizes of the processing chunks (dask's ``chunks`` convention)."""

    shape: tuple[int, ...]
    chunks: tuple[tuple[int, ...], ...]
    #: the wrapped axes: the volume's faces on them touch each other (periodic boundaries)
    wrap: tuple[int, ...] = ()

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
        return self.chunk(index).slices

    def chunk(self, index: Sequence[int]) -> Chunk:
        index = tuple(index)
        open_faces = tuple(
            (True, True) if a in self.wrap else (i > 0, i < g - 1)
            for a, (i, g) in enumerate(zip(index, self.grid, strict=True))
        )
        return Chunk(index, self.offset(index), self.block_shape(index), self.shape, open_faces)

    def neighbour(self, index: Sequence[int], step: Sequence[int]) -> tuple[int, ...] | None:
        """The chunk at ``index + step`` (modulo the grid on a wrapped axis), or None outside
        the grid. On a wrapped axis of one or two chunks, a chunk may be its own neighbour, or
        the same one at two steps: each step is another contact (face, edge or corner)."""
        nb = tuple(
            (i + s) % g if a in self.wrap else i + s
            for a, (i, s, g) in enumerate(zip(index, step, self.grid, strict=True))
        )
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
    target_voxels: int | None = None,
) -> ChunkPlan:
    """Plan processing chunks over a store whose chunks are ``storage_chunks``.

    ``chunks`` (optional, per axis) must be whole multiples of the storage chunks; a chunk larger
    than the axis is clipped to it. Without ``chunks``, storage chunks are grown, smallest axis
    first, until a chunk would exceed ``target_voxels`` (which the backend's resources choose:
    :mod:`tilelabel.resources`).
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
        if target_voxels is None:
            raise TypeError("plan_for_storage needs chunks or target_voxels")
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
    threads: int,
    largest: int,
    min_tiles: int = 1,
) -> ChunkPlan:
    """A run's plan: ``chunks`` when given, else chunks of at most ``largest`` voxels, made
    smaller for small volumes so that each of the cluster's ``threads`` worker threads gets two
    chunks, but not below ``min_tiles`` storage chunks (nor above ``largest`` for that)."""
    if chunks is not None:
        return plan_for_storage(shape, storage_chunks, chunks)
    voxels = int(np.prod([int(s) for s in shape], dtype=np.int64))
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
