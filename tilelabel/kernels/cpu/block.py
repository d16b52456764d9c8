"""Block-based union find (BUF) and block-based Komura equivalence (BKE), sequential, in numba.

Allegretti, Bolelli, Grana, "Optimized Block-Based Algorithms to Label Connected Components on
GPUs" (TPDS 2020). Under full connectivity every foreground voxel of a 2x2 (2D) or 2x2x2 (3D)
block has the same label, so the union-find forest is built over blocks. As in the paper the
forest lives in the output array: the entry of a block's first (top-left-front) voxel holds the
flat index of its parent block's first voxel, so no block-sized side array is allocated.

Arrays are handled as flat views with explicit sizes ``nz, ny, nx``; a 2D image is the 3D case
with ``nz == 1``, which lets the passes that do not look at neighbour geometry (BKE's reduction,
flattening, final labeling) be shared by both dimensionalities.

Differences from the GPU formulation, all because one thread runs the blocks in raster order:

- The mask of each block (which of its voxels are foreground) is kept for the current and the
  previous block plane in a small rolling buffer, so connectivity to an earlier block is one table
  lookup ``T[mask_X, direction] & mask_N`` instead of re-reading the neighbour's voxels. ``T`` is
  built from the paper's bitsets (``0x777`` in 2D, ``0x77707770777`` in 3D).
- A connection of X that an earlier neighbour W, U or P (left, above, below-plane) connected to X
  already implies needs no union of its own (``_W3_MASK`` and the others); BUF unites the rest at
  once, BKE links to the first connected neighbour and lists the rest in its information integer,
  and its reduction skips block rows whose blocks list nothing.
- Background blocks get a sentinel entry (the voxel count, never a valid index), which is how the
  later passes skip them.
- Compression is one forward pass (:func:`flatten`) that also gives every tree a dense id, and the
  final labeling renumbers those ids in raster order of their first voxel, which is what
  ``scipy.ndimage.label`` does (a tree's root is its smallest *block*, not its first voxel).
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.unionfind import find, merge

#: Earlier neighbour blocks, in raster order of their index (so the lowest set bit of a
#: connection mask is the neighbour with the smallest index, the one BKE links to first).
FORWARD_3D = [(dz, dy, dx) for dz in (-1, 0) for dy in (-1, 0, 1) for dx in (-1, 0, 1)][:13]
FORWARD_2D = [(dy, dx) for dy in (-1, 0) for dx in (-1, 0, 1)][:4]

#: The 3x3(x3) neighbourhood of a block's first voxel in the paper's 4x4(x4) bitset.
BITSET_2D = 0x777
BITSET_3D = 0x77707770777


def _voxels(ndim: int) -> list[tuple[int, ...]]:
    # Bit k of a block mask is the voxel whose coordinates inside the block are the binary
    # digits of k (z, y, x from most to least significant): bit 0 first voxel, bit 1 its x+1.
    return [tuple((k >> (ndim - 1 - a)) & 1 for a in range(ndim)) for k in range(2**ndim)]


def connection_table(ndim: int) -> np.ndarray:
    """``T[m, d]``: voxels of forward neighbour ``d`` that touch a voxel of a block with mask ``m``.

    Built as in the paper: each foreground voxel of the block sets its 3x3(x3) neighbourhood in a
    4x4(x4) bitset centred on the block; the neighbour's voxels are then looked up in that bitset.
    """
    forward = FORWARD_3D if ndim == 3 else FORWARD_2D
    base = BITSET_3D if ndim == 3 else BITSET_2D
    weights = [16, 4, 1][3 - ndim :]
    voxels = _voxels(ndim)
    one = np.uint64(1)
    masks = np.arange(2 ** len(voxels), dtype=np.uint64)  # every mask at once (at import time)
    bs = np.zeros(masks.size, np.uint64)
    for k, v in enumerate(voxels):
        shift = sum(c * w for c, w in zip(v, weights, strict=True))
        bs |= ((masks >> np.uint64(k)) & one) * np.uint64(base << shift)
    table = np.zeros((masks.size, 16), np.uint8)
    for d, nb in enumerate(forward):
        for k, v in enumerate(voxels):
            cube = [1 + 2 * o + c for o, c in zip(nb, v, strict=True)]
            if all(0 <= c < 4 for c in cube):
                at = np.uint64(sum(c * w for c, w in zip(cube, weights, strict=True)))
                table[:, d] |= (((bs >> at) & one) << np.uint64(k)).astype(np.uint8)
    return table


T2 = connection_table(2)
T3 = connection_table(3)


def forward_offsets(shape: tuple[int, int, int], ndim: int) -> np.ndarray:
    """Flat offsets from a block's first voxel to the first voxel of each forward neighbour."""
    _, ny, nx = shape
    sz, sy = ny * nx, nx
    if ndim == 3:
        return np.array([2 * (dz * sz + dy * sy + dx) for dz, dy, dx in FORWARD_3D], np.int64)
    return np.array([2 * (dy * sy + dx) for dy, dx in FORWARD_2D], np.int64)


#: LOWBIT[c]: index of the lowest set bit of a 13-bit connection mask (iterating over set bits
#: only keeps the loop free of one unpredictable branch per neighbour).
LOWBIT = np.array([0] + [(c & -c).bit_length() - 1 for c in range(1, 1 << 13)], np.uint8)

# Neighbours of X that are also forward neighbours of an earlier neighbour A, as a shift and a
# mask mapping A's connection bits onto X's. A block connected to X and to A is in
# A's tree once A has been processed, so when X is connected to A it needs no union of its own.
# W = (0, 0, -1), bit 12: X's (dz, dy, dx) is W's (dz, dy, dx + 1).
# U = (0, -1, 0), bit 10: X's (dz, dy, dx) is U's (dz, dy + 1, dx).
# P = (-1, 0, 0), bit 4: X's (-1, dy, dx) is P's (0, dy, dx).
_W3_MASK = 0b110_1101_1011
_U3_MASK = 0b10_0011_1111
_P3_MASK = 0b1111


@numba.njit(cache=True, nogil=True)
def _info_slot(o, sy, sz, hx, hy, hz):
    # Where a block keeps BKE's information integer: a voxel of its own that is not its first
    # (x+1, else y+1, else z+1). -1: the block is a single voxel (only the very last block of an
    # array with all sizes odd), whose information the caller keeps in a variable instead.
    if hx:
        return o + 1
    if hy:
        return o + sy
    if hz:
        return o + sz
    return np.int64(-1)


def scratch(shape: tuple[int, int, int], ndim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Zeroed buffers of a scan: block masks and full connection masks of the current and the
    previous block plane (3D) or row (2D), padded by one block on every side a forward neighbour
    can fall off (so borders need no bounds checks), and one row of zeros (the rows past the
    border). Made here, not in the scans: every array numba allocates is code to compile."""
    nz, ny, nx = shape
    nbx = (nx + 1) // 2
    if ndim == 3:
        pad = (2, (ny + 1) // 2 + 1, nbx + 2)
        return np.zeros(pad, np.uint8), np.zeros(pad, np.uint16), np.zeros(nx, np.uint8)
    pad = (2, nbx + 2)
    return np.zeros(pad, np.uint8), np.zeros(pad, np.uint8), np.zeros(nx, np.uint8)


# The scans below are written out whole, without jitted helpers, and BKE's branches compile out
# of BUF's scan and BUF's out of BKE's: every helper and branch is code that numba compiles (and
# caches) on a first run.
# Mask bit k: voxel (k >> 2, (k >> 1) & 1, k & 1) of the block is foreground; x1 = min(x + 1,
# last) and the 0/1 multiplier hx replace a branch. Connection bit d: forward neighbour d is
# connected; mask rows are padded by one block on the left, so column bx + dx is at bx + 1 + dx.
# The input rows a block row reads (past the border: ``zero``) are views indexed from 0, so the
# inner loops index with provably non-negative integers.

# ----------------------------------------------------------------------------------------------
# 3D scans (26-connectivity, 2x2x2 blocks)


@numba.njit(cache=True, nogil=True)
def _scan3(img, L, nz, ny, nx, T, off, mb, cb, zero, pending):
    # BUF (pending None) or BKE's initialization (pending an array): numba compiles the branches
    # of the other one out, as ``pending`` is None or not in the signature itself.
    sy = nx
    sz = ny * nx
    sent = nz * sz
    nby = (ny + 1) // 2
    nbx = (nx + 1) // 2
    last = 0
    for bz in range((nz + 1) // 2):
        z = 2 * bz
        hz = z + 1 < nz
        cur = mb[bz & 1]
        prv = mb[(bz + 1) & 1]
        ccur = cb[bz & 1]
        cprv = cb[(bz + 1) & 1]
        for by in range(nby):
            y = 2 * by
            hy = y + 1 < ny
            base = z * sz + y * sy
            r00 = img[base : base + nx]
            r01 = img[base + sy : base + sy + nx] if hy else zero
            r10 = img[base + sz : base + sz + nx] if hz else zero
            r11 = img[base + sz + sy : base + sz + sy + nx] if hy and hz else zero
            Lr = L[base : base + nx]
            p0 = prv[by]
            p1 = prv[by + 1]
            p2 = prv[by + 2] if by + 2 <= nby else prv[0]
            c0 = cur[by]
            c1 = cur[by + 1]
            cp = cprv[by + 1]
            cu = ccur[by]
            cc = ccur[by + 1]
            w = 0
            rw = np.int64(-1)
            left = 0
            for bx in range(nbx):
                x = 2 * bx
                hx = x + 1 < nx
                x1 = min(x + 1, nx - 1)
                m = (
                    (r00[x] != 0)
                    | ((r01[x] != 0) << 2)
                    | ((r10[x] != 0) << 4)
                    | ((r11[x] != 0) << 6)
                    | (
                        (
                            ((r00[x1] != 0) << 1)
                            | ((r01[x1] != 0) << 3)
                            | ((r10[x1] != 0) << 5)
                            | ((r11[x1] != 0) << 7)
                        )
                        * hx
                    )
                )
                c1[bx + 1] = m
                if m == 0:
                    Lr[x] = sent
                    if hx:
                        # A zero information integer: BKE's reduction then needs no sentinel
                        # test (BUF's final labeling overwrites it anyway).
                        Lr[x + 1] = 0
                    cc[bx + 1] = 0
                    w = 0
                    continue
                t = T[m]
                conn = (
                    ((t[0] & p0[bx]) != 0)
                    | (((t[1] & p0[bx + 1]) != 0) << 1)
                    | (((t[2] & p0[bx + 2]) != 0) << 2)
                    | (((t[3] & p1[bx]) != 0) << 3)
                    | (((t[4] & p1[bx + 1]) != 0) << 4)
                    | (((t[5] & p1[bx + 2]) != 0) << 5)
                    | (((t[6] & p2[bx]) != 0) << 6)
                    | (((t[7] & p2[bx + 1]) != 0) << 7)
                    | (((t[8] & p2[bx + 2]) != 0) << 8)
                    | (((t[9] & c0[bx]) != 0) << 9)
                    | (((t[10] & c0[bx + 1]) != 0) << 10)
                    | (((t[11] & c0[bx + 2]) != 0) << 11)
                    | (((t[12] & c1[bx]) != 0) << 12)
                )
                cc[bx + 1] = conn
                # connections already implied by those of W, U and P (branch-free: -(bit) is
                # all ones when X is connected to that neighbour)
                u = np.int64(cu[bx + 1])
                p = np.int64(cp[bx + 1])
                todo = conn & ~(
                    (((w >> 1) & _W3_MASK) & -((conn >> 12) & 1))
                    | (((u >> 3) & _U3_MASK) & -((conn >> 10) & 1))
                    | (((p >> 9) & _P3_MASK) & -((conn >> 4) & 1))
                )
                w = conn
                o = base + x
                if pending is None:
                    r = np.int64(-1)  # an int64 from the start: no second merge for a literal
                    if todo & 4096:
                        # W's root is the one it ended with: no union has happened since.
                        r = rw
                        todo ^= 4096
                    while todo:
                        d = LOWBIT[todo]
                        todo &= todo - 1
                        n = o + off[d]
                        if np.int64(L[n]) != r:
                            r = merge(L, n, r)
                    rw = o if r < 0 else r
                    Lr[x] = rw
                else:
                    if conn:
                        first = LOWBIT[conn]
                        Lr[x] = o + off[first]
                        todo &= ~(np.int64(1) << first)
                    else:
                        Lr[x] = o
                    info = m | (todo << 8)
                    left |= todo
                    if hx:
                        Lr[x + 1] = info
                    else:
                        s = _info_slot(o, sy, sz, hx, hy, hz)
                        if s >= 0:
                            L[s] = info
                        else:
                            last = info
            if pending is not None:
                pending[bz * nby + by] = left != 0
    return last


def buf3_scan(img, L, nz, ny, nx, T, off, mb, cb, zero) -> None:
    """BUF 3D: block masks, connections and unions in one raster pass over the blocks
    (``mb``, ``cb``, ``zero``: :func:`scratch`)."""
    _scan3(img, L, nz, ny, nx, T, off, mb, cb, zero, None)


def bke3_init(img, L, nz, ny, nx, T, off, pending, mb, cb, zero) -> int:
    """BKE 3D initialization: link each block to its first connected neighbour, store its info.

    The information integer (bits 0-7 foreground voxels, bits 8-20 the forward neighbours the
    reduction must still unite with) goes into a voxel of the block other than its first;
    returns the information of a single-voxel last block, which has no such voxel.
    ``pending[bz * nby + by]`` is set where a block row has unions left for the reduction.
    ``mb``, ``cb``, ``zero``: :func:`scratch`.
    """
    return _scan3(img, L, nz, ny, nx, T, off, mb, cb, zero, pending)


# ----------------------------------------------------------------------------------------------
# 2D scans (8-connectivity, 2x2 blocks): forward neighbours 0-2 are the row above, 3 is W. X's
# (-1, dx) is W's (-1, dx + 1), and X's (-1, -1) is U's (0, -1).


@numba.njit(cache=True, nogil=True)
def _scan2(img, L, ny, nx, T, off, mb, cb, zero, pending):
    # BUF or BKE's initialization, as _scan3
    sy = nx
    sent = ny * nx
    nbx = (nx + 1) // 2
    last = 0
    for by in range((ny + 1) // 2):
        y = 2 * by
        hy = y + 1 < ny
        base = y * sy
        r0 = img[base : base + nx]
        r1 = img[base + sy : base + sy + nx] if hy else zero
        Lr = L[base : base + nx]
        c0 = mb[(by + 1) & 1]
        c1 = mb[by & 1]
        cu = cb[(by + 1) & 1]
        cc = cb[by & 1]
        w = 0
        left = 0
        for bx in range(nbx):
            x = 2 * bx
            hx = x + 1 < nx
            x1 = min(x + 1, nx - 1)
            m = (
                (r0[x] != 0)
                | ((r1[x] != 0) << 2)
                | ((((r0[x1] != 0) << 1) | ((r1[x1] != 0) << 3)) * hx)
            )
            c1[bx + 1] = m
            if m == 0:
                Lr[x] = sent
                if hx:
                    Lr[x + 1] = 0
                cc[bx + 1] = 0
                w = 0
                continue
            t = T[m]
            conn = (
                ((t[0] & c0[bx]) != 0)
                | (((t[1] & c0[bx + 1]) != 0) << 1)
                | (((t[2] & c0[bx + 2]) != 0) << 2)
                | (((t[3] & c1[bx]) != 0) << 3)
            )
            cc[bx + 1] = conn
            skip = (((w >> 1) & 0b011) & -((conn >> 3) & 1)) | (
                ((np.int64(cu[bx + 1]) >> 3) & 1) & -((conn >> 1) & 1)
            )
            todo = conn & ~skip
            w = conn
            o = base + x
            if pending is None:
                r = np.int64(-1)
                while todo:
                    d = LOWBIT[todo]
                    todo &= todo - 1
                    r = merge(L, o + off[d], r)
                Lr[x] = o if r < 0 else r
            else:
                if conn:
                    first = LOWBIT[conn]
                    Lr[x] = o + off[first]
                    todo &= ~(np.int64(1) << first)
                else:
                    Lr[x] = o
                info = m | (todo << 8)
                left |= todo
                s = _info_slot(o, sy, 0, hx, hy, False)
                if s >= 0:
                    L[s] = info
                else:
                    last = info
        if pending is not None:
            pending[by] = left != 0
    return last


def buf2_scan(img, L, ny, nx, T, off, mb, cb, zero) -> None:
    """BUF 2D: block masks, connections and unions in one raster pass over the blocks
    (``mb``, ``cb``, ``zero``: :func:`scratch`)."""
    _scan2(img, L, ny, nx, T, off, mb, cb, zero, None)


def bke2_init(img, L, ny, nx, T, off, pending, mb, cb, zero) -> int:
    """BKE 2D initialization (see :func:`bke3_init`; bits 8-11 are the 4 forward neighbours)."""
    return _scan2(img, L, ny, nx, T, off, mb, cb, zero, pending)


# ----------------------------------------------------------------------------------------------
# Passes shared by 2D and 3D


@numba.njit(cache=True, nogil=True)
def bke_reduce(L, nz, ny, nx, off, last, pending):
    """BKE reduction: unite each block with the neighbours its information integer lists.

    Block rows that the initialization did not flag in ``pending`` have nothing to unite and are
    skipped, which leaves little of this pass in sparse or coarse volumes.
    """
    sy = nx
    sz = ny * nx
    sent = nz * sz
    nby = (ny + 1) // 2
    for z in range(0, nz, 2):
        hz = z + 1 < nz
        for y in range(0, ny, 2):
            if not pending[(z >> 1) * nby + (y >> 1)]:
                continue
            hy = y + 1 < ny
            base = z * sz + y * sy
            Lr = L[base : base + nx]
            for x in range(0, nx, 2):
                if x + 1 < nx:
                    # Background blocks hold a zero information integer here.
                    todo = np.int64(Lr[x + 1]) >> 8
                elif np.int64(Lr[x]) == sent:
                    continue
                else:
                    s = _info_slot(base + x, sy, sz, False, hy, hz)
                    todo = (np.int64(L[s]) if s >= 0 else last) >> 8
                if todo == 0:
                    continue
                o = base + x
                r = find(L, o)
                while todo:
                    d = LOWBIT[todo]
                    todo &= todo - 1
                    r = merge(L, o + off[d], r)
    return 0


@numba.njit(cache=True, nogil=True)
def flatten(L, nz, ny, nx):
    """Replace every foreground block's entry by the dense id (0, 1, ...) of its tree.

    Ids follow the raster order of the roots. Parents precede children, so a parent's entry is
    already an id when its child is reached. Returns the number of trees.
    """
    sy = nx
    sz = ny * nx
    k = np.int64(0)
    for z in range(0, nz, 2):
        for y in range(0, ny, 2):
            base = z * sz + y * sy
            Lr = L[base : base + nx]
            for x in range(0, nx, 2):
                # Branch-free (background and roots are unpredictable in noisy volumes): a
                # background entry (the sentinel) and a root both read their own entry back.
                o = base + x
                p = np.int64(Lr[x])
                v = L[min(p, o)]
                root = p == o
                Lr[x] = k if root else v
                k += root
    return k


def final_buffers(shape: tuple[int, int, int], ntrees: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The buffers of :func:`final_labeling`: ``remap[id]``, the final label of tree id (0: not
    seen yet; background blocks read the last slot, whose nonzero dummy is multiplied by the
    zero voxels), and a block plane's tree ids."""
    _, ny, nx = shape
    remap = np.zeros(ntrees + 1, dtype)
    remap[ntrees] = 1
    return remap, np.empty(((ny + 1) // 2, (nx + 1) // 2), np.int64)


@numba.njit(cache=True, nogil=True)
def final_labeling(img, L, nz, ny, nx, ntrees, remap, ids):
    """Write every voxel's final label, numbering trees on first encounter in raster order
    (``remap``, ``ids``: :func:`final_buffers`).

    The block entries of a block plane are copied to a plane-sized buffer first, because writing
    the voxels of the plane's first voxel plane overwrites them. Returns the number of labels.
    """
    sy = nx
    sz = ny * nx
    nby = (ny + 1) // 2
    nbx = (nx + 1) // 2
    npairs = nx // 2
    nxt = 1
    for z0 in range(0, nz, 2):
        for by in range(nby):
            base = z0 * sz + 2 * by * sy
            Lb = L[base : base + nx]
            row = ids[by]
            for bx in range(nbx):
                row[bx] = min(np.int64(Lb[2 * bx]), ntrees)
        for z in range(z0, min(z0 + 2, nz)):
            for y in range(ny):
                row = ids[y >> 1]
                v = z * sz + y * sy
                Lr = L[v : v + nx]
                Ir = img[v : v + nx]
                for bx in range(npairs):
                    x = 2 * bx
                    i = row[bx]
                    r = remap[i]
                    a = np.int64(Ir[x] != 0)
                    b = np.int64(Ir[x + 1] != 0)
                    # One branch, taken only at a label's first voxel: testing r == 0 alone would
                    # mispredict on every visit of a block whose first voxel lies further on.
                    if (r == 0) & ((a | b) != 0):
                        r = nxt
                        remap[i] = nxt
                        nxt += 1
                    Lr[x] = a * r
                    Lr[x + 1] = b * r
                if nx & 1:
                    i = row[npairs]
                    r = remap[i]
                    a = np.int64(Ir[nx - 1] != 0)
                    if (r == 0) & (a != 0):
                        r = nxt
                        remap[i] = nxt
                        nxt += 1
                    Lr[nx - 1] = a * r
    return nxt - 1
