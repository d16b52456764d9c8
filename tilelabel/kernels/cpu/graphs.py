"""cc3d's voxel connectivity graph and its coloring, in numba, as connected-components-3d 4.1
computes them, bit for bit.

Axes are cc3d's: ``x``, ``y``, ``z`` are axes 0, 1, 2 of the array (a 2D array is ``(x, y)``
with ``z`` of size 1, a 1D array ``(x,)``), whatever its memory order.

:func:`voxel_connectivity_graph` ``(data, connectivity)``: per voxel a bit field, a bit set
where the neighbour in that direction has the same value (0 is a value like any other: a
background voxel is connected to its background neighbours) and also where that neighbour lies
outside the image (a border voxel keeps the bits of the directions that leave it); only the
directions of the connectivity are ever set. Bit ``i`` (0: least significant) is direction:

- 2D 4 and 8 (uint8): 0 +x, 1 -x, 2 +y, 3 -y; 8 only: 4 +x+y, 5 -x+y, 6 +x-y, 7 -x-y.
- 6, 18, 26, 2D too (6: uint8, 18 and 26: uint32): faces 0 +x, 1 -x, 2 +y, 3 -y, 4 +z, 5 -z;
  18 and 26: edges 6 +x+y, 7 -x+y, 8 +x-y, 9 -x-y, 10 +x+z, 11 -x+z, 12 +y+z, 13 -y+z,
  14 +x-z, 15 -x-z, 16 +y-z, 17 -y-z; 26 only: corners 18 +x+y+z, 19 -x+y+z, 20 +x-y+z,
  21 -x-y+z, 22 +x+y-z, 23 -x+y-z, 24 +x-y-z, 25 -x-y-z. Bits 26-31 are always 0.

Values: any integer dtype (a signed one compared through its unsigned view) or bool. 2D arrays
take 4, 8, 6, 18 and 26 (the 3D names give the 3D layout, the ``z`` bits set as border); 1D and
3D ones 6, 18 and 26. cc3d's errors, in its order: ``ValueError("Only 1D, 2D, and 3D arrays
supported. Got: N")`` (cc3d raises its ``DimensionError``), ``ValueError("Only 4, 8, and 6, 18,
26 connectivities are supported for 2D images. Got: C")``, ``ValueError("Only 6, 18, and 26
connectivities are supported for 3D images. Got: C")`` (1D too), then an empty array gives
zeros of its shape, then ``TypeError("Type D not currently supported.")`` (floats).

:func:`color_connectivity_graph` ``(vcg, connectivity)``: the components of the graph that the
bits describe, numbered 1..n in cc3d's raster order of their first voxels (``x`` fastest: the
Fortran order, whatever the memory order), as uint32 in Fortran order; every voxel is in one (a
voxel without bits is a component of its own: there is no background). Two neighbours are
joined where the one later in that raster order has the bit of the direction towards the
earlier one; the bits towards later voxels are never read (cc3d takes the graph as
undirected). The bits read:

- 2D 4 or 6 (also a 3D array whose ``z`` is 1): -x (bit 1), -y (bit 3); 3D 6 also -z (bit 5).
- 2D 8 or 26: these and -x-y, +x-y: bits 7 and 6 of a uint8 graph (the 2D layout), 9 and 8 of a
  uint32 one (the 3D layout).
- 3D 26: the 13 earlier directions of the 3D layout (-x, -y, -x-y, +x-y, and the nine of
  ``z - 1``); an 18-connected graph has no corner bits, so 26 colors it too.

Graphs of uint8 or uint32, uint32 only for 26 with ``z`` longer than 1. cc3d's errors, in its
order: ``ValueError("Only 2D, and 3D arrays supported. Got: N")`` (cc3d's ``DimensionError``),
``ValueError("Only 4 and 8 connectivity is supported for 2D images. Got: C")`` (2D takes 4, 8,
6 and 26), ``ValueError("Only 6 and 26 connectivity are supported for 3D images. Got: C")``,
``ValueError("Only uint8 and uint32 are supported. Got: D")``, then an empty graph gives
``np.zeros([0] * ndim, uint32)`` and 0 (cc3d returns the array alone, even with ``return_N``),
then ``ValueError("Only uint32 is supported for 18 and 26 connected. Got: uint8")``.

Steps:

1. :func:`vcg_rows`, on a C-contiguous 3D view of the values (a Fortran-ordered array's
   transpose: no copy) with the directions translated into its axes: for each row and each
   neighbour row, one vectorized pass that compares the row with the neighbour row shifted by
   -1, 0 and +1 and ors their bits in. The graph comes out in the input's memory order.
2. :func:`reverse_axes`: a C-ordered graph copied into its Fortran order (a Fortran-ordered one
   is read as it is), so that memory order is cc3d's raster order.
3. :func:`ccg_scan`: pixel union find in that order (the forest of :mod:`.unionfind`, in the
   output array), each voxel with its earlier neighbours whose bits it has.
4. :func:`ccg_number`: the roots (first voxels) numbered 1..n in memory order, every voxel
   given its root's number.
"""

from __future__ import annotations

import itertools

import numba
import numpy as np

from tilelabel.dtypes import unsigned_values
from tilelabel.kernels.cpu.runs import _ctz
from tilelabel.kernels.cpu.unionfind import merge

#: 3D layout: bit of each direction (dx, dy, dz).
BITS_3D: dict[tuple[int, int, int], int] = {
    d: i
    for i, d in enumerate(
        [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
        + [(1, 1, 0), (-1, 1, 0), (1, -1, 0), (-1, -1, 0)]
        + [(1, 0, 1), (-1, 0, 1), (0, 1, 1), (0, -1, 1)]
        + [(1, 0, -1), (-1, 0, -1), (0, 1, -1), (0, -1, -1)]
        + [(1, 1, 1), (-1, 1, 1), (1, -1, 1), (-1, -1, 1)]
        + [(1, 1, -1), (-1, 1, -1), (1, -1, -1), (-1, -1, -1)]
    )
}
#: 2D layout (connectivities 4 and 8): bit of each direction (dx, dy, 0).
BITS_2D: dict[tuple[int, int, int], int] = {
    d: i
    for i, d in enumerate(
        [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0)]
        + [(1, 1, 0), (-1, 1, 0), (1, -1, 0), (-1, -1, 0)]
    )
}

_STEPS = [d for d in itertools.product((-1, 0, 1), repeat=3) if d != (0, 0, 0)]
_ONE = np.uint64(1)


def _order(d: tuple[int, ...]) -> int:
    """Number of nonzero steps of a direction: 1 face, 2 edge, 3 corner."""
    return sum(map(abs, d))


def _work(a: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int], bool]:
    """``a`` as a C-contiguous 3D array, which cc3d axis each of its axes is, and whether it is
    the transpose of ``a`` (a Fortran-ordered ``a``: no copy). Missing axes are padded in front
    with size 1 (cc3d pads ``y`` and ``z``)."""
    fortran = a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous
    work = a.T if fortran else np.ascontiguousarray(a)
    own = tuple(range(a.ndim))[::-1] if fortran else tuple(range(a.ndim))
    axes = tuple(range(a.ndim, 3)) + own
    return work.reshape((1,) * (3 - a.ndim) + work.shape), axes, fortran


def _restored(out: np.ndarray, shape: tuple[int, ...], fortran: bool) -> np.ndarray:
    """:func:`_work`'s 3D result in the shape and memory order of the input."""
    if fortran:
        return out.reshape(shape[::-1]).T
    return out.reshape(shape)


def _in_work(d: tuple[int, int, int], axes: tuple[int, int, int]) -> tuple[int, int, int]:
    """cc3d direction ``d`` in the work array's axes."""
    return tuple(d[axes[k]] for k in range(3))


def _vcg_groups(connectivity: int, axes: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The directions of ``connectivity`` grouped by neighbour row of the work array: rows
    ``(d0, d1)`` and, per row, the bit masks of steps -1, 0, +1 along its last axis (0: not
    in the connectivity)."""
    if connectivity in (4, 8):
        table = BITS_2D
        keep = 1 if connectivity == 4 else 2
    else:
        table = BITS_3D
        keep = {6: 1, 18: 2, 26: 3}[connectivity]
    groups: dict[tuple[int, int], list[int]] = {}
    for d, bit in table.items():
        if _order(d) > keep:
            continue
        w = _in_work(d, axes)
        groups.setdefault((w[0], w[1]), [0, 0, 0])[w[2] + 1] |= 1 << bit
    rows = np.array(list(groups), np.int64).reshape(-1, 2)
    masks = np.array(list(groups.values()), np.uint32).reshape(-1, 3)
    return rows, masks


@numba.njit(cache=True, nogil=True)
def vcg_rows(img, out, rows, masks):
    """``out[i0, i1, x]``: or of the masks of the directions whose neighbour has the voxel's
    value or lies outside; ``rows`` (k x 2) the neighbour rows, ``masks`` (k x 3) per row the
    bits of steps -1, 0, +1 along the last axis. ``out`` starts zeroed."""
    n0, n1, n2 = img.shape
    for i0 in range(n0):
        for i1 in range(n1):
            row = img[i0, i1]
            o = out[i0, i1]
            for g in range(rows.shape[0]):
                j0 = i0 + rows[g, 0]
                j1 = i1 + rows[g, 1]
                mm = masks[g, 0]
                m0 = masks[g, 1]
                mp = masks[g, 2]
                if j0 < 0 or j0 >= n0 or j1 < 0 or j1 >= n1:
                    every = mm | m0 | mp
                    for x in range(n2):
                        o[x] |= every
                    continue
                nb = img[j0, j1]
                for x in range(1, n2 - 1):
                    v = row[x]
                    o[x] |= (
                        (np.uint32(v == nb[x - 1]) * mm)
                        | (np.uint32(v == nb[x]) * m0)
                        | (np.uint32(v == nb[x + 1]) * mp)
                    )
                # the two ends: the step that leaves the row is a border
                last = n2 - 1
                v = row[0]
                b = mm | (np.uint32(v == nb[0]) * m0)
                b |= mp if last == 0 else np.uint32(v == nb[1]) * mp
                o[0] |= b
                if last > 0:
                    v = row[last]
                    o[last] |= (
                        (np.uint32(v == nb[last - 1]) * mm) | (np.uint32(v == nb[last]) * m0) | mp
                    )
    return 0


def voxel_connectivity_graph(data: np.ndarray, connectivity: int = 26) -> np.ndarray:
    """cc3d's ``voxel_connectivity_graph``: bits, dtype, shape and errors as the module says;
    the output has the input's memory order (C or Fortran; cc3d's is always Fortran)."""
    data = np.asarray(data)
    c = int(connectivity)
    if data.ndim not in (1, 2, 3):
        raise ValueError(f"Only 1D, 2D, and 3D arrays supported. Got: {data.ndim}")
    if data.ndim == 2 and c not in (4, 8, 6, 18, 26):
        raise ValueError(
            f"Only 4, 8, and 6, 18, 26 connectivities are supported for 2D images. Got: {c}"
        )
    if data.ndim != 2 and c not in (6, 18, 26):
        raise ValueError(f"Only 6, 18, and 26 connectivities are supported for 3D images. Got: {c}")
    out_dtype = np.uint8 if c in (4, 8, 6) else np.uint32
    if data.size == 0:
        return np.zeros(data.shape, out_dtype)
    if data.dtype.kind not in "biu":
        raise TypeError(f"Type {data.dtype} not currently supported.")
    work, axes, fortran = _work(data)
    rows, masks = _vcg_groups(c, axes)
    out = np.zeros(work.shape, out_dtype)
    vcg_rows(unsigned_values(work), out, rows, masks.astype(out_dtype))
    return _restored(out, data.shape, fortran)


def _ccg_steps(
    connectivity: int, layout2d: bool, shape: tuple[int, int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """The earlier neighbours that :func:`ccg_scan` joins a voxel with, as steps (k x 3) in the
    axes of the Fortran-order view ``(z, y, x)`` of shape ``shape`` (none along an axis of size
    1), and the bit of the voxel's field that joins each; the left step ``(0, 0, -1)`` last."""
    table = BITS_2D if layout2d else BITS_3D
    keep = 1 if connectivity in (4, 6) else 3
    found = []
    for d in _STEPS:
        w = (d[2], d[1], d[0])
        if w >= (0, 0, 0) or _order(d) > keep or d not in table:
            continue
        if any(w[k] and shape[k] == 1 for k in range(3)):
            continue  # never inside the array
        found.append((w == (0, 0, -1), w, 1 << table[d]))
    found.sort(key=lambda t: t[0])
    steps = np.array([w for _, w, _ in found], np.int64).reshape(-1, 3)
    return steps, np.array([b for _, _, b in found], np.uint32)


@numba.njit(cache=True, nogil=True)
def reverse_axes(a, out):
    """``out[k, j, i] = a[i, j, k]`` (a C-ordered array into its Fortran-order view), in tiles of
    8 x 8 of axes 0 and 2 so that the strided reads stay within a few cache lines."""
    n0, n1, n2 = a.shape
    for j in range(n1):
        for i in range(0, n0, 8):
            ie = min(i + 8, n0)
            for k in range(0, n2, 8):
                ke = min(k + 8, n2)
                for kk in range(k, ke):
                    for ii in range(i, ie):
                        out[kk, j, ii] = a[ii, j, kk]
    return 0


@numba.njit(cache=True, nogil=True, _nrt=False)
def _edge_voxel(flat, L, v, i0, i1, i2, n0, n1, n2, steps, off, bits):
    """:func:`ccg_scan` for a voxel near the border: each step checked against the shape."""
    g = flat[v]
    r = np.int64(-1)
    for i in range(steps.shape[0]):
        j0 = i0 + steps[i, 0]
        j1 = i1 + steps[i, 1]
        j2 = i2 + steps[i, 2]
        if (g & bits[i]) and 0 <= j0 < n0 and 0 <= j1 < n1 and 0 <= j2 < n2:
            r = merge(L, v + off[i], r)
    L[v] = v if r < 0 else r


@numba.njit(cache=True, nogil=True, _nrt=False)
def _popcount(x):
    """Number of set bits of ``x`` (uint64)."""
    x = x - ((x >> _ONE) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@numba.njit(cache=True, nogil=True)
def ccg_scan(vcg, L, steps, bits):
    """Union find in memory order (a Fortran-order view: cc3d's raster order): voxel ``v`` joins
    its earlier neighbours ``v + steps[i]`` where its bit ``bits[i]`` is set. ``L`` (flat)
    becomes the forest: parents earlier, roots first voxels.

    The left neighbour's entry (step ``(0, 0, -1)``, last in ``steps`` when present) is still
    the root it ended with, so joining it costs no find. The other bits are read as one word:
    with every bit set (inside a component) the neighbours in turn, else only the set ones, bit
    by bit (a branch per neighbour would mispredict on noise); the neighbour of bit ``b`` is
    ``v + at[b]``. Voxels whose neighbours all lie inside skip the bounds checks.
    """
    n0, n1, n2 = vcg.shape
    flat = vcg.reshape(-1)
    ns = steps.shape[0]
    dims = np.array([n0, n1, n2], np.int64)
    lo = np.zeros(3, np.int64)  # the voxels where every step stays inside: lo <= i < hi
    hi = dims.copy()
    off = np.empty(ns, np.int64)
    at = np.zeros(32, np.int64)
    own = bits.dtype.type(0)
    for i in range(ns):
        for a in range(3):
            lo[a] = max(lo[a], -steps[i, a])
            hi[a] = min(hi[a], dims[a] - steps[i, a])
        off[i] = (steps[i, 0] * n1 + steps[i, 1]) * n2 + steps[i, 2]
        at[_ctz(np.uint64(bits[i]))] = off[i]
        own |= bits[i]
    left = bits.dtype.type(0)
    k = ns
    if ns and off[ns - 1] == -1:
        k = ns - 1
        left = bits[k]
        own ^= left
    o0 = off[0] if k >= 2 else 0
    o1 = off[1] if k >= 2 else 0
    k0 = 2 if k >= 2 else 0
    for i0 in range(n0):
        for i1 in range(n1):
            v0 = (i0 * n1 + i1) * n2
            a = n2
            b = n2
            if lo[0] <= i0 < hi[0] and lo[1] <= i1 < hi[1]:
                a = min(lo[2], n2)
                b = max(a, hi[2])
            for i2 in range(a):
                _edge_voxel(flat, L, v0 + i2, i0, i1, i2, n0, n1, n2, steps, off, bits)
            prev = np.int64(L[v0 + a - 1]) if a < b and left else np.int64(-1)
            for v in range(v0 + a, v0 + b):
                g = flat[v]
                r = prev if g & left else np.int64(-1)
                m = g & own
                if m == own:
                    if k >= 2:  # (-z and -y in 6-connectivity: no loop)
                        n = v + o0
                        if np.int64(L[n]) != r:
                            r = merge(L, n, r)
                        n = v + o1
                        if np.int64(L[n]) != r:
                            r = merge(L, n, r)
                    for j in range(k0, k):
                        n = v + off[j]
                        if np.int64(L[n]) != r:
                            r = merge(L, n, r)
                elif _popcount(np.uint64(m)) * 2 >= k:
                    for j in range(k):
                        n = v + off[j]
                        if (m & bits[j]) and np.int64(L[n]) != r:
                            r = merge(L, n, r)
                else:
                    w = np.uint64(m)
                    while w:
                        n = v + at[_ctz(w)]
                        w &= w - _ONE
                        if np.int64(L[n]) != r:
                            r = merge(L, n, r)
                prev = v if r < 0 else r
                L[v] = prev
            for i2 in range(b, n2):
                _edge_voxel(flat, L, v0 + i2, i0, i1, i2, n0, n1, n2, steps, off, bits)
    return 0


@numba.njit(cache=True, nogil=True)
def ccg_number(L):
    """The forest as numbers 1..n of its roots in memory order (every voxel labeled); n."""
    k = np.int64(0)
    for v in range(L.size):
        p = np.int64(L[v])
        root = p == v
        k += root
        L[v] = k if root else L[p]  # an earlier entry: its number already
    return k


def _fortran_view(vcg: np.ndarray) -> np.ndarray:
    """The graph as ``(z, y, x)`` C-contiguous (its Fortran order: cc3d's raster order): a view
    of a Fortran-ordered graph, else a copy through :func:`reverse_axes`."""
    shape = vcg.shape + (1,) * (3 - vcg.ndim)
    if vcg.flags.f_contiguous:
        return vcg.reshape(shape, order="F").T
    work = np.ascontiguousarray(vcg).reshape(shape)
    out = np.empty(shape[::-1], vcg.dtype)
    reverse_axes(work, out)
    return out


def color_connectivity_graph(vcg: np.ndarray, connectivity: int = 26) -> tuple[np.ndarray, int]:
    """cc3d's ``color_connectivity_graph`` (with ``return_N``): the uint32 labels and their
    count, numbering, shape, Fortran order and errors as cc3d's (see the module)."""
    vcg = np.asarray(vcg)
    c = int(connectivity)
    if vcg.ndim not in (2, 3):
        raise ValueError(f"Only 2D, and 3D arrays supported. Got: {vcg.ndim}")
    if vcg.ndim == 2 and c not in (4, 8, 6, 26):
        raise ValueError(f"Only 4 and 8 connectivity is supported for 2D images. Got: {c}")
    if vcg.ndim == 3 and c not in (6, 26):
        raise ValueError(f"Only 6 and 26 connectivity are supported for 3D images. Got: {c}")
    if vcg.dtype not in (np.uint8, np.uint32):
        raise ValueError(f"Only uint8 and uint32 are supported. Got: {vcg.dtype}")
    if vcg.size == 0:
        return np.zeros([0] * vcg.ndim, np.uint32, order="F"), 0
    if vcg.ndim == 3 and vcg.shape[2] > 1 and c == 26 and vcg.dtype == np.uint8:
        raise ValueError("Only uint32 is supported for 18 and 26 connected. Got: uint8")
    work = _fortran_view(vcg)
    steps, bits = _ccg_steps(c, vcg.dtype == np.uint8 and c in (8, 26), work.shape)
    big = work.size > np.iinfo(np.uint32).max
    L = np.empty(work.shape, np.uint64 if big else np.uint32)
    ccg_scan(work, L.reshape(-1), steps, bits.astype(vcg.dtype))
    n = int(ccg_number(L.reshape(-1)))
    if big:
        if n > np.iinfo(np.uint32).max:
            raise ValueError(f"{n} components do not fit cc3d's uint32 labels")
        L = L.astype(np.uint32)
    return L.T.reshape(vcg.shape, order="F"), n
