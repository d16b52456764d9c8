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
   value changes and every voxel's run id is written into the label array, then each run is
   united with the runs of its value that it touches in the earlier neighbour rows
   (:func:`directions`), found from the run ids at its ends.
2. :func:`ml_number`: the roots numbered 1..n in run order, every other run given its root's.
3. :func:`ml_gather`: every voxel's run id replaced by its run's number.

The values are read through an unsigned view of their own width (a signed value and its
unsigned view are equal exactly when the values are), so numba compiles one scan per width.
Indices are unsigned or loop counters over views, so that numba adds no negative-index checks
(which keep the loops from being vectorized).
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.runs import DIRECTIONS
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


def directions(ndim: int, connectivity: int) -> tuple[np.ndarray, bool]:
    """The earlier neighbour rows that :func:`ml_scan` walks, and whether it may skip the
    covered runs (3D 26-connectivity: the row below, ``(-1, 0)``, comes first)."""
    dirs = DIRECTIONS[(ndim, connectivity)]
    if (ndim, connectivity) != (3, 26):
        return dirs, False
    below = (dirs[:, 0] == -1) & (dirs[:, 1] == 0)
    return np.concatenate([dirs[below], dirs[~below]]), True


@numba.njit(cache=True, nogil=True, _nrt=False)
def _link(P, V, L, u, v, fresh, o, x0, x1):
    """Unite run ``u`` (value ``v``) with the runs of value ``v`` over voxels ``x0..x1`` of the
    row at flat offset ``o`` of the run ids ``L``; while ``fresh`` (``u`` is still its own
    root), ``u`` takes the first one's parent. Returns ``fresh``."""
    q1 = np.uint64(L[o + x1])
    for q in range(np.uint64(L[o + x0]), q1 + _ONE):
        if fresh:
            if V[q] == v:
                P[u] = P[q]
                fresh = False
        else:
            _pair(P, V, u, q)
    return fresh


@numba.njit(cache=True, nogil=True)
def ml_scan(img, L, P, E, V, first, nz, ny, nx, dirs, cover, offs):
    """Find every row's runs (run ``c`` ends before voxel ``E[c]`` of its row and has value
    ``V[c]``; ``first[r]``: row r's first run), write each voxel's run id into ``L``, and unite
    each nonzero run in the forest ``P`` with the runs of its value that it touches in the
    earlier neighbour rows ``dirs`` ((dz, dy, wide, ...) rows, as in ``runs``; see
    :func:`directions`). ``offs``: ``len(dirs)`` int64.
    Returns the number of runs.

    A row's runs are found in one branch-free pass over its voxels. The runs a run touches in a
    neighbour row are the ids of that row's voxels at its two ends, and those between: no
    search and no merge walk.

    ``cover`` (26-connectivity): the row below is walked first, and the voxel below a voxel
    is a neighbour of all its 13 earlier neighbours, which the scan has united with it already.
    So a run lying on one run of its value in that row takes its parent and nothing else, and
    the other rows are walked only over the voxels no run of its value there lies beside.
    """
    k = dirs.shape[0]
    j = np.uint64(0)
    last = np.uint64(nx - 1)
    for z in range(nz):
        for y in range(ny):
            r = z * ny + y
            row = img[r * nx : r * nx + nx]
            a = j
            first[r] = a
            Lr = L[r * nx : r * nx + nx]
            # one pass, no branch: each voxel writes its run's id, value and end (a run's last
            # voxel writes them last), then the id moves on where the value changes
            for x in range(nx - 1):
                v = row[x]
                Lr[x] = j
                V[j] = v
                E[j] = x + 1
                j += np.uint64(v != row[x + 1])
            Lr[nx - 1] = j
            V[j] = row[nx - 1]
            E[j] = nx
            j += _ONE
            for c in range(a, j):
                P[c] = c
            for i in range(k):
                zz = z + dirs[i, 0]
                yy = y + dirs[i, 1]
                inside = zz >= 0 and yy >= 0 and yy < ny
                offs[i] = (zz * ny + yy) * nx if inside else -1
            s = np.uint64(0)
            for u in range(a, j):
                e = np.uint64(E[u])
                v = V[u]
                lo = s
                s = e
                if v == 0:
                    continue
                fresh = True
                if not (cover and offs[0] >= 0):
                    for i in range(k):
                        if offs[i] < 0:
                            continue
                        wd = np.uint64(dirs[i, 2])
                        x0 = lo - wd if lo >= wd else lo
                        x1 = e - _ONE + wd if e - _ONE + wd <= last else last
                        fresh = _link(P, V, L, u, v, fresh, np.uint64(offs[i]), x0, x1)
                    continue
                ob = np.uint64(offs[0])
                q0 = np.uint64(L[ob + lo])
                if V[q0] == v and q0 == np.uint64(L[ob + e - _ONE]):
                    P[u] = P[q0]  # lies on one run of its value: nothing else to unite
                    continue
                x0 = lo - _ONE if lo > 0 else lo
                x1 = e if e <= last else last
                qa = first[r - ny]
                c = x0  # voxels x0..c-1 have a run of value v below or beside them
                for q in range(np.uint64(L[ob + x0]), np.uint64(L[ob + x1]) + _ONE):
                    if V[q] != v:
                        continue
                    if fresh:
                        P[u] = P[q]
                        fresh = False
                    else:
                        _pair(P, V, u, q)
                    qs = np.uint64(E[q - _ONE]) if q > qa else np.uint64(0)
                    if qs >= c + np.uint64(2):
                        for i in range(1, k):
                            if offs[i] >= 0:
                                o = np.uint64(offs[i])
                                fresh = _link(P, V, L, u, v, fresh, o, c, qs - np.uint64(2))
                    c = np.uint64(E[q]) + _ONE
                if c <= x1:
                    for i in range(1, k):
                        if offs[i] >= 0:
                            fresh = _link(P, V, L, u, v, fresh, np.uint64(offs[i]), c, x1)
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
def ml_gather(L, P):
    """Replace every voxel's run id in ``L`` by its run's number ``P[c]``."""
    for i in range(L.size):
        L[i] = P[L[i]]
