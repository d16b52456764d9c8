"""CPU (numba) helpers around the kernels: first voxels of labels and lookup-table application."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _first_indices(flat, n):
    # Labels are numbered in raster order of their first voxel, so label l first appears exactly
    # where the running maximum of the labels grows to l: one pass, no per-label search.
    out = np.empty(n, dtype=np.int64)
    nxt = 1
    for i in range(flat.size):
        if flat[i] == nxt:
            out[nxt - 1] = i
            nxt += 1
            if nxt > n:
                break
    return out


def first_indices(labels: np.ndarray, n: int) -> np.ndarray:
    """Raster index (in ``labels``' own C order) of the first voxel of each label 1..n."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    return _first_indices(np.ascontiguousarray(labels).reshape(-1), n)


@numba.njit(cache=True, nogil=True, parallel=False)
def _apply_lut(flat, lut, out):
    for i in range(flat.size):
        out[i] = lut[flat[i]]


def apply_lut(labels: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``lut[labels]`` without numpy's fancy-indexing temporaries."""
    out = np.empty(labels.shape, dtype=lut.dtype)
    _apply_lut(np.ascontiguousarray(labels).reshape(-1), lut, out.reshape(-1))
    return out
