"""One in-memory array labeled by several threads: slabs of whole planes along axis 0, at once.

cc3d and scipy label on one thread; the sequential kernels here let go of the GIL, so a host
array is cut into slabs that label side by side:

1. :func:`_cuts`: axis 0 split into slabs of whole planes, at most one per thread (and each
   small enough for 32-bit labels); each thread labels its slab into its part of the output.
2. :func:`_join`: where two slabs meet, the touching labels of the two planes (of one value, for
   multi-label input) are paired under the connectivity and united in a forest over every
   slab's labels, the smaller id keeping the root.
3. :func:`_number`: the roots numbered in id order, which is the whole array's raster order
   (slab after slab, each slab's labels by first voxel); each slab's labels are then written
   through its part of that table, in the threads again.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from tilelabel.kernels.cpu.ops import _apply_lut, shifted_pairs
from tilelabel.kernels.cpu.unionfind import union

#: fewer voxels per slab than this are not worth a thread of their own
MIN_SLAB = 1 << 20
#: a slab's labels, and the forest's ids of one slab, stay below 2^31
MAX_SLAB = 1 << 31

LabelInto = Callable[[np.ndarray, np.ndarray], int]


def _cuts(shape: tuple[int, ...], threads: int) -> list[int]:
    """Plane indices where the slabs start, and the end: ``[0, ..., shape[0]]``."""
    plane = int(np.prod(shape[1:], dtype=np.int64))
    voxels = plane * shape[0]
    slabs = min(threads, shape[0], max(1, voxels // MIN_SLAB))
    slabs = max(slabs, -(-voxels // MAX_SLAB))
    if plane > MAX_SLAB:
        slabs = 1
    return [round(i * shape[0] / slabs) for i in range(slabs + 1)]


@numba.njit(cache=True, nogil=True)
def _unite(P, pairs, lo, hi):
    """Unite ids ``lo + a`` and ``hi + b`` of every packed pair ``a << 32 | b``."""
    low = np.uint64(0xFFFFFFFF)
    for i in range(pairs.size):
        p = pairs[i]
        union(P, np.int64(lo + (p >> np.uint64(32))), np.int64(hi + (p & low)))


@numba.njit(cache=True, nogil=True)
def _number(P):
    """Number the roots of the forest ``P`` (index 0 unused) 1..n in id order, every other id
    its root's number (a parent comes earlier, so it holds its number already). Returns n."""
    n = 0
    for i in range(1, P.size):
        p = P[i]
        if p == i:
            n += 1
            P[i] = n
        else:
            P[i] = P[p]
    return n


def _shifts(struct: np.ndarray) -> list[tuple[int, ...]]:
    """The offsets, within a plane, of the voxels of the next plane that touch a voxel."""
    nxt = struct[2]
    centre = np.array(nxt.shape) // 2
    return [tuple(int(v) for v in np.array(i) - centre) for i in zip(*np.nonzero(nxt), strict=True)]


def label_slabs(
    image: np.ndarray,
    out: np.ndarray,
    label_into: LabelInto,
    struct: np.ndarray,
    threads: int,
    values: np.ndarray | None = None,
) -> int:
    """Label ``image`` (C-contiguous, 2D or 3D) into ``out`` (uint32 or uint64, its shape) on
    up to ``threads`` threads; returns the number of labels, numbered as one sequential pass
    numbers them. ``label_into(part, out_part)`` labels one slab sequentially and returns its
    count; ``struct``: the connectivity's structuring element; ``values``: the voxel values of
    multi-label input, whose touching voxels join only where they are equal."""
    cuts = _cuts(image.shape, threads)
    slabs = list(zip(cuts[:-1], cuts[1:], strict=True))
    if len(slabs) == 1:
        return int(label_into(image, out))
    with ThreadPoolExecutor(min(threads, len(slabs))) as pool:
        counts = [
            int(c)
            for c in pool.map(lambda s: label_into(image[s[0] : s[1]], out[s[0] : s[1]]), slabs)
        ]
        starts = np.cumsum([0, *counts])
        total = int(starts[-1])
        P = np.arange(total + 1, dtype=np.uint32 if total < 1 << 32 else np.uint64)
        shifts = _shifts(struct)

        def pairs(i: int) -> np.ndarray:
            c = cuts[i + 1]
            va = vb = None
            if values is not None:
                va, vb = values[c - 1], values[c]
            return shifted_pairs(out[c - 1], out[c], shifts, va, vb)

        for i, p in enumerate(pool.map(pairs, range(len(slabs) - 1))):
            _unite(P, p, int(starts[i]), int(starts[i + 1]))
        n = int(_number(P))

        def relabel(i: int) -> None:
            lut = P[starts[i] : starts[i + 1] + 1].astype(out.dtype)
            lut[0] = 0
            if not np.array_equal(lut, np.arange(lut.size)):
                flat = out[slabs[i][0] : slabs[i][1]].reshape(-1)
                _apply_lut(flat, lut, flat)

        list(pool.map(relabel, range(len(slabs))))
    return n
