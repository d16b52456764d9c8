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

    Each voxel of the current and the previous plane also records where its run ends, so a run
    steps through the runs of a neighbour row that it touches, one step per run, and the forest
    is over runs, not voxels: small enough to stay in cache.
    """
    sy = nx
    sz = ny * nx
    k = dirs.shape[0]
    ends = np.empty(2 * ny * nx, np.int64)  # per voxel of a plane (by parity): its run's end
    rows = np.empty(k, np.int64)  # per neighbour row inside the image: its first voxel
    at = np.empty(k, np.int64)  # and its first entry in ``ends``
    wide = np.empty(k, np.int64)
    P[0] = 0
    m = np.int64(1)
    for z in range(nz):
        for y in range(ny):
            row = z * sz + y * sy
            kk = 0
            for i in range(k):
                zz = z + dirs[i, 0]
                yy = y + dirs[i, 1]
                if zz < 0 or yy < 0 or yy >= ny:
                    continue
                rows[kk] = zz * sz + yy * sy
                at[kk] = ((zz & 1) * ny + yy) * nx
                wide[kk] = dirs[i, 2]
                kk += 1
            mine = ((z & 1) * ny + y) * nx
            x = 0
            while x < nx:
                val = img[row + x]
                e = x + 1  # the run is [x, e)
                while e < nx and img[row + e] == val:
                    e += 1
                m_or_0 = m if val != 0 else 0
                if val != 0:
                    r = np.int64(-1)
                    for i in range(kk):
                        xx = max(x - wide[i], 0)  # voxels xx..hi-1 of that row touch the run
                        hi = min(e + wide[i], nx)
                        while xx < hi:  # one step per run of that row
                            if img[rows[i] + xx] == val:
                                r = merge(P, np.int64(L[rows[i] + xx]), r)
                            xx = ends[at[i] + xx]
                    P[m] = m if r < 0 else r
                    m += 1
                for xx in range(x, e):
                    L[row + xx] = m_or_0
                    ends[mine + xx] = e
                x = e
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
