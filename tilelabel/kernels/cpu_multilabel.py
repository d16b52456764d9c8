"""Multi-label run-based union find, sequential, in numba: every connectivity.

Every distinct nonzero value is its own class: a component is a maximal set of voxels of one
value connected under the connectivity (cc3d's ``connected_components``). The voxels of one
value in a row form runs, and runs are the union-find nodes: ids 1, 2, ... in raster order
in a forest of their own (:mod:`.cpu_unionfind`'s, parents at smaller ids), so a union keeps the
smaller root, a root is its component's first run (which holds its first voxel), and numbering
the roots in run order gives scipy's (and cc3d's) order.

1. :func:`ml_scan`: rows in raster order; each run gets an id and is united with the runs of
   its value that it touches in the earlier neighbour rows
   (:data:`tilelabel.kernels.cpu_runs.DIRECTIONS`).
2. :func:`ml_finish`: the roots numbered 1..n, then every voxel's run id replaced by its
   number.

The values are read through an unsigned view of their own width (a signed value and its
unsigned view are equal exactly when the values are), so numba compiles one scan per width.
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu_unionfind import merge


@numba.njit(cache=True, nogil=True)
def ml_scan(img, L, P, nz, ny, nx, dirs):
    """Give every run of equal nonzero values an id (1, 2, ... in raster order; 0: background)
    in ``L``, and unite it in the forest ``P`` over run ids with the runs of its value that it
    touches in the earlier neighbour rows ``dirs`` ((dz, dy, wide) rows, as in ``cpu_runs``).
    Returns the number of runs plus one.

    The runs of the current and the previous plane are kept as (start, end, id, value) lists
    per row, so a run meets the runs of a neighbour row that overlap it without a pass over
    their voxels, and the forest is over runs, not voxels: small enough to stay in cache.
    """
    sy = nx
    sz = ny * nx
    k = dirs.shape[0]
    # the runs of row slot (plane parity, y) start at slot * (nx + 1)
    size = 2 * ny * (nx + 1)
    starts = np.empty(size, np.int64)
    ends = np.empty(size, np.int64)
    ids = np.empty(size, np.int64)
    vals = np.empty(size, img.dtype)
    nruns = np.zeros(2 * ny, np.int64)
    q0 = np.empty(k, np.int64)  # per neighbour row: its first run that may touch the next run
    qend = np.empty(k, np.int64)
    wide = np.empty(k, np.int64)
    P[0] = 0
    m = np.int64(1)
    for z in range(nz):
        cur = z & 1
        for y in range(ny):
            row = z * sz + y * sy
            kk = 0  # the neighbour rows inside the image
            for i in range(k):
                zz = z + dirs[i, 0]
                yy = y + dirs[i, 1]
                if zz < 0 or yy < 0 or yy >= ny:
                    continue
                slot = (zz & 1) * ny + yy
                q0[kk] = slot * (nx + 1)
                qend[kk] = q0[kk] + nruns[slot]
                wide[kk] = dirs[i, 2]
                kk += 1
            base = (cur * ny + y) * (nx + 1)
            j = base
            x = 0
            while x < nx:
                val = img[row + x]
                if val == 0:
                    L[row + x] = 0
                    x += 1
                    continue
                e = x + 1  # the run is [x, e)
                while e < nx and img[row + e] == val:
                    e += 1
                starts[j] = x
                ends[j] = e
                ids[j] = m
                vals[j] = val
                j += 1
                r = np.int64(-1)
                for i in range(kk):
                    lo = x - wide[i]  # voxels lo..hi-1 of that row touch the run
                    hi = e + wide[i]
                    q = q0[i]
                    qe = qend[i]
                    while q < qe and ends[q] <= lo:
                        q += 1
                    q0[i] = q  # the runs before q end before any later run's window
                    while q < qe and starts[q] < hi:
                        if vals[q] == val:
                            r = merge(P, ids[q], r)
                        q += 1
                P[m] = m if r < 0 else r
                for xx in range(x, e):
                    L[row + xx] = m
                m += 1
                x = e
            nruns[cur * ny + y] = j - base
    return m


@numba.njit(cache=True, nogil=True)
def ml_finish(L, P, m):
    """Number the roots of the run forest ``P[:m]`` 1..n in run order (a component's first run
    holds its first voxel), then every voxel's run id in ``L`` by its root's number; return n."""
    n = P.dtype.type(0)
    for i in range(1, m):
        p = P[i]
        if p == i:
            n += 1
            P[i] = n
        else:
            P[i] = P[p]  # p < i: already a number
    for v in range(L.size):
        L[v] = P[L[v]]
    return np.int64(n)
