"""Run-based union find (SEG), sequential, in numba: every connectivity, made for 2D 4 and 3D 6.

The foreground voxels of a row form runs, and runs are the union-find nodes: a run's node is the
entry of its first voxel in the output array (the forest of :mod:`.unionfind`, parents at
smaller indices). Two runs of neighbouring rows are united only at a voxel where one of them
starts (HA4's rule; ``cuda/seg.cu`` states it), so a run costs a few unions whatever its length.
Rows are handled as 64-bit masks, which finds the runs and those voxels with a few bit operations
per 64 voxels.

1. :func:`pack`: one bit per voxel, each row padded to whole 64-bit words.
2. :func:`unite`: rows in raster order; each run's first voxel becomes a root, then the runs are
   united with those of the earlier neighbour rows (``DIRECTIONS``).
3. :func:`write_labels`: runs in raster order; a root gets the next label, any other run its
   parent's label (parents come earlier); runs and the gaps between them are written whole.

A union keeps the smaller root, so a root is its component's first voxel and labels come out in
scipy's order.
"""

from __future__ import annotations

import numba
import numpy as np

from tilelabel.kernels.cpu.unionfind import find, merge

#: Earlier neighbour rows per (ndim, connectivity): (dz, dy, wide), where wide means that voxels
#: x - 1 and x + 1 of that row neighbour voxel x too, not only voxel x.
DIRECTIONS: dict[tuple[int, int], np.ndarray] = {
    (2, 4): np.array([(0, -1, 0)], np.int64),
    (2, 8): np.array([(0, -1, 1)], np.int64),
    (3, 6): np.array([(0, -1, 0), (-1, 0, 0)], np.int64),
    (3, 18): np.array([(0, -1, 1), (-1, -1, 0), (-1, 0, 1), (-1, 1, 0)], np.int64),
    (3, 26): np.array([(0, -1, 1), (-1, -1, 1), (-1, 0, 1), (-1, 1, 1)], np.int64),
}

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
#: de Bruijn sequence and table: index of the lowest set bit with one multiplication
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DB_INDEX = np.zeros(64, np.int64)
for _i in range(64):
    _DB_INDEX[(((1 << _i) * 0x03F79D71B4CB0A89) & (2**64 - 1)) >> 58] = _i
#: gathers the lowest bit of each of 8 bytes into one byte
_GATHER = np.uint64(0x0102040810204080)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _ctz(x):
    """Index of the lowest set bit of ``x`` (nonzero uint64)."""
    return _DB_INDEX[((x & (~x + _ONE)) * _DEBRUIJN) >> np.uint64(58)]


@numba.njit(cache=True, nogil=True, _nrt=False)
def _msb(x):
    """Index of the highest set bit of ``x`` (nonzero uint64)."""
    for s in (1, 2, 4, 8, 16, 32):
        x |= x >> np.uint64(s)
    return _ctz(x ^ (x >> _ONE))


@numba.njit(cache=True, nogil=True, _nrt=False)
def _bit(m, i):
    return (m >> np.uint64(i)) & _ONE


@numba.njit(cache=True, nogil=True, _nrt=False)
def _start(P, r, x):
    """First voxel of the run of row ``r`` that holds voxel ``x``."""
    w = x >> 6
    z = ~P[r, w] & ((np.uint64(2) << np.uint64(x & 63)) - _ONE)  # background at or before x
    while z == 0:
        w -= 1
        if w < 0:
            return np.int64(0)
        z = ~P[r, w]
    return (w << 6) + _msb(z) + 1


@numba.njit(cache=True, nogil=True, _nrt=False)
def _next(P, r, x, flip):
    """First voxel at or after ``x`` of row ``r`` that is foreground (``flip`` 0) or background
    (``flip`` all ones); a position past the row when there is none."""
    nwr = P.shape[1]
    w = x >> 6
    m = (P[r, w] ^ flip) & (_ALL << np.uint64(x & 63))
    while m == 0:
        w += 1
        if w == nwr:
            return np.int64(nwr << 6)
        m = P[r, w] ^ flip
    return (w << 6) + _ctz(m)


@numba.njit(cache=True, nogil=True)
def pack(img, img64, nrows, nx, P, F):
    """``P[r, w]`` bit i: voxel 64 w + i of row r is foreground. ``img64`` is the first
    ``img.size // 8`` groups of 8 voxels, read 8 at a time; ``F``: zeros, one bit per voxel of
    the flat volume and one word more (``(img.size + 63) // 64 + 1`` words)."""
    low = np.uint64(0x0101010101010101)
    for k in range(img64.size):
        t = img64[k]
        t |= t >> np.uint64(4)
        t |= t >> np.uint64(2)
        t |= t >> _ONE
        F[k >> 3] |= (((t & low) * _GATHER) >> np.uint64(56)) << np.uint64((k & 7) * 8)
    for v in range(img64.size * 8, img.size):
        if img[v]:
            F[v >> 6] |= _ONE << np.uint64(v & 63)
    nwr = P.shape[1]
    for r in range(nrows):
        for w in range(nwr):
            b = r * nx + (w << 6)
            j = b >> 6
            o = np.uint64(b & 63)
            m = F[j] >> o
            if o:
                m |= F[j + 1] << (np.uint64(64) - o)
            rest = nx - (w << 6)
            if rest < 64:
                m &= (_ONE << np.uint64(rest)) - _ONE
            P[r, w] = m


@numba.njit(cache=True, nogil=True)
def unite(P, L, nz, ny, nx, dirs):
    """Roots at the runs' first voxels, then unions with the runs of the rows ``dirs``.

    A direction's pairs come in increasing x, so the runs of the row come one after the other:
    the root of the current one is kept (``merge``) instead of found again for each pair.
    """
    nwr = P.shape[1]
    c63 = np.uint64(63)
    for z in range(nz):
        for y in range(ny):
            r = z * ny + y
            base = r * nx
            carry = np.uint64(0)
            for w in range(nwr):
                m = P[r, w]
                st = m & ~((m << _ONE) | carry)
                carry = m >> c63
                while st:
                    v = base + (w << 6) + _ctz(st)
                    st &= st - _ONE
                    L[v] = v
            for d in range(dirs.shape[0]):
                zz = z + dirs[d, 0]
                yy = y + dirs[d, 1]
                wide = dirs[d, 2] != 0
                if zz < 0 or yy < 0 or yy >= ny:
                    continue
                q = zz * ny + yy
                nbase = q * nx
                cc = np.uint64(0)
                cn = np.uint64(0)
                a = np.int64(-1)  # first voxel of the current run and its root
                root = np.int64(-1)
                for w in range(nwr):
                    c = P[r, w]
                    n = P[q, w]
                    stc = c & ~((c << _ONE) | cc)
                    stn = n & ~((n << _ONE) | cn)
                    cc = c >> c63
                    cn = n >> c63
                    if c == 0:
                        continue
                    x0 = w << 6
                    # pairs (x, x): one of the two runs starts at x; (x, x - 1): x starts its
                    # run and x - 1 (not x) is in the other row; (x, x + 1): x + 1 starts a run
                    # of the other row and x is not in it
                    same = c & n & (stc | stn)
                    left = np.uint64(0)
                    right = np.uint64(0)
                    if wide:
                        left = n << _ONE
                        right = n >> _ONE
                        if w > 0:
                            left |= P[q, w - 1] >> c63
                        if w + 1 < nwr:
                            right |= P[q, w + 1] << c63
                        left &= stc & ~n
                        right &= c & ~n
                    pairs = same | left | right
                    while pairs:
                        i = _ctz(pairs)
                        pairs &= pairs - _ONE
                        x = x0 + i
                        s = x if _bit(stc, i) else _start(P, r, x)
                        if s != a:
                            a = s
                            root = find(L, base + s)
                        if _bit(same, i):
                            b = x if _bit(stn, i) else _start(P, q, x)
                            root = merge(L, nbase + b, root)
                        if _bit(left, i):
                            root = merge(L, nbase + _start(P, q, x - 1), root)
                        if _bit(right, i):
                            root = merge(L, nbase + x + 1, root)
    return 0


@numba.njit(cache=True, nogil=True)
def write_labels(P, L, nrows, nx, lab):
    """Final labels 1..n in raster order of the runs' roots; return n.

    Word by word: first the label of each run that starts in the word (a root takes the next
    label, any other run its parent's, which comes earlier and already holds its label), then
    the word's voxels: whole for an empty word or one inside a run, else voxel by voxel without
    a branch (the run index grows at each start, background voxels read slot 0). Writes go
    through a view of the word's voxels, so that indices are known to be non-negative.
    ``lab``: 66 int64 zeros, the labels of a word's runs (0: background; 1: the run continuing
    from the word before; 1 + j: the j-th run starting in the word).
    """
    nwr = P.shape[1]
    c63 = np.uint64(63)
    k = 0
    for r in range(nrows):
        base = r * nx
        carry = np.uint64(0)
        for w in range(nwr):
            m = P[r, w]
            starts = m & ~((m << _ONE) | carry)
            carry = m >> c63
            x0 = base + (w << 6)
            out = L[x0 : x0 + min(64, nx - (w << 6))]
            if m == 0:
                out[:] = 0
                continue
            if starts == 0 and m == _ALL:
                out[:] = lab[1]
                continue
            st = starts
            j = 1
            while st:
                s = x0 + _ctz(st)
                st &= st - _ONE
                p = np.int64(L[s])
                j += 1
                if p == s:
                    k += 1
                    lab[j] = k
                else:
                    lab[j] = L[p]
                L[s] = lab[j]
            j = 1
            fg = np.int64(m)
            sts = np.int64(starts)
            for i in range(out.size):
                j += sts & 1
                out[i] = lab[j * (fg & 1)]
                fg >>= 1
                sts >>= 1
            lab[1] = lab[j]
    return k
