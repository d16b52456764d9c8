"""CPU (numba) helpers around the kernels: first voxels of labels, lookup-table application, and
the border merge's pairs and positions (which GPU workers run on the host too)."""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.continuous import distance
from tilelabel.sorting import unique

# The kernels below take every array they fill from their caller: an array that numba
# allocates is code that it compiles on a first run.


@numba.njit(cache=True, nogil=True)
def _first_indices(flat, out):
    # Labels are numbered in raster order of their first voxel, so label l first appears exactly
    # where the running maximum of the labels grows to l: one pass, no per-label search.
    n = out.size
    nxt = 1
    for i in range(flat.size):
        if flat[i] == nxt:
            out[nxt - 1] = i
            nxt += 1
            if nxt > n:
                break


def first_indices(labels: np.ndarray, n: int) -> np.ndarray:
    """Raster index (in ``labels``' own C order) of the first voxel of each label 1..n."""
    out = np.empty(n, dtype=np.int64)
    if n:
        _first_indices(np.ascontiguousarray(labels).reshape(-1), out)
    return out


@numba.njit(cache=True, nogil=True)
def _runs(flat, row, binary, limit):
    c = 0
    prev = flat[0]
    for i in range(flat.size):
        x = flat[i]
        if x != 0 and (i % row == 0 or (prev == 0 if binary else x != prev)):
            c += 1
            if c >= limit:
                return c
        prev = x
    return c


def count_runs(values: np.ndarray, binary: bool = False, limit: int = 1 << 62) -> int:
    """The runs of nonzero voxels along the rows (last axis) of ``values``, of one value each
    unless ``binary``, counted up to ``limit`` (where counting stops)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.size == 0:
        return 0
    if flat.dtype == np.bool_:
        flat = flat.view(np.uint8)
    return int(_runs(flat, max(values.shape[-1], 1), binary, limit))


@numba.njit(cache=True, nogil=True)
def _keep_values(values, labels, keep, out):
    for i in range(values.size):
        # two stores, not one of a conditional: numba would unify uint64 and 0 as float64
        if keep[labels[i]]:
            out[i] = values[i]
        else:
            out[i] = 0


def keep_values(values: np.ndarray, labels: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``values`` where ``keep[labels]`` is set, else 0 (in ``values``' dtype)."""
    out = np.empty(values.shape, values.dtype)
    v = np.ascontiguousarray(values).reshape(-1)
    words = v.view(f"u{v.dtype.itemsize}") if v.dtype.kind in "bfi" else v
    flat_out = out.reshape(-1).view(words.dtype)
    flat = np.ascontiguousarray(labels).reshape(-1)
    _keep_values(words, flat, np.ascontiguousarray(keep).view(np.uint8), flat_out)
    return out


@numba.njit(cache=True, nogil=True, parallel=False)
def _apply_lut(flat, lut, out):
    for i in range(flat.size):
        out[i] = lut[flat[i]]


def apply_lut(labels: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``lut[labels]`` without numpy's fancy-indexing temporaries."""
    out = np.empty(labels.shape, dtype=lut.dtype)
    _apply_lut(np.ascontiguousarray(labels).reshape(-1), lut, out.reshape(-1))
    return out


@numba.njit(cache=True, nogil=True)
def _shifted_pairs(a, shape, framed, strides, deltas, va, vb, values, d, pos, coords, out):
    # a voxel's pairs at every shift, before the next voxel's: a label is mostly that of the
    # voxel before and its neighbours, so comparing with the pair last kept drops most repeats.
    # pos: voxel 0 of ``a`` in the frame; coords: zeros; out: room for every pair. Returns the
    # number of pairs kept.
    c = 0
    for i in range(a.size):
        x = a[i]
        if x != 0:
            for s in range(deltas.size):
                q = pos + deltas[s]
                y = framed[q]
                if y != 0 and (not values or va[i] == vb[q] or distance(va[i], vb[q]) <= d):
                    p = (np.uint64(x) << np.uint64(32)) | np.uint64(y)
                    if c == 0 or out[c - 1] != p:
                        out[c] = p
                        c += 1
        ax = shape.size - 1  # the next voxel in C order
        while ax >= 0:
            coords[ax] += 1
            pos += strides[ax]
            if coords[ax] < shape[ax]:
                break
            pos -= coords[ax] * strides[ax]
            coords[ax] = 0
            ax -= 1
    return c


def shifted_pairs(
    a: np.ndarray,
    b: np.ndarray,
    shifts: list,
    va: np.ndarray | None = None,
    vb: np.ndarray | None = None,
    delta: np.generic | None = None,
) -> np.ndarray:
    """The distinct pairs (a[p], b[p + shift]) over every shift in ``shifts`` where both are
    nonzero (and, given the values ``va`` and ``vb`` of those voxels, of one value, or with
    ``delta`` in their dtype, of values at most that apart, as
    :func:`~tilelabel.kernels.cpu.continuous.join_rule` has it for nonzero values),
    packed as ``a << 32 | b`` (uint64, sorted). ``a`` and ``b``: arrays of one shape and an
    unsigned type of at most 32 bits; a shift past ``b``'s edge finds nothing. One pass that
    lets go of the GIL, for the many threads of a GPU worker."""
    if a.shape != b.shape:
        raise ValueError(f"contact planes of shapes {a.shape} and {b.shape}")
    if not shifts:
        return np.empty(0, np.uint64)
    if a.ndim == 0:  # a corner: one voxel each
        a, b, shifts = a.reshape(1), b.reshape(1), [(0,)] * len(shifts)
        if va is not None:
            va, vb = va.reshape(1), vb.reshape(1)
    framed = np.pad(b, 1)  # a frame of background one voxel wide: what a shift past b reads
    strides = np.cumprod((1, *framed.shape[:0:-1]))[::-1].astype(np.int64)
    deltas = np.asarray(shifts, np.int64).reshape(len(shifts), -1) @ strides
    values = va is not None
    if values:
        va, vb = np.ascontiguousarray(va).reshape(-1), np.pad(vb, 1).reshape(-1)
    else:
        va = vb = np.zeros(0, np.uint8)
    d = va.dtype.type(0) if delta is None else delta  # equal values: a difference of 0
    out = np.empty(np.count_nonzero(a) * deltas.size, np.uint64)
    c = _shifted_pairs(
        np.ascontiguousarray(a).reshape(-1),
        np.asarray(a.shape, np.int64),
        framed.reshape(-1),
        strides,
        deltas,
        va,
        vb,
        values,
        d,
        int(strides.sum()),  # one voxel in along every axis
        np.zeros(a.ndim, np.int64),
        out,
    )
    packed = out[:c]
    # NumPy's sort lets go of the GIL too, and numba's takes seconds to compile
    return unique(packed)


@numba.njit(cache=True, nogil=True)
def _positions(labels, ids, out):
    last, at = 0, 0
    for i in range(labels.size):
        x = labels[i]
        if x == 0:
            continue
        if x != last:  # a face's labels come in runs: search once per run
            # the first id >= x, written out (np.searchsorted is much more code to compile)
            lo, hi = 0, ids.size
            while lo < hi:
                mid = (lo + hi) >> 1
                if ids[mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
            at = lo + 1
            last = x
        out[i] = at


def positions(labels: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each voxel's label as its position in the sorted ``ids`` plus one (uint32; 0 where the
    label is 0); every nonzero label must be in ``ids``."""
    out = np.zeros(labels.shape, np.uint32)
    _positions(np.ascontiguousarray(labels).reshape(-1), ids, out.reshape(-1))
    return out


def warm() -> None:
    """Load the border kernels above for the types a run hands them (uint32 labels and
    positions, int64 ids): read from numba's cache, or compiled on a fresh install."""
    labels = np.ones((2, 2), np.uint32)
    at = positions(labels, np.ones(1, np.int64))
    shifted_pairs(at, at, [(0, 0)])
