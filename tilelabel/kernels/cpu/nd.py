"""Labeling of any rank and any structuring element on the CPU (numba): the general case the
block and pixel kernels (2D and 3D, scipy's standard structures, binary input) do not serve.

1. The structure's *backward* neighbours: the offsets of its true elements that come before the
   centre in raster order (a symmetric structure connects a voxel to the others through them).
2. One raster pass of union-find: each foreground voxel is joined to each backward neighbour
   that is in the array and *connected*: also foreground (binary), or of the same value
   (``by_value``, scikit-image's and cc3d's multi-value labeling).
3. One raster pass numbering roots 1..n as they first appear, so labels come out in raster
   order of each component's first voxel, as scipy numbers them.

Input of any numeric dtype, 0-d to n-d; memory is one int64 per voxel.
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.unionfind import union


def backward_offsets(structure: np.ndarray) -> np.ndarray:
    """(k, ndim) int64 coordinate steps to the structure's neighbours before the centre."""
    s = np.asarray(structure, bool)
    centre = np.array([d // 2 for d in s.shape])
    steps = np.argwhere(s) - centre
    flat = np.ravel_multi_index((steps + centre).T, s.shape) if steps.size else np.empty(0)
    mid = np.ravel_multi_index(tuple(centre), s.shape)
    return np.ascontiguousarray(steps[flat < mid]).astype(np.int64).reshape(-1, s.ndim)


@numba.njit(cache=True, nogil=True)
def _label(values, shape, steps, by_value, out):
    # values: the input, flat, C order; out: int64 labels, flat (used as the union-find parents
    # first: out[i] = -1 for background)
    ndim = shape.size
    size = values.size
    strides = np.ones(ndim, np.int64)
    for a in range(ndim - 2, -1, -1):
        strides[a] = strides[a + 1] * shape[a + 1]
    delta = np.zeros(steps.shape[0], np.int64)
    for k in range(steps.shape[0]):
        for a in range(ndim):
            delta[k] += steps[k, a] * strides[a]
    coord = np.zeros(ndim, np.int64)
    for i in range(size):
        v = values[i]
        if v == 0:
            out[i] = -1
        else:
            out[i] = i
            for k in range(steps.shape[0]):
                inside = True
                for a in range(ndim):
                    c = coord[a] + steps[k, a]
                    if c < 0 or c >= shape[a]:
                        inside = False
                        break
                if not inside:
                    continue
                j = i + delta[k]
                w = values[j]
                if w == 0 or (by_value and w != v):
                    continue
                union(out, i, j)  # the smaller index stays root: the earlier voxel
        # the next voxel's coordinates
        for a in range(ndim - 1, -1, -1):
            coord[a] += 1
            if coord[a] < shape[a]:
                break
            coord[a] = 0
    # every voxel straight to its root (a parent always precedes its child: one pass)
    for i in range(size):
        if out[i] >= 0:
            out[i] = out[out[i]]
    # number the roots in raster order (a root precedes every voxel of its component); a root
    # holds -2 - its label until the end, so that its members still find it
    n = 0
    for i in range(size):
        r = out[i]
        if r == i:
            n += 1
            out[i] = -2 - n
        elif r >= 0:
            out[i] = -2 - out[r]
    for i in range(size):
        v = out[i]
        out[i] = 0 if v == -1 else (-2 - v if v < -1 else v)
    return n


def label_nd(
    values: np.ndarray, structure: np.ndarray, by_value: bool = False
) -> tuple[np.ndarray, int]:
    """``(labels, n)``: int64 labels 1..n of the components of ``values`` (nonzero, or with
    ``by_value`` each nonzero value on its own) under ``structure`` (3 along every axis, its
    centre set, symmetric about it), numbered in raster order of their first voxels."""
    values = np.asarray(values)  # not ascontiguousarray, which makes 0-d arrays 1-d
    if not values.flags.c_contiguous:
        values = values.copy()
    if values.dtype == np.bool_:
        values = values.view(np.uint8)
    shape = np.array(values.shape, np.int64)
    out = np.empty(values.size, np.int64)
    steps = backward_offsets(structure) if values.ndim else np.zeros((0, 0), np.int64)
    n = _label(values.reshape(-1), shape, steps, by_value, out) if values.size else 0
    return out.reshape(values.shape), int(n)
