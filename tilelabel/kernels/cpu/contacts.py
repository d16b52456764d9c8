"""The region graph in numba: which labels touch, in how many voxel pairs, over how much area.

For a label image (2D or 3D, any integer or bool dtype, 0 the background), every pair of
voxels p, q = p + s, s an offset of the connectivity's neighbourhood (4/8 in 2D, 6/18/26 in 3D),
with distinct nonzero labels a, b counts once for the pair (min(a, b), max(a, b)):

- ``counts``: the number of such voxel pairs (faces, edges and corners alike, each pair once);
- ``areas``: the face contacts only, each weighted by the product of the spacing of the other
  axes (2D: a face along axis 0 weighs ``spacing[1]``, along axis 1 ``spacing[0]``); edge and
  corner contacts weigh 0, so a pair that touches only there is present with area 0;
- the pairs themselves: the region graph.

These are cc3d's ``contacts(labels, connectivity, surface_area=False)`` (``counts``),
``contacts(labels, connectivity, surface_area=True, anisotropy=spacing)`` (``areas``; cc3d's
x, y, z are numpy axes 0, 1, 2 whatever the memory order, and in 2D it reads the first two of
its three weights) and ``region_graph`` (the pairs), but for two things of cc3d's own
(connected-components-3d 4.1.1), both of its implementation:

- cc3d sums in float32: its counts are exact below 2^24 only and its areas carry float32
  rounding; here counts are int64 and areas float64 (per-axis int64 face counts times weights);
- cc3d clamps a neighbour offset to 0 per axis at the volume's edge without always dropping
  it, so with 8 and 26 some voxel pairs at the edge count more than once in its counts (the
  extra looks land on face or edge neighbours and weigh 0 in the area, so its areas and pair
  set are unaffected). 8: a face pair along axis 0 whose voxels have axis 1's index 0 counts 3
  times, and a face pair along axis 1 at axis 0's index 0, or its last, once more for each
  (3 times if axis 0 has size 1). 26: an edge pair of offset (0, 1, 1) or (0, 1, -1) at axis
  0's index 0, or its last, counts once more for each. 4, 6 and 18 are exact, and so is every
  connectivity where the image's outermost voxels are 0. Here every voxel pair counts once,
  which is what adds up over chunks.

The count is additive over chunks: a *framed* block is a chunk with a one-voxel halo on every
side (the neighbouring chunks' voxels, 0 at the volume's edge, or the wrapped-around ones for
periodic boundaries), and only the pairs (p, p + s) with p in the core and s in the forward half
of the neighbourhood (first nonzero component +1: p comes first in raster order) count there,
so that the chunks' results sum to every pair of the volume, each once.

1. :func:`frame`: a whole image with its halo (zeros, or wrapped around).
2. :func:`forward_offsets`: the forward half of the neighbourhood and each offset's class
   (a face along axis i: class i; an edge or a corner: class ``ndim``).
3. :func:`_scan` (through :func:`_row`): one pass over the core rows. Per row and forward
   offset, a vectorized compare marks the voxels whose labels differ and are both nonzero, the
   marked positions are gathered 8 marks at a time, and each mark adds 1 to its pair's count of
   its class in a small direct-mapped cache. A key the cache drops goes, with its counts, to an
   eviction buffer (:func:`_evict`), which is added 256 rows at a time (:func:`_flush`) into an
   open-addressing hash table of every pair; :func:`rehash` doubles the table before it is 70%
   full. Keys are packed: (a, b) in one uint64 for labels of up to 32 bits (two uint32 words
   where the counts fit in uint32), two uint64 words for 64-bit labels.
4. :func:`_collect`: the table's keys sorted, and per key (:func:`_gather`) its pair and its
   counts per class (:func:`contact_classes`, which a chunked run merges), from which
   :func:`totals` makes the count and the area.
5. :func:`merge`: the union of several results, summed per pair (the chunks of a volume).

Speed and memory: the cache (2^13 slots, 160-400 KB) stays in a core's L2 and takes nearly all
of the contacts; the table, in memory, sees each pair a few times. For that the core is walked
in tiles of rows through all planes (a tile's slab ~8192 voxels across), so that the pairs of
one plane are met again in the next while the cache still holds them (a whole plane's pairs
would not fit), and the table's slots are read in batches, whose cache misses overlap. The
table holds 1.4 to 2.9 slots per pair, 20 or 24 bytes each for labels of up to 32 bits (uint32
counts, where the core's voxels times the offsets fit), else 40 (uint64 counts; 48 for 64-bit
labels): for a 512^3 uint32 image of 10^6 labels (~10^7 pairs with 26), 400 MB, 3 bytes per
voxel; the result takes 32 bytes per pair. :func:`contacts` copies the image once, for its
frame.

Signed labels are read through their unsigned view with the sign bit flipped (a map that keeps
their order, so that the keys sort as the labels do; 0 is tested on the view itself), and their
pairs come back as int64, those of unsigned (and bool) labels as uint64.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numba
import numpy as np

CONNECTIVITIES = {2: (4, 8), 3: (6, 18, 26)}

_M1 = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the product's high bits
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_LOW32 = np.uint64(0xFFFFFFFF)
_CAP0 = 1 << 12  # the table's least size (slots); it doubles at 70% fill
_CACHE_BITS = 13  # the cache: 2^13 slots (160-400 KB), within a core's L2
_TILE = 8192  # voxels across a tile's slab: its rows times the row's length
_EVICT = 256  # rows of the eviction buffer, flushed into the table together
_COUNT32 = 2**32  # uint32 counts below: the core's voxels times the offsets

Result = tuple[np.ndarray, np.ndarray, np.ndarray]


def frame(labels: np.ndarray, wrap: bool = False) -> np.ndarray:
    """``labels`` padded by one voxel on every side: zeros, or with ``wrap`` the voxels of the
    opposite side (periodic boundaries on every axis), the halo that :func:`contacts_framed`
    reads as the neighbours' voxels. (``np.pad``'s result, without its cost: the halo is
    written face by face, axis after axis, so that edges and corners wrap too.)"""
    labels = np.asarray(labels)
    nd = labels.ndim
    out = np.empty(tuple(s + 2 for s in labels.shape), labels.dtype)
    out[(slice(1, -1),) * nd] = labels
    for axis in range(nd):
        lead = (slice(None),) * axis
        if wrap:
            out[(*lead, 0)] = out[(*lead, -2)]
            out[(*lead, -1)] = out[(*lead, 1)]
        else:
            out[(*lead, 0)] = 0
            out[(*lead, -1)] = 0
    return out


def forward_offsets(ndim: int, connectivity: int) -> tuple[np.ndarray, np.ndarray]:
    """The forward half of the neighbourhood, (k, ndim) int64 in raster order, and each offset's
    class: i for a face along axis i, ``ndim`` for an edge or corner. Forward: the first nonzero
    component is +1, so each unordered voxel pair is one offset from its earlier voxel."""
    if ndim not in CONNECTIVITIES or connectivity not in CONNECTIVITIES[ndim]:
        raise ValueError(
            f"connectivity must be one of {CONNECTIVITIES.get(ndim, ())} in {ndim}D, "
            f"got {connectivity}"
        )
    # nonzero components at most: faces only for 4 and 6, edges too for 8 and 18, corners for 26
    most = {4: 1, 8: 2, 6: 1, 18: 2, 26: 3}[connectivity]
    offs, classes = [], []
    for s in itertools.product((-1, 0, 1), repeat=ndim):
        nonzero = [i for i, c in enumerate(s) if c]
        if not nonzero or len(nonzero) > most or s[nonzero[0]] != 1:
            continue
        offs.append(s)
        classes.append(nonzero[0] if len(nonzero) == 1 else ndim)
    return np.array(offs, np.int64).reshape(-1, ndim), np.array(classes, np.int64)


@numba.njit(cache=True, nogil=True)
def _hash(k0, k1, shift):
    """Slot of key (k0, k1): the high bits of a product, so that in a table twice as large
    a key's slot is about twice its old one (a rehash writes in order)."""
    return np.int64(((np.uint64(k0) * _M1) ^ (np.uint64(k1) * _M2)) >> shift)


@numba.njit(cache=True, nogil=True)
def _find(T, nw, k0, k1, shift):
    """The slot of key (k0, k1) in the table ``T`` (linear probing), claimed when it is new;
    returns the slot and 1 if it was new, else 0. A slot is empty where its last key word is
    0, which no key's is (the larger label, or the packed pair, is never 0)."""
    mask = T.shape[0] - 1
    h = _hash(k0, k1, shift)
    while True:
        last = T[h, nw - 1]
        if last == 0:
            T[h, 0] = k0
            if nw == 2:
                T[h, 1] = k1
            return h, 1
        if T[h, 0] == k0 and (nw == 1 or last == k1):
            return h, 0
        h = (h + 1) & mask


@numba.njit(cache=True, nogil=True)
def _flush(T, E, ne, nw, shift, st):
    """Add the ``ne`` evicted rows of ``E`` (keys, counts) into the table ``T``; adds to
    ``st[1]`` how many keys were new to it. The slots are loaded first, all at once, so that
    their cache misses overlap rather than queue up one by one in the scan (the loads' sum
    goes to ``st[2]``, that they are not optimized away)."""
    touch = np.uint64(0)
    for i in range(ne):
        k1 = E[i, 1] if nw == 2 else E[i, 0] ^ E[i, 0]  # 0, of the key's type
        touch += np.uint64(T[_hash(E[i, 0], k1, shift), nw - 1])
    st[2] += np.int64(touch & np.uint64(1))
    new = 0
    for i in range(ne):
        k1 = E[i, 1] if nw == 2 else E[i, 0] ^ E[i, 0]
        h, n = _find(T, nw, E[i, 0], k1, shift)
        new += n
        for c in range(nw, E.shape[1]):
            T[h, c] += E[i, c]
    st[1] += new


@numba.njit(cache=True, nogil=True)
def _evict(T, C, hc, E, st, nw, shift):
    """Move the cache's slot ``hc`` into the eviction buffer ``E`` (``st[0]`` rows held),
    flushing it into ``T`` when full (``st[1]``: ``T``'s fill)."""
    ne = st[0]
    for c in range(C.shape[1]):
        E[ne, c] = C[hc, c]
        C[hc, c] = 0
    ne += 1
    if ne == E.shape[0]:
        _flush(T, E, ne, nw, shift, st)
        ne = 0
    st[0] = ne


@numba.njit(cache=True, nogil=True)
def rehash(T, G, nw, shift):
    """Every key of ``T`` with its counts into the empty, larger table ``G`` (``shift``: its
    own); ``T``'s slots are read in order, and so ``G``'s are written."""
    for i in range(T.shape[0]):
        if T[i, nw - 1] != 0:
            k1 = T[i, 1] if nw == 2 else T[i, 0] ^ T[i, 0]
            h, _ = _find(G, nw, T[i, 0], k1, shift)
            for c in range(nw, T.shape[1]):
                G[h, c] = T[i, c]


@numba.njit(cache=True, nogil=True)
def _row(T, C, E, st, flat, base, X, offs, cls, flip, nw, one, m, m64, idx, shift, cshift):
    """Count the contacts of one core row (``X`` voxels from ``flat[base]``) along every
    forward offset ``offs`` (flat, classes ``cls``).

    Per offset: the marks (labels differ, both nonzero) of the whole row, branch-free so that
    the compare vectorizes; the marked positions of each nonzero 8-mark word gathered
    branch-free into ``idx``; then per mark, its pair's count of the offset's class added in
    the cache ``C`` (direct-mapped: the key it holds there, if another, is evicted to ``E``).
    """
    row = flat[base : base + X]
    for k in range(offs.shape[0]):
        o = base + offs[k]
        nb = flat[o : o + X]
        for x in range(X):
            a = row[x]
            b = nb[x]
            m[x] = (a != b) & (a != 0) & (b != 0)
        n = 0
        for w in range(m64.shape[0]):
            if m64[w] != 0:
                for j in range(8):
                    idx[n] = (w << 3) + j
                    n += m[(w << 3) + j]
        c = nw + cls[k]
        for i in range(n):
            x = idx[i]
            ua = np.uint64(row[x] ^ flip)
            ub = np.uint64(nb[x] ^ flip)
            lo = min(ua, ub)
            hi = max(ua, ub)
            if nw == 1:
                k0 = (lo << np.uint64(32)) | hi
                k1 = np.uint64(0)
            else:
                k0 = lo
                k1 = hi
            hc = _hash(k0, k1, cshift)
            if C[hc, 0] != k0 or (nw == 2 and C[hc, 1] != k1):
                if C[hc, nw - 1] != 0:
                    _evict(T, C, hc, E, st, nw, shift)
                C[hc, 0] = k0
                if nw == 2:
                    C[hc, 1] = k1
            C[hc, c] += one


@numba.njit(cache=True, nogil=True)
def _scan(T, C, E, st, pos, flat, n1, n2, z0, z1, ty, offs, cls, flip, nw, one, shift, cshift, m):
    """Count the contacts of the framed block ``flat`` ((n0, n1, n2) in raster order; the core:
    planes ``z0..z1``, rows and columns 1..n-2) into the table ``T`` through its cache ``C``
    and eviction buffer ``E`` (``st``: rows in ``E``, ``T``'s fill), by tiles of ``ty`` rows
    through every plane, from ``pos`` (tile's first row, plane, row) on. Stops before a row
    that could fill ``T`` past 70%, ``pos`` set there, and returns False; or returns True
    once done, ``C`` and ``E`` emptied into ``T``. ``m``: a zeroed uint8 buffer of the row's
    length rounded up to 8."""
    X = n2 - 2
    m64 = m.view(np.uint64)
    idx = np.empty(m.size, np.int64)
    limit = (T.shape[0] * 7) // 10 - X * offs.shape[0] - C.shape[0] - E.shape[0]
    y0, z, y = pos[0], pos[1], pos[2]
    while y0 < n1 - 1:
        while z < z1:
            while y < min(y0 + ty, n1 - 1):
                if st[1] > limit:
                    pos[0], pos[1], pos[2] = y0, z, y
                    return False
                base = (z * n1 + y) * n2 + 1
                _row(
                    T, C, E, st, flat, base, X, offs, cls, flip, nw, one, m, m64, idx, shift, cshift
                )
                y += 1
            z += 1
            y = y0
        y0 += ty
        z = z0
        y = y0
    for hc in range(C.shape[0]):
        if C[hc, nw - 1] != 0:
            _evict(T, C, hc, E, st, nw, shift)
    _flush(T, E, st[0], nw, shift, st)
    st[0] = 0
    return True


def _zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
    """A zeroed array written, not calloc'd: numpy then asks for huge pages, which a table read
    at random needs (a TLB miss per read, else)."""
    out = np.empty(shape, dtype)
    out.fill(0)
    return out


def _shift(slots: int) -> np.uint64:
    return np.uint64(64 - (slots.bit_length() - 1))


def _count(view: np.ndarray, z0: int, z1: int, offs: np.ndarray, cls: np.ndarray, flip: int):
    """The table of the contacts of the framed block ``view`` (3D, unsigned), its number of
    key words and its fill. ``T`` grows here, between calls of :func:`_scan`, so that every
    large array is numpy's (which asks for huge pages: a table read at random needs them)."""
    _, n1, n2 = view.shape
    X = n2 - 2
    k = len(offs)
    core = (z1 - z0) * (n1 - 2) * X
    wide = view.dtype.itemsize > 4
    # uint32 counts where no count can pass 2^32 (a class has at most k offsets)
    small = not wide and core * k < _COUNT32
    dtype = np.uint32 if small else np.uint64
    nw = 1 if (not wide and not small) else 2
    width = nw + int(cls.max()) + 1
    cslots = 1 << min(_CACHE_BITS, max(4, (2 * core * k).bit_length()))
    C = _zeros((cslots, width), dtype)
    E = _zeros((_EVICT, width), dtype)
    slots = _CAP0
    while (slots * 7) // 10 <= X * k + cslots + _EVICT:
        slots *= 2
    T = _zeros((slots, width), dtype)
    flat_offs = (offs[:, 0] * n1 + offs[:, 1]) * n2 + offs[:, 2]
    m = np.zeros(-(-X // 8) * 8, np.uint8)
    pos = np.array([1, z0, 1], np.int64)
    st = np.zeros(3, np.int64)
    ty = max(1, _TILE // X)
    while not _scan(
        T, C, E, st, pos, view.reshape(-1), n1, n2, z0, z1, ty, flat_offs, cls,
        view.dtype.type(flip), nw, dtype(1), _shift(len(T)), _shift(cslots), m,
    ):  # fmt: skip
        G = _zeros((2 * len(T), width), dtype)
        rehash(T, G, nw, _shift(len(G)))
        T = G
    return T, nw, int(st[1])


@numba.njit(cache=True, nogil=True)
def _keys(T, nw, out):
    """The packed keys of ``T``'s filled slots into ``out``; returns how many."""
    n = 0
    for i in range(T.shape[0]):
        if T[i, nw - 1] != 0:
            if nw == 1:
                out[n] = np.uint64(T[i, 0])
            else:
                out[n] = (np.uint64(T[i, 0]) << np.uint64(32)) | np.uint64(T[i, 1])
            n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _gather(T, nw, keys, shift, flip, pairs, classes, st):
    """Per sorted key: its labels (unflipped) into ``pairs`` and its slot's count of each class
    into ``classes``. In batches whose slots are loaded first, all at once, so that their cache
    misses overlap (as in :func:`_flush`)."""
    touch = np.uint64(0)
    batch = 256
    for i0 in range(0, keys.size, batch):
        i1 = min(i0 + batch, keys.size)
        for i in range(i0, i1):
            key = keys[i]
            if nw == 1:
                touch += np.uint64(T[_hash(key, key ^ key, shift), 0])
            else:
                touch += np.uint64(T[_hash(key >> np.uint64(32), key & _LOW32, shift), 1])
        for i in range(i0, i1):
            key = keys[i]
            if nw == 1:
                h, _ = _find(T, nw, key, key ^ key, shift)
            else:
                h, _ = _find(T, nw, key >> np.uint64(32), key & _LOW32, shift)
            for c in range(nw, T.shape[1]):
                classes[i, c - nw] = np.int64(T[h, c])
            pairs[i, 0] = (key >> np.uint64(32)) ^ flip
            pairs[i, 1] = (key & _LOW32) ^ flip
    st[2] += np.int64(touch & np.uint64(1))


def _weights(ndim: int, spacing) -> np.ndarray:
    """The area of one face contact per axis: the product of the other axes' spacing."""
    s = np.ones(ndim) if spacing is None else np.asarray(spacing, np.float64)
    s = np.broadcast_to(s, (ndim,)).astype(np.float64)
    return np.array([np.prod(np.delete(s, i)) for i in range(ndim)], np.float64)


def _collect(T: np.ndarray, nw: int, fill: int, dtype: np.dtype, flip: int, nd: int):
    """The filled slots of ``T`` as sorted pairs (in the labels' own values: unflipped, and for
    signed labels their signed values) with their counts per class, (m, ``nd`` + 1) int64.

    A pair of labels of up to 32 bits packs into one uint64, which sorts fast (numpy's SIMD
    sort); the counts are then looked up by key, in order. 64-bit labels take a lexsort."""
    ncls = T.shape[1] - nw
    if T.dtype == np.uint32 or nw == 1:
        keys = np.empty(fill, np.uint64)
        if _keys(T, nw, keys) != fill:
            raise AssertionError("the contacts table lost count of its keys")
        keys.sort()
        pairs = np.empty((fill, 2), np.uint64)
        per_class = np.empty((fill, ncls), np.int64)
        st = np.zeros(3, np.int64)
        _gather(T, nw, keys, _shift(T.shape[0]), np.uint64(flip), pairs, per_class, st)
    else:
        rows = T[T[:, nw - 1] != 0]
        order = np.lexsort((rows[:, 1], rows[:, 0]))
        rows = rows[order]
        pairs = rows[:, :2] ^ np.uint64(flip)
        per_class = rows[:, nw:].astype(np.int64)
    if dtype.kind == "i":
        pairs = pairs.astype(f"u{dtype.itemsize}").view(dtype).astype(np.int64)
    classes = np.zeros((fill, nd + 1), np.int64)
    classes[:, :ncls] = per_class
    return np.ascontiguousarray(pairs), classes


def totals(classes: np.ndarray, spacing: float | Sequence[float] | None = None):
    """``(counts, areas)`` from counts per class (:func:`contact_classes`): every voxel pair,
    and the face contacts times the area of one face along their axis (``spacing``: one per
    axis, or one for all; None: 1), summed in axis order."""
    nd = classes.shape[1] - 1
    weights = _weights(nd, spacing)
    areas = np.zeros(len(classes), np.float64)
    for i in range(nd):
        areas += classes[:, i] * weights[i]
    return classes.sum(axis=1), areas


def _empty(dtype: np.dtype, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    kind = np.int64 if dtype.kind == "i" else np.uint64
    return np.zeros((0, 2), kind), np.zeros((0, ndim + 1), np.int64)


def contact_classes_framed(framed: np.ndarray, connectivity: int) -> tuple[np.ndarray, np.ndarray]:
    """``(pairs, classes)`` of the core of ``framed`` (a block with a one-voxel halo): the
    contacts whose earlier voxel lies in the core, so that chunks add up to their volume.

    ``pairs``: (m, 2) unique label pairs a < b, sorted (uint64; int64 for signed labels);
    ``classes``: (m, ndim + 1) int64 voxel pairs in contact, per class: face contacts along
    each axis, then edges and corners together (:func:`totals` makes counts and areas).
    """
    framed = np.asarray(framed)
    ndim = framed.ndim
    if framed.dtype.kind not in "biu":
        raise ValueError(f"labels must be of an integer or bool dtype, got {framed.dtype}")
    offs, cls = forward_offsets(ndim, connectivity)
    if min(framed.shape) < 2:
        raise ValueError(f"a framed block has at least 2 voxels per axis, got {framed.shape}")
    dtype = framed.dtype
    if min(framed.shape) == 2:  # no core
        return _empty(dtype, ndim)
    if not dtype.isnative:
        framed = framed.astype(dtype.newbyteorder("="))
    view = np.ascontiguousarray(framed).view(f"u{dtype.itemsize}")
    if ndim == 2:  # one plane without halo planes: the offsets stay in it
        view = view.reshape(1, *view.shape)
        offs = np.concatenate([np.zeros((len(offs), 1), np.int64), offs], axis=1)
        z0, z1 = 0, 1
    else:
        z0, z1 = 1, view.shape[0] - 1
    flip = (1 << (8 * dtype.itemsize - 1)) if dtype.kind == "i" else 0
    T, nw, fill = _count(view, z0, z1, offs, cls, flip)
    return _collect(T, nw, fill, dtype, flip, ndim)


def contacts_framed(
    framed: np.ndarray, connectivity: int, spacing: float | Sequence[float] | None = None
) -> Result:
    """``(pairs, counts, areas)`` of the core of ``framed`` (:func:`contact_classes_framed`):
    ``counts``: (m,) int64 voxel pairs in contact; ``areas``: (m,) float64 face contact area
    with ``spacing`` (one per axis, or one for all; None: 1).
    """
    pairs, classes = contact_classes_framed(framed, connectivity)
    return (pairs, *totals(classes, spacing))


def contact_classes(labels: np.ndarray, connectivity: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`contact_classes_framed` of a whole image, background beyond it: the contacts
    of a chunk among its own labels."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return _empty(labels.dtype, labels.ndim)
    return contact_classes_framed(frame(labels), connectivity)


def contacts(
    labels: np.ndarray,
    connectivity: int,
    spacing: float | Sequence[float] | None = None,
    wrap: bool = False,
) -> Result:
    """``(pairs, counts, areas)`` of a whole image (see :func:`contacts_framed`). With ``wrap``
    the boundaries are periodic on every axis: the pairs (p, p + s mod shape), p in the image
    and s forward, those of the middle copy of the image tiled 3 times along every axis (so
    that on an axis of size 1 or 2 one voxel pair may count for several offsets)."""
    labels = np.asarray(labels)
    if labels.dtype.kind not in "biu":
        raise ValueError(f"labels must be of an integer or bool dtype, got {labels.dtype}")
    forward_offsets(labels.ndim, connectivity)  # checks ndim and connectivity
    if labels.size == 0:
        pairs, classes = _empty(labels.dtype, labels.ndim)
        return (pairs, *totals(classes, spacing))
    return contacts_framed(frame(labels, wrap), connectivity, spacing)


def merge(parts: Iterable[Result]) -> Result:
    """The union of several ``(pairs, counts, areas)`` results, counts and areas summed per
    pair: the chunks of one volume add up to the volume's result."""
    parts = list(parts)
    if not parts:
        return np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    pairs = np.concatenate([p[0] for p in parts]).reshape(-1, 2)
    counts = np.concatenate([p[1] for p in parts]).astype(np.int64)
    areas = np.concatenate([p[2] for p in parts]).astype(np.float64)
    if len(pairs) == 0:
        return pairs, counts, areas
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    pairs, counts, areas = pairs[order], counts[order], areas[order]
    start = np.ones(len(pairs), bool)
    start[1:] = np.any(pairs[1:] != pairs[:-1], axis=1)
    idx = np.flatnonzero(start)
    return (
        np.ascontiguousarray(pairs[idx]),
        np.add.reduceat(counts, idx),
        np.add.reduceat(areas, idx),
    )
