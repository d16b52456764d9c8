"""Step 3, equivalences across chunk borders: where a chunk touches its neighbours, and which of
their border labels meet there.

For each chunk and each of its 3^ndim-1 neighbours in a forward direction (13 in 3D, 4 in 2D),
the facing boundary planes give pairs (chunk a, label i) = (chunk b, label j) wherever two
foreground voxels are connected under the structure; edges and corners count. With multi-label
input (:attr:`Borders.values`), only voxels of the same value pair; with continuous input
(:attr:`Borders.value_faces`), voxels whose values differ by at most ``delta``. On a wrapped
axis the neighbour may lie at the grid's other end (:meth:`tilelabel.chunking.ChunkPlan.neighbour`):
the pairs across the wrap are found the same way. :mod:`tilelabel.pipeline.tree` joins the pairs
into components.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilelabel.connectivity import structure
from tilelabel.pipeline.local import Borders

_EMPTY_PAIRS = np.empty((0, 2), np.int64)


def _contact(faces: list[np.ndarray | None], step: Sequence[int], high: bool) -> np.ndarray:
    """The voxels of a chunk that touch its neighbour at ``step`` (a face, edge or corner).

    ``high`` selects the side towards ``step`` (the earlier chunk of the pair); the later chunk
    uses the opposite side.
    """
    nz = [a for a, s in enumerate(step) if s]
    first = nz[0]
    side = (step[first] > 0) == high
    face = faces[2 * first + int(side)]
    assert face is not None, "contact with a closed face"
    index: list[int | slice] = []
    for a in range(len(step)):
        if a == first:
            continue
        if step[a]:
            index.append(-1 if (step[a] > 0) == high else 0)
        else:
            index.append(slice(None))
    return face[tuple(index)]


#: a border label across the merge is named ``chunk ordinal << POSITION_BITS | position``, its
#: position being its index in the chunk's sorted border ids, and the ordinal its chunk's place
#: in the whole grid (:data:`tilelabel.chunking.MAX_GRID_CHUNKS`: 39 bits, the rest of 63)
POSITION_BITS = 24
#: the halves of a pair of positions as :func:`tilelabel.kernels.cpu.ops.shifted_pairs` packs it
_PAIR_BITS = 32


def contact(
    borders: Borders, step: Sequence[int], high: bool
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Where a chunk touches its neighbour at ``step``: its labels there as positions in
    ``borders.ids`` plus one (0: background); with multi-label or continuous input, those
    positions and the value of each voxel there.

    Computed on the worker that holds the chunk's borders, so that a pair of chunks exchanges
    one face, edge or corner of the small position type instead of all six faces and ids.
    """
    from tilelabel.kernels.cpu import (
        ops as cpu_ops,
    )  # numba: loaded by the workers whose chunks meet

    labels = _contact(borders.faces, step, high)
    if borders.ids.size >= 1 << POSITION_BITS:
        raise ValueError(f"{borders.ids.size} border labels in one chunk; use smaller chunks")
    out = cpu_ops.positions(labels, borders.ids)
    if borders.value_faces is not None:  # continuous input: the voxels' own values
        return out, np.ascontiguousarray(_contact(borders.value_faces, step, high))
    if borders.values is None:
        return out
    fg = out != 0
    values = np.zeros(labels.shape, borders.values.dtype)
    values[fg] = borders.values[out[fg] - 1]
    return out, values


def split(side: np.ndarray | tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, Any]:
    """A :func:`contact`'s positions and values (None for binary input)."""
    return side if isinstance(side, tuple) else (side, None)


def chunk_pairs(
    mine: Borders,
    ordinal: int,
    neighbours: Sequence[tuple[tuple[int, ...], Any, int]],
    connectivity: int | np.ndarray,
) -> np.ndarray:
    """Equivalent border labels between chunk ``ordinal`` and its forward neighbours, shape
    (k, 2), as ``ordinal << POSITION_BITS | position`` (see :mod:`tilelabel.pipeline.tree`).

    ``neighbours``: per forward neighbour, its ``step``, its :func:`contact` towards this chunk
    (``high=False``) and its ordinal. ``connectivity``: a neighbour count, or any
    centrosymmetric structure (3 along each axis). A pair may repeat only where two steps
    reach the same chunk (a wrapped axis of one or two chunks).
    """
    if not neighbours:
        return _EMPTY_PAIRS
    from tilelabel.kernels.cpu import ops as cpu_ops

    ndim = len(neighbours[0][0])
    if isinstance(connectivity, np.ndarray):
        struct = connectivity.astype(bool, copy=False)
    else:
        struct = structure(ndim, connectivity)
    out = []
    for step, theirs, other in neighbours:
        a, va = split(contact(mine, step, high=True))
        b, vb = split(theirs)
        free = [ax for ax, s in enumerate(step) if s == 0]
        shifts = []
        for shift in itertools.product((-1, 0, 1), repeat=len(free)):
            offset = list(step)
            for ax, s in zip(free, shift, strict=True):
                offset[ax] = s
            if struct[tuple(o + 1 for o in offset)]:
                shifts.append(shift)
        if not shifts:  # no neighbour of the structure lies across this edge or corner
            continue
        packed = cpu_ops.shifted_pairs(a, b, shifts, va, vb, mine.delta)
        if packed.size:
            la, lb = packed >> np.uint64(_PAIR_BITS), packed & np.uint64((1 << _PAIR_BITS) - 1)
            pa = (np.int64(ordinal) << POSITION_BITS) + (la.astype(np.int64) - 1)
            pb = (np.int64(other) << POSITION_BITS) + (lb.astype(np.int64) - 1)
            out.append(np.stack([pa, pb], axis=1))
    if not out:
        return _EMPTY_PAIRS
    return np.concatenate(out)


def face_mask(borders: Borders) -> np.ndarray:
    """For each border label (in the order of ``borders.ids``), the chunk's open faces it
    touches: bit ``2 * axis + side`` (side 1: the high face). A pair that leaves a group of
    chunks names only labels on the group's outer faces, and these bits tell which those are."""
    # a table over the local ids, not a sort and search of each face's labels: every label on
    # an open face is a border label (background marks entry 0, which no id reads)
    out = np.zeros(borders.ids.size, np.uint8)
    hit = np.zeros(int(borders.ids[-1]) + 1 if borders.ids.size else 1, bool)
    for f, face in enumerate(borders.faces):  # 2D and 3D: 4 or 6 faces
        if face is not None:
            hit[:] = False
            hit[face] = True
            out |= hit[borders.ids].view(np.uint8) << np.uint8(f)
    return out
