"""Run-based union find (SEG), sequential, in numba: every connectivity, made for 2D 4 and 3D 6.

The foreground voxels of a row form runs, and runs are the union-find nodes: a run's node is the
entry of its first voxel in the output array (the forest of :mod:`.unionfind`, parents at
smaller indices). Two runs of neighbouring rows are united only at a voxel where one of them
starts (HA4's rule; ``cuda/seg.cu`` states it), so a run costs a few unions whatever its length.
Rows are handled as 64-bit masks, which finds the runs and those voxels with a few bit operations
per 64 voxels.

1. :func:`pack`: one bit per voxel, each row padded to whole 64-bit words.
2. :func:`unite`: rows in raster order; each run's first voxel becomes a root, then the runs are
   united with those of the earlier neighbour rows (``DIRECTIONS``). Where every voxel of a
   row lies on a voxel of the row below (the plane before), each of its runs lies on one run
   there, and at 18 and 26 most of its other neighbours touch that run too, so are in its tree
   already: those directions are skipped, in whole or but for the runs' ends.
3. :func:`write_labels`: runs in raster order; a root gets the next label, any other run its
   parent's label (parents come earlier); runs and the gaps between them are written whole.

A union keeps the smaller root, so a root is its component's first voxel and labels come out in
scipy's order.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

from tilelabel.kernels.cpu.unionfind import find, merge

#: Earlier neighbour rows per (ndim, connectivity): (dz, dy, wide, inside). ``wide``: voxels
#: x - 1 and x + 1 of that row neighbour voxel x too, not only voxel x. ``inside``: what the
#: row needs of that direction when all its voxels lie on voxels of the row below, (z - 1, y):
#: each of its runs then lies on one run B there, and a run that touches it through a voxel
#: with a voxel of B beside it is in B's tree already (they are earlier rows, united when the
#: later of them was scanned): 0 every pair, 1 only the pairs at a run's ends (x - 1, x + 1),
#: 2 none.
DIRECTIONS: dict[tuple[int, int], np.ndarray] = {
    (2, 4): np.array([(0, -1, 0, 0)], np.int64),
    (2, 8): np.array([(0, -1, 1, 0)], np.int64),
    (3, 6): np.array([(0, -1, 0, 0), (-1, 0, 0, 0)], np.int64),
    (3, 18): np.array([(0, -1, 1, 1), (-1, -1, 0, 2), (-1, 0, 1, 0), (-1, 1, 0, 2)], np.int64),
    (3, 26): np.array([(0, -1, 1, 2), (-1, -1, 1, 2), (-1, 0, 1, 0), (-1, 1, 1, 2)], np.int64),
}

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
#: gathers the lowest bit of each of 8 bytes into one byte
_GATHER = np.uint64(0x0102040810204080)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _ctz(x):
    """Index of the lowest set bit of ``x`` (nonzero uint64): one instruction (LLVM's cttz)."""
    return np.int64(trailing_zeros(x))


@numba.njit(cache=True, nogil=True, _nrt=False)
def _msb(x):
    """Index of the highest set bit of ``x`` (nonzero uint64): one instruction (LLVM's ctlz)."""
    return 63 - np.int64(leading_zeros(x))


@numba.njit(cache=True, nogil=True, _nrt=False)
def _last(starts, x0, before):
    """First voxel of the last run starting in ``starts`` (the run starts of a word from voxel
    ``x0`` on), or ``before`` where none does (branch-free: a select)."""
    return x0 + _msb(starts) if starts else before


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

    A pair's two runs are found from the run starts of their rows' words (and the last start
    of the words before), without a search: one loop per kind of pair, so that no branch asks
    which kind a pair is. A row that lies on the row below (``inside``) skips the pairs that
    the direction's ``inside`` entry says are implied.
    """
    nwr = P.shape[1]
    c63 = np.uint64(63)
    two = np.uint64(2)
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
            inside = z > 0  # every voxel of the row lies on one of the row below
            if inside:
                for w in range(nwr):
                    inside &= (P[r, w] & ~P[r - ny, w]) == 0
            for d in range(dirs.shape[0]):
                zz = z + dirs[d, 0]
                yy = y + dirs[d, 1]
                wide = dirs[d, 2] != 0
                need = dirs[d, 3] if inside else 0
                if zz < 0 or yy < 0 or yy >= ny or need == 2:
                    continue
                overlaps = _ALL if need == 0 else np.uint64(0)
                q = zz * ny + yy
                nbase = q * nx
                cc = np.uint64(0)
                cn = np.uint64(0)
                lc = np.int64(0)  # first voxel of each row's last run that starts before the word
                ln = np.int64(0)
                for w in range(nwr):
                    c = P[r, w]
                    n = P[q, w]
                    stc = c & ~((c << _ONE) | cc)
                    stn = n & ~((n << _ONE) | cn)
                    cc = c >> c63
                    cn = n >> c63
                    x0 = w << 6
                    if c != 0:
                        # pairs (x, x): one of the two runs starts at x; (x, x - 1): x starts
                        # its run and x - 1 (not x) is in the other row; (x, x + 1): x + 1
                        # starts a run of the other row and x is not in it. One loop per kind,
                        # so that no branch asks which kind a pair is.
                        same = c & n & (stc | stn) & overlaps
                        while same:
                            i = np.uint64(_ctz(same))
                            same &= same - _ONE
                            upto = (two << i) - _ONE  # bits 0..i
                            root = find(L, base + _last(stc & upto, x0, lc))
                            merge(L, nbase + _last(stn & upto, x0, ln), root)
                        if wide:
                            left = n << _ONE
                            right = n >> _ONE
                            if w > 0:
                                left |= P[q, w - 1] >> c63
                            if w + 1 < nwr:
                                right |= P[q, w + 1] << c63
                            left &= stc & ~n
                            right &= c & ~n
                            while left:
                                i = np.uint64(_ctz(left))
                                left &= left - _ONE
                                root = find(L, base + x0 + np.int64(i))
                                below = (_ONE << i) - _ONE  # bits 0..i-1: x - 1 is in the word
                                merge(L, nbase + _last(stn & below, x0, ln), root)
                            while right:
                                i = np.uint64(_ctz(right))
                                right &= right - _ONE
                                root = find(L, base + _last(stc & ((two << i) - _ONE), x0, lc))
                                merge(L, nbase + x0 + np.int64(i) + 1, root)
                    lc = _last(stc, x0, lc)
                    ln = _last(stn, x0, ln)
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
