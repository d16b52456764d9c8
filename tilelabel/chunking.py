"""The chunk plan: how a volume is cut into processing chunks.

Processing chunks are whole multiples of the storage chunks, so every processing chunk reads and
writes whole storage chunks and no two tasks ever write the same storage chunk. Each chunk has
an index in the chunk grid and a global offset (:class:`Chunk`). On a wrapped axis (periodic
boundaries, :mod:`tilelabel.periodic`) the chunks at its two ends are neighbours. The
pipeline's tasks, the resources' budgets and the run's plan share this geometry.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

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


#: the most chunks a grid may have: the merge names a border label by its chunk's place in
#: the grid and its own place in the chunk, in 64 bits (:mod:`tilelabel.pipeline.tree`)
MAX_GRID_CHUNKS = 1 << 39


@dataclass(frozen=True)
class ChunkPlan:
    """Per-axis chunk sizes of the processing chunks (dask's ``chunks`` convention); with
    ``stored``, only the chunks that hold stored data (the rest are background, and no step
    of the pipeline visits them)."""

    shape: tuple[int, ...]
    chunks: tuple[tuple[int, ...], ...]
    #: the wrapped axes: the volume's faces on them touch each other (periodic boundaries)
    wrap: tuple[int, ...] = ()
    #: the indices of the chunks that hold stored data, in raster order (None: every chunk)
    stored: tuple[tuple[int, ...], ...] | None = None
    #: where not None, every chunk but those in ``held`` holds no stored data and is all this
    #: value (a nonzero fill value): each is one constant block, which the pipeline labels once
    fill: Any = None
    held: frozenset[tuple[int, ...]] = dataclasses.field(default=frozenset(), repr=False)

    def __post_init__(self) -> None:
        for axis, (s, c) in enumerate(zip(self.shape, self.chunks, strict=True)):
            if sum(c) != s or any(v <= 0 for v in c):
                raise ValueError(f"chunks {c} do not tile axis {axis} of size {s}")
        if math.prod(self.grid) > MAX_GRID_CHUNKS:
            raise ValueError(
                f"{math.prod(self.grid):,} chunks of up to {self.max_block_shape()} over shape "
                f"{self.shape}: more than {MAX_GRID_CHUNKS:,}; use larger chunks (--chunks)"
            )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def grid(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(len(c) for c in self.chunks)

    @property
    def nchunks(self) -> int:
        """The chunks the pipeline visits (those holding stored data, where known)."""
        return math.prod(self.grid) if self.stored is None else len(self.stored)

    def indices(self) -> Iterator[tuple[int, ...]]:
        """The indices of the chunks the pipeline visits, in C (raster) order."""
        if self.stored is not None:
            return iter(self.stored)
        return itertools.product(*(range(g) for g in self.grid))

    @functools.cached_property
    def _stored(self) -> frozenset | None:
        return None if self.stored is None else frozenset(self.stored)

    def ordinal(self, index: Sequence[int]) -> int:
        """A chunk's place in raster order of the whole grid."""
        out = 0
        for i, g in zip(index, self.grid, strict=True):
            out = out * g + int(i)
        return out

    def holding(self, units: np.ndarray, unit: Sequence[int], fill: Any = None) -> ChunkPlan:
        """This plan where only the chunks that hold one of the stored ``units`` (each row the
        index of a storage chunk of shape ``unit``; the chunks are whole multiples of it) hold
        data: the only ones visited, or with a nonzero ``fill`` the others are constant."""
        size = np.array([c[0] for c in self.chunks], np.int64)
        held = np.unique(np.asarray(units, np.int64).reshape(-1, self.ndim) * unit // size, axis=0)
        if len(held) == math.prod(self.grid):
            return self
        held = tuple(tuple(map(int, i)) for i in held)
        if fill is None:
            return dataclasses.replace(self, stored=held)
        return dataclasses.replace(self, fill=fill, held=frozenset(held))

    def constant(self, index: Sequence[int]) -> Any:
        """The value of every voxel of chunk ``index`` where it holds no stored data and that
        value is not 0 (:attr:`fill`), else None."""
        if self.fill is None or tuple(index) in self.held:
            return None
        return self.fill

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
        if not all(0 <= v < g for v, g in zip(nb, self.grid, strict=True)):
            return None
        return nb if self._stored is None or nb in self._stored else None

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
    """Plan processing chunks over a store whose chunks are ``storage_chunks``
    (:func:`chunk_sizes`)."""
    sizes = chunk_sizes(shape, storage_chunks, chunks, target_voxels)
    shape = tuple(int(s) for s in shape)
    return ChunkPlan(shape, tuple(regular_chunks(n, c) for n, c in zip(shape, sizes, strict=True)))


def chunk_sizes(
    shape: Sequence[int],
    storage_chunks: Sequence[int],
    chunks: Sequence[int] | None = None,
    target_voxels: int | None = None,
) -> tuple[int, ...]:
    """The processing chunk's size along each axis, over a store whose chunks are
    ``storage_chunks``.

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
    return sizes


def plan_for_run(
    shape: Sequence[int],
    storage_chunks: Sequence[int],
    chunks: Sequence[int] | None,
    threads: int,
    largest: int,
    min_tiles: int = 1,
    stored: np.ndarray | None = None,
    fill: Any = None,
) -> ChunkPlan:
    """A run's plan: ``chunks`` when given, else chunks of at most ``largest`` voxels, made
    smaller for small volumes so that each of the cluster's ``threads`` worker threads gets two
    chunks, but not below ``min_tiles`` storage chunks (nor above ``largest`` for that).
    ``stored``: the indices of the storage chunks that hold data (None: all may), the only
    ones the plan visits, or with a nonzero ``fill`` the ones not constant
    (:meth:`ChunkPlan.holding`)."""
    unit = tuple(min(int(c), int(s)) for c, s in zip(storage_chunks, shape, strict=True))
    if chunks is not None:
        plan = plan_for_storage(shape, storage_chunks, chunks)
    else:
        voxels = math.prod(int(s) for s in shape)
        if stored is not None and fill is None:  # the stored part is what threads share
            voxels = min(voxels, len(stored) * math.prod(unit))
        target = max(voxels // (2 * max(threads, 1)), min(min_tiles * math.prod(unit), largest))
        target = min(target, largest)
        # a sparse volume's grid may need chunks larger than its stored data asks for
        fewest = -(-math.prod(int(s) for s in shape) // MAX_GRID_CHUNKS)
        plan = plan_for_storage(shape, storage_chunks, None, max(int(target), fewest, 1))
    return plan if stored is None else plan.holding(stored, unit, fill)


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
