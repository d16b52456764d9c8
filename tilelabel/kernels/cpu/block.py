"""Block-based union find (BUF) and block-based Komura equivalence (BKE), sequential, in numba.

Allegretti, Bolelli, Grana, "Optimized Block-Based Algorithms to Label Connected Components on
GPUs" (TPDS 2020). Under full connectivity every foreground voxel of a 2x2x2 block has the same
label, so the union-find forest is built over blocks. A 2D image is the 3D case with ``nz == 1``
(its blocks have one voxel plane and no plane below), so one set of passes serves 2D 8- and 3D
26-connectivity.

1. :func:`masks`: each block's mask (bit k: voxel (k >> 2, (k >> 1) & 1, k & 1) of the block is
   foreground) into a block array padded by one block on each side in y and x, so that the
   neighbours of a block need no bounds checks.
2. :func:`_scan`: the foreground blocks in raster order (found 64 at a time from the masks). The
   connection to each of the 13 earlier neighbours is one table lookup ``T[mask_X, d] &
   mask_N`` (``T`` built from the paper's bitset ``0x77707770777``). A connection that an
   earlier neighbour W, U or P (left, above, below-plane) connected to X already implies needs
   no union of its own (``_W3_MASK`` and the others). BUF unites the rest at once; BKE links X
   to its first connected neighbour and keeps the rest in its information integer.
3. BKE only, :func:`bke_reduce`: each block united with the neighbours its information lists;
   block rows that listed none are skipped.
4. :func:`flatten`: one forward pass gives every tree a dense id (parents precede children).
5. :func:`final_labeling`: per block plane, the trees numbered on first encounter in raster
   order of their voxels, which is what ``scipy.ndimage.label`` does (a tree's root is its
   smallest *block*, not its first voxel), then every voxel written once.

Differences from the GPU formulation, all because one thread runs the blocks in raster order: the
forest is a block-sized array of its own (the paper keeps it in the output), which the scan, the
flattening and the numbering read at an eighth of the output's footprint, and which lets the
output be written once, at the end, whole rows at a time; every block's mask is kept (and the
connections of the current and the previous block plane), so connectivity to an earlier block
is one lookup instead of re-reading the neighbour's voxels.
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.runs import _ctz
from tilelabel.kernels.cpu.unionfind import find, merge

#: Earlier neighbour blocks, in raster order of their index (so the lowest set bit of a
#: connection mask is the neighbour with the smallest index, the one BKE links to first).
FORWARD_3D = [(dz, dy, dx) for dz in (-1, 0) for dy in (-1, 0, 1) for dx in (-1, 0, 1)][:13]

#: The 3x3x3 neighbourhood of a block's first voxel in the paper's 4x4x4 bitset.
BITSET_3D = 0x77707770777


def _voxels() -> list[tuple[int, int, int]]:
    # Bit k of a block mask is the voxel whose coordinates inside the block are the binary
    # digits of k (z, y, x from most to least significant): bit 0 first voxel, bit 1 its x+1.
    return [((k >> 2) & 1, (k >> 1) & 1, k & 1) for k in range(8)]


def connection_table() -> np.ndarray:
    """``T[m, d]``: voxels of forward neighbour ``d`` that touch a voxel of a block with mask ``m``.

    Built as in the paper: each foreground voxel of the block sets its 3x3x3 neighbourhood in a
    4x4x4 bitset centred on the block; the neighbour's voxels are then looked up in that bitset.
    """
    weights = [16, 4, 1]
    voxels = _voxels()
    one = np.uint64(1)
    masks = np.arange(256, dtype=np.uint64)  # every mask at once (at import time)
    bs = np.zeros(masks.size, np.uint64)
    for k, v in enumerate(voxels):
        shift = sum(c * w for c, w in zip(v, weights, strict=True))
        bs |= ((masks >> np.uint64(k)) & one) * np.uint64(BITSET_3D << shift)
    table = np.zeros((masks.size, 16), np.uint8)
    for d, nb in enumerate(FORWARD_3D):
        for k, v in enumerate(voxels):
            cube = [1 + 2 * o + c for o, c in zip(nb, v, strict=True)]
            if all(0 <= c < 4 for c in cube):
                at = np.uint64(sum(c * w for c, w in zip(cube, weights, strict=True)))
                table[:, d] |= (((bs >> at) & one) << np.uint64(k)).astype(np.uint8)
    return table


T3 = connection_table()


def block_shape(shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """Blocks per axis: ``(nbz, nby, nbx)`` (the block arrays pad y and x by one each side)."""
    nz, ny, nx = shape
    return (nz + 1) // 2, (ny + 1) // 2, (nx + 1) // 2


def forward_offsets(nby: int, nbx: int) -> np.ndarray:
    """Offsets in the padded block array from a block to each forward neighbour, as uint64
    (two's complement: adding one to an unsigned index wraps to the neighbour), so that the
    scan's indices are unsigned and numba adds no negative-index checks."""
    sy = nbx + 2
    sz = (nby + 2) * sy
    off = np.array([dz * sz + dy * sy + dx for dz, dy, dx in FORWARD_3D], np.int64)
    return off.view(np.uint64)


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
def masks(img, M, nz, ny, nx, zero):
    """Every block's mask into the padded block array ``M`` (zeros: the padding stays so);
    ``zero``: a row of ``nx`` zeros, read for the rows past the border."""
    sy = nx
    sz = ny * nx
    nby = (ny + 1) // 2
    nbx = (nx + 1) // 2
    bsy = nbx + 2
    npairs = nx // 2
    for bz in range((nz + 1) // 2):
        z = 2 * bz
        hz = z + 1 < nz
        for by in range(nby):
            y = 2 * by
            hy = y + 1 < ny
            base = z * sz + y * sy
            r00 = img[base : base + nx]
            r01 = img[base + sy : base + sy + nx] if hy else zero
            r10 = img[base + sz : base + sz + nx] if hz else zero
            r11 = img[base + sz + sy : base + sz + sy + nx] if hy and hz else zero
            o = (bz * (nby + 2) + by + 1) * bsy + 1
            Mr = M[o : o + nbx]
            for bx in range(npairs):
                x = 2 * bx
                Mr[bx] = (
                    (r00[x] != 0)
                    | ((r00[x + 1] != 0) << 1)
                    | ((r01[x] != 0) << 2)
                    | ((r01[x + 1] != 0) << 3)
                    | ((r10[x] != 0) << 4)
                    | ((r10[x + 1] != 0) << 5)
                    | ((r11[x] != 0) << 6)
                    | ((r11[x + 1] != 0) << 7)
                )
            if nx & 1:
                x = nx - 1
                Mr[npairs] = (
                    (r00[x] != 0)
                    | ((r01[x] != 0) << 2)
                    | ((r10[x] != 0) << 4)
                    | ((r11[x] != 0) << 6)
                )


# The scan is written out whole, without jitted helpers, and BKE's branches compile out of
# BUF's scan and BUF's out of BKE's: every helper and branch is code that numba compiles (and
# caches) on a first run. Indices are unsigned (numba then adds no negative-index checks). A
# neighbour's connection entry is read whether or not X is connected to it: a stale entry (of a
# background block) is masked off by X's own bit for that neighbour, which is then 0.


@numba.njit(cache=True, nogil=True)
def _scan(M, P, C, nbz, nby, nbx, T, off, info, pending):
    # BUF (info None) or BKE's initialization (info and pending arrays): numba compiles the
    # branches of the other one out, as ``info`` is None or not in the signature itself.
    one = np.uint64(1)
    bsy = np.uint64(nbx + 2)
    o0, o1, o2, o3, o4, o5, o6 = off[0], off[1], off[2], off[3], off[4], off[5], off[6]
    o7, o8, o9, o10, o11 = off[7], off[8], off[9], off[10], off[11]
    for bz in range(nbz):
        lower = bz > 0  # a plane below (no padding plane: its 9 tests are skipped instead)
        Cc = C[bz & 1]
        Cp = C[(bz + 1) & 1]
        for by in range(nby):
            o = np.uint64((bz * (nby + 2) + by + 1) * (nbx + 2) + 1)
            oc = np.uint64((by + 1) * (nbx + 2) + 1)
            Mr = M[o : o + np.uint64(nbx)]
            rw = np.int64(-1)
            left = 0
            for x0 in range(0, nbx, 64):
                fg = np.uint64(0)
                for i in range(min(64, nbx - x0)):
                    fg |= np.uint64(Mr[x0 + i] != 0) << np.uint64(i)
                while fg:
                    ux = np.uint64(x0) + np.uint64(_ctz(fg))
                    fg &= fg - one
                    b = o + ux
                    t = np.uint64(M[b]) << np.uint64(4)
                    conn = (
                        (((T[t + np.uint64(9)] & M[b + o9]) != 0) << 9)
                        | (((T[t + np.uint64(10)] & M[b + o10]) != 0) << 10)
                        | (((T[t + np.uint64(11)] & M[b + o11]) != 0) << 11)
                        | (((T[t + np.uint64(12)] & M[b - one]) != 0) << 12)
                    )
                    if lower:
                        conn |= (
                            ((T[t] & M[b + o0]) != 0)
                            | (((T[t + np.uint64(1)] & M[b + o1]) != 0) << 1)
                            | (((T[t + np.uint64(2)] & M[b + o2]) != 0) << 2)
                            | (((T[t + np.uint64(3)] & M[b + o3]) != 0) << 3)
                            | (((T[t + np.uint64(4)] & M[b + o4]) != 0) << 4)
                            | (((T[t + np.uint64(5)] & M[b + o5]) != 0) << 5)
                            | (((T[t + np.uint64(6)] & M[b + o6]) != 0) << 6)
                            | (((T[t + np.uint64(7)] & M[b + o7]) != 0) << 7)
                            | (((T[t + np.uint64(8)] & M[b + o8]) != 0) << 8)
                        )
                    c = oc + ux
                    Cc[c] = conn
                    w = np.int64(Cc[c - one])
                    u = np.int64(Cc[c - bsy])
                    p = np.int64(Cp[c])
                    # connections already implied by those of W, U and P (branch-free: -(bit)
                    # is all ones when X is connected to that neighbour)
                    todo = conn & ~(
                        (((w >> 1) & _W3_MASK) & -((conn >> 12) & 1))
                        | (((u >> 3) & _U3_MASK) & -((conn >> 10) & 1))
                        | (((p >> 9) & _P3_MASK) & -((conn >> 4) & 1))
                    )
                    if info is None:
                        r = np.int64(-1)  # an int64 from the start: no second merge for a literal
                        if todo & 4096:
                            # W came just before and ended with this root: no union since.
                            r = rw
                            todo ^= 4096
                        while todo:
                            d = LOWBIT[todo]
                            todo &= todo - 1
                            n = np.int64(b + off[d])
                            if np.int64(P[n]) != r:
                                r = merge(P, n, r)
                        rw = np.int64(b) if r < 0 else r
                        P[b] = rw
                    else:
                        if conn:
                            first = LOWBIT[conn]
                            P[b] = b + off[first]
                            todo &= ~(np.int64(1) << first)
                        else:
                            P[b] = b
                        info[b] = todo
                        left |= todo
            if pending is not None:
                pending[bz * nby + by] = left != 0


def buf_scan(M, P, C, nbz, nby, nbx, off) -> None:
    """BUF: connections and unions in one raster pass over the foreground blocks (``C``:
    zeros, the connections of two block planes)."""
    _scan(M, P, C, nbz, nby, nbx, T3.reshape(-1), off, None, None)


def bke_init(M, P, C, nbz, nby, nbx, off, info, pending) -> None:
    """BKE initialization: link each foreground block to its first connected neighbour and
    keep in ``info`` (zeros) the forward neighbours the reduction must still unite it with;
    ``pending[bz * nby + by]`` is set where a block row has unions left for the reduction."""
    _scan(M, P, C, nbz, nby, nbx, T3.reshape(-1), off, info, pending)


@numba.njit(cache=True, nogil=True)
def bke_reduce(P, info, nbz, nby, nbx, off, pending):
    """BKE reduction: unite each block with the neighbours its information integer lists.

    Block rows that the initialization did not flag in ``pending`` have nothing to unite and are
    skipped, which leaves little of this pass in sparse or coarse volumes.
    """
    for bz in range(nbz):
        for by in range(nby):
            if not pending[bz * nby + by]:
                continue
            o = np.uint64((bz * (nby + 2) + by + 1) * (nbx + 2) + 1)
            for bx in range(nbx):
                b = o + np.uint64(bx)
                todo = np.int64(info[b])
                if todo == 0:
                    continue
                r = find(P, np.int64(b))
                while todo:
                    d = LOWBIT[todo]
                    todo &= todo - 1
                    r = merge(P, np.int64(b + off[d]), r)
    return 0


@numba.njit(cache=True, nogil=True)
def flatten(M, P, nbz, nby, nbx):
    """Replace every foreground block's entry by the dense id (1, 2, ...) of its tree, and every
    background block's by 0.

    Ids follow the raster order of the roots. Parents precede children, so a parent's entry is
    already an id when its child is reached. Returns the number of trees.
    """
    k = np.uint64(0)
    for bz in range(nbz):
        for by in range(nby):
            o = np.uint64((bz * (nby + 2) + by + 1) * (nbx + 2) + 1)
            for bx in range(nbx):
                # Branch-free (background and roots are unpredictable in noisy volumes): a
                # background entry is garbage, min() keeps its read in bounds.
                b = o + np.uint64(bx)
                p = np.uint64(P[b])
                fg = M[b] != 0
                v = P[min(p, b)]
                root = (p == b) & fg
                k += np.uint64(root)
                P[b] = k if root else (np.uint64(v) if fg else np.uint64(0))
    return np.int64(k)


@numba.njit(cache=True, nogil=True)
def final_labeling(M, P, L, nz, ny, nx, remap, lab):
    """Write every voxel's final label, numbering trees on first encounter in raster order.

    ``remap``: the final label of each tree id, 0 until it is numbered (id 0, the background's,
    nonzero); ``lab``: (nby, nbx), a block plane's labels. A tree is first met in the block plane
    of its root, so each block plane is numbered (voxel rows in raster order, each block's
    voxels of that row read from its mask) before its voxels are written; a plane of one voxel
    plane (2D) block row by block row, while its rows are in cache. Returns the number of labels.
    """
    sy = nx
    sz = ny * nx
    nby = (ny + 1) // 2
    nbx = (nx + 1) // 2
    npairs = nx // 2
    three = np.uint8(3)
    one = np.uint8(1)
    nxt = 1
    for bz in range((nz + 1) // 2):
        nh = min(2, nz - 2 * bz)
        step = nby if nh == 2 else 1
        for b0 in range(0, nby, step):
            y0 = 2 * b0
            y1 = min(2 * (b0 + step), ny)
            for h in range(nh):
                for y in range(y0, y1):
                    s = np.uint8(4 * h + 2 * (y & 1))
                    o = (bz * (nby + 2) + (y >> 1) + 1) * (nbx + 2) + 1
                    Mr = M[o : o + nbx]
                    Pr = P[o : o + nbx]
                    for bx in range(nbx):
                        i = Pr[bx]
                        # One branch, taken only at a label's first voxel (background blocks
                        # have id 0 and no voxel, so they never take it).
                        if (remap[i] == 0) & (((Mr[bx] >> s) & three) != 0):
                            remap[i] = nxt
                            nxt += 1
            for by in range(b0, min(b0 + step, nby)):
                o = (bz * (nby + 2) + by + 1) * (nbx + 2) + 1
                Pr = P[o : o + nbx]
                lr = lab[by]
                for bx in range(nbx):
                    lr[bx] = remap[Pr[bx]]
            for h in range(nh):
                z = 2 * bz + h
                for y in range(y0, y1):
                    s = np.uint8(4 * h + 2 * (y & 1))
                    o = (bz * (nby + 2) + (y >> 1) + 1) * (nbx + 2) + 1
                    Mr = M[o : o + nbx]
                    lr = lab[y >> 1]
                    v = z * sz + y * sy
                    Lr = L[v : v + nx]
                    for bx in range(npairs):
                        m = Mr[bx] >> s
                        Lr[2 * bx] = lr[bx] * (m & one)
                        Lr[2 * bx + 1] = lr[bx] * ((m >> one) & one)
                    if nx & 1:
                        Lr[nx - 1] = lr[npairs] * ((Mr[npairs] >> s) & one)
    return nxt - 1


def label(img: np.ndarray, L: np.ndarray, dims: tuple[int, int, int], bke: bool = False) -> int:
    """Label the flat uint8 image ``img`` of shape ``dims`` (``(1, ny, nx)`` for 2D) into the
    flat label array ``L`` with BUF (or BKE); returns the number of labels. Every buffer is made
    here, not in the passes: every array numba allocates is code to compile."""
    nz, ny, nx = dims
    nbz, nby, nbx = block_shape(dims)
    plane = (nby + 2) * (nbx + 2)
    M = np.zeros(nbz * plane, np.uint8)
    masks(img, M, nz, ny, nx, np.zeros(nx, np.uint8))
    # the padded block count can pass the voxel count (rows of one voxel), so uint32 may not hold
    P = np.empty(M.size, L.dtype if M.size <= np.iinfo(L.dtype).max else np.uint64)
    C = np.zeros((2, plane), np.uint16)
    off = forward_offsets(nby, nbx)
    if bke:
        info = np.zeros(M.size, np.uint16)
        pending = np.empty(nbz * nby, np.uint8)
        bke_init(M, P, C, nbz, nby, nbx, off, info, pending)
        bke_reduce(P, info, nbz, nby, nbx, off, pending)
    else:
        buf_scan(M, P, C, nbz, nby, nbx, off)
    ntrees = flatten(M, P, nbz, nby, nbx)
    remap = np.zeros(ntrees + 1, L.dtype)
    remap[0] = 1  # background: never "not numbered yet" (its voxels multiply it by 0)
    return final_labeling(M, P, L, nz, ny, nx, remap, np.empty((nby, nbx), L.dtype))
