"""Multi-label run-based union find, sequential, in numba: every connectivity.

Every distinct nonzero value is its own class: a component is a maximal set of voxels of one
value connected under the connectivity (cc3d's ``connected_components``). The voxels of one
value in a row form runs, and runs are the union-find nodes: ids 0, 1, ... in raster order over
all runs (background runs too, which are never united), kept in compact arrays (ends ``E``,
values ``V``, parents ``P``: the forest of :mod:`.unionfind`), so a union keeps the smaller
root, a root is its component's first run (which holds its first voxel), and numbering the roots
in run order gives scipy's (and cc3d's) order. Work is per run, not per voxel, except finding
the runs and writing the labels.

1. :func:`ml_scan`: rows in raster order; a row's runs are found from the positions where the
   value changes, then each run is united with the runs of its value that it touches in the
   earlier neighbour rows (:data:`tilelabel.kernels.cpu.runs.DIRECTIONS`).
2. :func:`ml_number`: the roots numbered 1..n in run order, every other run given its root's.
3. :func:`ml_fill`: every run's voxels written with its number.

The values are read through an unsigned view of their own width (a signed value and its
unsigned view are equal exactly when the values are), so numba compiles one scan per width.
Indices are unsigned or loop counters over views, so that numba adds no negative-index checks
(which keep the loops from being vectorized).
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.runs import _ctz
from tilelabel.kernels.cpu.unionfind import union

_ONE = np.uint64(1)


@numba.njit(cache=True, nogil=True, _nrt=False)
def one_value(flat):
    """True where the nonzero values of ``flat`` are all one value, or there are none; stops at
    the second value it meets, so that a block of many values costs next to nothing."""
    if flat.size == 0:
        return True
    v = flat[0]  # the value met first (0 until one is)
    for i in range(flat.size):
        x = flat[i]
        if x != 0 and x != v:
            if v != 0:
                return False
            v = x
    return True


@numba.njit(cache=True, nogil=True, _nrt=False)
def _pair(P, V, c, q):
    """Unite runs ``c`` and ``q``, which touch, if they have the same nonzero value."""
    v = V[c]
    # one test of one word: a branch per condition would mispredict on the values
    other = np.uint64(v ^ V[q]) | np.uint64(v == 0) | np.uint64(P[c] == P[q])
    if other == 0:
        union(P, np.int64(c), np.int64(q))


@numba.njit(cache=True, nogil=True, _nrt=False)
def _adopt(P, V, c, q):
    """``_pair`` for the first neighbour row walked, where most runs of this row are still
    their own roots: such a run takes ``q``'s parent (an earlier run) without a branch."""
    v = V[c]
    pc = np.uint64(P[c])
    pq = np.uint64(P[q])
    differ = np.uint64(v ^ V[q]) | np.uint64(v == 0)
    fresh = np.uint64(pc == c) & np.uint64(differ == 0)
    P[c] = pq if fresh else pc
    if (differ | fresh | np.uint64(pc == pq)) == 0:
        union(P, np.int64(c), np.int64(q))


@numba.njit(cache=True, nogil=True)
def ml_scan(img, P, E, V, first, nz, ny, nx, dirs, d, d64):
    """Find every row's runs (run ``c`` ends before voxel ``E[c]`` of its row and has value
    ``V[c]``; ``first[r]``: row r's first run) and unite each nonzero run in the forest ``P``
    with the runs of its value that it touches in the earlier neighbour rows ``dirs``
    ((dz, dy, wide) rows, as in ``runs``). ``d``: a zeroed uint8 buffer of ``nx`` rounded
    up to 8, and ``d64`` its uint64 view; ``V`` has one slot more than there can be runs (read
    past the last run, unused).
    Returns the number of runs.

    A row's value changes are marked in ``d`` by a vectorized compare and read 8 voxels at a
    time (a little-endian word's byte i is voxel i). Each neighbour row is walked once beside
    this one, as two sorted lists are merged: from a pair of touching runs, the one that ends
    first steps on (both when they end together; when ``wide``, each of those two also touches
    the other's next run). No per-run search, and no branch on which run steps, nor on values
    (the diagonal pairs are tested only where a value matches); in the first row walked, a run
    that is still its own root takes its neighbour's parent without a branch.
    """
    k = dirs.shape[0]
    nw = (nx + 7) >> 3
    j = np.uint64(0)
    for z in range(nz):
        for y in range(ny):
            r = z * ny + y
            row = img[r * nx : r * nx + nx]
            a = j
            first[r] = a
            for x in range(nx - 1):  # d[x]: a run ends after voxel x
                d[x] = row[x] != row[x + 1]
            d[nx - 1] = 1
            for w in range(nw):
                m = d64[w]
                while m:
                    E[j] = np.uint64(w << 3) + (np.uint64(_ctz(m)) >> np.uint64(3)) + _ONE
                    j += _ONE
                    m &= m - _ONE
            s = np.uint64(0)
            for c in range(a, j):
                V[c] = row[s]
                s = np.uint64(E[c])
            for c in range(a, j):
                P[c] = c
            adopt = True  # the first neighbour row inside the image
            for i in range(k):
                zz = z + dirs[i, 0]
                yy = y + dirs[i, 1]
                if zz < 0 or yy < 0 or yy >= ny:
                    continue
                q = first[zz * ny + yy]
                qend = first[zz * ny + yy + 1]
                wide = dirs[i, 2] != 0
                u = a
                while True:
                    ec = np.uint64(E[u])
                    eq = np.uint64(E[q])
                    if adopt:
                        _adopt(P, V, u, q)
                    else:
                        _pair(P, V, u, q)
                    vu = V[u]
                    vq = V[q]
                    vu1 = V[u + _ONE]
                    vq1 = V[q + _ONE]
                    # both end here (not at the row's end): the diagonal pairs, if alike
                    diag = np.uint64(wide & (ec == eq) & (u + _ONE < j)) & (
                        np.uint64(vu1 == vq) | np.uint64(vu == vq1)
                    )
                    if diag:
                        _pair(P, V, u + _ONE, q)
                        _pair(P, V, u, q + _ONE)
                    u += np.uint64(ec <= eq)
                    q += np.uint64(eq <= ec)
                    if u == j or q == qend:
                        break
                adopt = False
    return j


@numba.njit(cache=True, nogil=True)
def ml_number(P, V, m):
    """Number the roots of the run forest ``P[:m]`` 1..n in run order and give every other run
    its root's number (a parent comes earlier, so it holds its number already); background runs
    get 0. Returns n."""
    n = np.uint64(0)
    for i in range(m):
        if V[i] == 0:
            P[i] = 0
            continue
        p = np.uint64(P[i])
        if p == i:
            n += _ONE
            P[i] = n
        else:
            P[i] = P[p]
    return np.int64(n)


@numba.njit(cache=True, nogil=True)
def ml_fill(img, L, P, nrows, nx):
    """Write every run's number ``P[c]`` over its voxels, rows of ``L`` in raster order: voxel
    by voxel without a branch, the run index growing where the value changes."""
    c = np.uint64(0)
    for r in range(nrows):
        row = img[r * nx : r * nx + nx]
        out = L[r * nx : r * nx + nx]
        for x in range(nx - 1):
            out[x] = P[c]
            c += np.uint64(row[x] != row[x + 1])
        out[nx - 1] = P[c]
        c += _ONE
