"""Pixel-based union find (UF), sequential, in numba: any 2D or 3D connectivity.

The connectivities that 2x2(x2) blocks cannot serve (2D 4, 3D 6 and 18) need voxels as the unit;
the kernel also runs 2D 8 and 3D 26 as a baseline for the block-based ones. The forest is the
output array, indexed by voxel; a 2D image is the 3D case with ``nz == 1``. Because a union keeps
the smaller root, each tree's root is its component's first voxel in raster order, so flattening
the forest in raster order yields scipy's numbering directly.
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.unionfind import merge

#: Forward (earlier in raster order) neighbours per connectivity, as (dz, dy, dx); the left
#: neighbour (0, 0, -1) comes last in every list (uf_scan relies on it).
_ALL_FORWARD = [(dz, dy, dx) for dz in (-1, 0) for dy in (-1, 0, 1) for dx in (-1, 0, 1)][:13]
FORWARD: dict[tuple[int, int], np.ndarray] = {
    (2, 4): np.array([(0, -1, 0), (0, 0, -1)], np.int64),
    (2, 8): np.array([(0, -1, -1), (0, -1, 0), (0, -1, 1), (0, 0, -1)], np.int64),
    (3, 6): np.array([(-1, 0, 0), (0, -1, 0), (0, 0, -1)], np.int64),
    (3, 18): np.array([o for o in _ALL_FORWARD if sum(map(abs, o)) <= 2], np.int64),
    (3, 26): np.array(_ALL_FORWARD, np.int64),
}


@numba.njit(cache=True, nogil=True)
def uf_scan(img, L, nz, ny, nx, nbr):
    """Union every foreground voxel with its foreground forward neighbours ``nbr`` (k x 3)."""
    sy = nx
    sz = ny * nx
    sent = nz * sz
    k = nbr.shape[0]
    off = np.empty(k, np.int64)
    need_z = False
    need_yp = False
    reach = 0
    for i in range(k):
        off[i] = nbr[i, 0] * sz + nbr[i, 1] * sy + nbr[i, 2]
        need_z |= nbr[i, 0] != 0
        need_yp |= nbr[i, 1] > 0
        reach = max(reach, abs(nbr[i, 0]) + abs(nbr[i, 1]) + abs(nbr[i, 2]))
    # When the left voxel W is foreground, a neighbour of X that is also W's neighbour under the
    # same connectivity is already in W's tree: only the others (offw) need a union then
    # (26-connectivity: 4 of 12; 18: 4 of 8; 6: none saved).
    offw = np.empty(k, np.int64)
    kw = 0
    for i in range(k - 1):
        dz, dy, dx = nbr[i, 0], nbr[i, 1], nbr[i, 2] + 1
        if not (max(abs(dz), abs(dy), abs(dx)) <= 1 and abs(dz) + abs(dy) + abs(dx) <= reach):
            offw[kw] = off[i]
            kw += 1
    for z in range(nz):
        zin = z > 0 or not need_z
        for y in range(ny):
            yin = zin and y > 0 and (y + 1 < ny or not need_yp)
            v = z * sz + y * sy
            for x in range(nx):
                if img[v] == 0:
                    L[v] = sent
                    v += 1
                    continue
                r = np.int64(-1)
                if yin and 0 < x < nx - 1:
                    # Interior: every forward neighbour exists. The last one is always the left
                    # voxel, whose entry is still the root it ended with: start from it.
                    if img[v - 1]:
                        r = np.int64(L[v - 1])
                        for i in range(kw):
                            n = v + offw[i]
                            if img[n] and np.int64(L[n]) != r:
                                r = merge(L, n, r)
                    else:
                        for i in range(k - 1):
                            n = v + off[i]
                            if img[n] and np.int64(L[n]) != r:
                                r = merge(L, n, r)
                else:
                    for i in range(k):
                        zz = z + nbr[i, 0]
                        yy = y + nbr[i, 1]
                        xx = x + nbr[i, 2]
                        if zz >= 0 and 0 <= yy < ny and 0 <= xx < nx:
                            n = v + off[i]
                            if img[n]:
                                r = merge(L, n, r)
                L[v] = v if r < 0 else r
                v += 1
    return 0


@numba.njit(cache=True, nogil=True)
def uf_flatten(L):
    """Turn the forest into final labels 1..n (roots are first voxels); return n."""
    sent = L.size
    k = np.int64(0)
    for v in range(L.size):
        # Branch-free (foreground, background and roots are unpredictable in noisy volumes):
        # background (the sentinel) and roots read their own entry back, which is then ignored.
        p = np.int64(L[v])
        q = L[min(p, v)]
        root = p == v
        k += root
        L[v] = 0 if p == sent else (k if root else q)
    return k
