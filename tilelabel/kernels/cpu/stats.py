"""Per-label statistics of a labeled chunk in one pass (numba): the CPU side of ``label_stats``.

The pass keeps one *pending* component in registers (the CPU form of HA4's aggregation before
memory); the per-label arrays are read and written only when another label turns up. Each row
is first scanned once, branch-free and vectorised, for the count and x sum of the pending label
and for voxels of any other label. A row of only the pending label and background (most rows of
big components and of noise alike) is taken whole from that scan: y and z enter once per row,
the x range comes from the row's ends, intensities from one more loop (vectorised for integers
of up to 32 bits). Rows with another label are walked again, run by run where they are sparse
(a run adds its length, an arithmetic series of x and its two ends) and voxel by voxel,
branch-free, where they are dense.
The same walk can note where each label first appears (:func:`label_stats_first`), which the
pipeline otherwise finds in a second pass (:func:`tilelabel.kernels.cpu.ops.first_indices`).

Types: counts, boxes and coordinate sums are int64 and exact. A chunk's local coordinate sums
stay far below 2**63; the pipeline adds ``offset * count`` to make them global, which stays exact
while a component's coordinate sum along an axis is below 2**63 (for example any component of a
volume with fewer than 2**63 / (largest coordinate) voxels: a full 50,000^3 volume still fits).
Intensity sums, mins and maxes are float64 (exact for integer intensities below 2**53 per sum;
float intensities are added one by one in raster order per label). A NaN among a label's values
makes its min and max NaN, as ``np.min`` / ``np.max`` (and scikit-image) give, and its sum NaN.

Second moments (``moments=True``: what the inertia tensor needs) and intensity sums of squares
come from a second, run-by-run pass (:func:`_moments`), made only where a table asks for them, so
that a size filter or a table without them costs nothing more. A chunk's local sums of coordinate
products are int64 and exact; made global (:func:`to_global`) they are float64, exact while a
component's sum stays below 2**53 and rounded to float64's 1e-16 beyond.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

_BIG = np.iinfo(np.int64).max
# The accumulators start from int64 scalars, not int literals: numba gives a literal a type of
# its own, and a call of a jitted helper with one compiles another copy of the helper.
_I0, _I1, _IM, _IB = np.int64(0), np.int64(1), np.int64(-1), np.int64(_BIG)

# NaN. A label with a NaN among its intensities has min and max NaN (np.min / np.max). The voxel
# loops keep numba's min / max (``v if v < a else a``: a NaN accumulator stays, a NaN value never
# enters), one minsd / maxsd on the chain from voxel to voxel: a NaN-propagating select there
# slowed a float image's pass by up to 40 %, a NaN flag beside it by up to 15 %.
# The pending sum tells instead: a NaN value makes it NaN, and so do +inf and -inf (an infinite
# value meeting a sum gone the other way). The flush (:func:`_switch`), once per pending stretch,
# settles it: a NaN sum with a min that is not NaN means a NaN value unless the stretch met an
# infinite value; then :func:`_nan_in_box` looks for one in the stretch's box (a NaN voxel of the
# label there, of this stretch or another, makes the label's min and max NaN all the same).
# Accumulators meet (a row's integer min, the per-label arrays) through :func:`_min` /
# :func:`_max`, which let a NaN in: not inlined by numba (that would compile them once per call
# site), called with float64 only (one specialisation each), inlined by LLVM.


@numba.njit(cache=True, nogil=True)
def _min(a, v):
    """np.minimum: a NaN in either wins."""
    return v if (v != v) | (v < a) else a


@numba.njit(cache=True, nogil=True)
def _max(a, v):
    """np.maximum: a NaN in either wins."""
    return v if (v != v) | (v > a) else a


def _nan_in_box(L, V, cur, lz, ly, lx, hz, hy, hx):  # pragma: no cover - numba overload below
    """Whether a voxel of label ``cur`` in the box [lz..hz] x [ly..hy] x [lx..hx] has a NaN
    intensity."""
    raise NotImplementedError


@overload(_nan_in_box, jit_options={"cache": True, "nogil": True})
def _nan_in_box_impl(L, V, cur, lz, ly, lx, hz, hy, hx):
    if not isinstance(V.dtype, types.Float):
        return lambda L, V, cur, lz, ly, lx, hz, hy, hx: False  # an integer is never NaN

    def impl(L, V, cur, lz, ly, lx, hz, hy, hx):
        for z in range(lz, hz + 1):
            for y in range(ly, hy + 1):
                for x in range(lx, hx + 1):
                    v = V[z, y, x]
                    if L[z, y, x] == cur and v != v:
                        return True
        return False

    return impl


def _pure_row_intensity(row, vrow, cur, s, mn, mx):  # pragma: no cover - numba overload below
    """Intensity sum, min and max over the voxels of label ``cur`` in a row, folded into the
    pending ``s``, ``mn``, ``mx`` (the row holds no other label)."""
    raise NotImplementedError


@overload(_pure_row_intensity, jit_options={"cache": True, "nogil": True})
def _pure_row_intensity_impl(row, vrow, cur, s, mn, mx):
    if isinstance(vrow.dtype, types.Integer) and vrow.dtype.bitwidth <= 32:
        # small integers: an exact int64 row sum and integer min / max vectorise; the float64
        # pending sum gains the row's sum at once (exact while sums stay below 2**53)
        lo0, hi0 = np.iinfo(np.int64).max, np.iinfo(np.int64).min

        def impl(row, vrow, cur, s, mn, mx):
            rs = 0
            rmn = lo0
            rmx = hi0
            for x in range(row.size):
                m = row[x] == cur
                v = np.int64(vrow[x])
                rs += v if m else 0
                rmn = min(rmn, v if m else lo0)
                rmx = max(rmx, v if m else hi0)
            return s + np.float64(rs), _min(mn, np.float64(rmn)), _max(mx, np.float64(rmx))

        return impl

    # floats and 64-bit integers: one float64 add per voxel in raster order, as the voxel loop
    def impl(row, vrow, cur, s, mn, mx):
        for x in range(row.size):
            m = row[x] == cur
            v = np.float64(vrow[x])
            s += v if m else 0.0
            mn = min(mn, v if m else np.inf)
            mx = max(mx, v if m else -np.inf)
        return s, mn, mx

    return impl


@numba.njit(cache=True, nogil=True, inline="always")
def _flush(i, c, sz, sy, sx, lz, ly, lx, hz, hy, hx, count, lo, hi, csum):
    count[i] += c
    csum[i, 0] += sz
    csum[i, 1] += sy
    csum[i, 2] += sx
    lo[i, 0] = min(lo[i, 0], lz)
    lo[i, 1] = min(lo[i, 1], ly)
    lo[i, 2] = min(lo[i, 2], lx)
    hi[i, 0] = max(hi[i, 0], hz)
    hi[i, 1] = max(hi[i, 1], hy)
    hi[i, 2] = max(hi[i, 2], hx)


@numba.njit(cache=True, nogil=True, inline="always")
def _fold_row(rc, y, z, c, sy, sz, ly, hy, lz, hz):
    # rc voxels of the pending label in row (z, y): y and z enter once per row
    if rc == 0:
        return c, sy, sz, ly, hy, lz, hz
    return c + rc, sy + rc * y, sz + rc * z, min(ly, y), max(hy, y), min(lz, z), max(hz, z)


# a function of its own, called at three places: inlined, numba would compile it three times
# (_nrt=False: it allocates nothing, so it needs no reference counts on its arrays either)
@numba.njit(cache=True, nogil=True, _nrt=False)
def _switch(L, V, first, cur, lab, nxt, pos, acc, out, iout):
    """The pending label ``cur`` gives way to ``lab`` whose run starts at raster index ``pos``:
    fold and flush ``cur``'s accumulators, record ``lab``'s first voxel if it is new; returns
    the next new label. ``acc``: the pending label's accumulators, the row's (count, y, z) and
    its intensity sum, min, max (where a NaN value shows in the sum alone: settled here);
    ``out``, ``iout``: the per-label arrays."""
    c, sz, sy, sx, lz, ly, lx, hz, hy, hx, rc, y, z, s, mn, mx = acc
    count, lo, hi, csum = out
    isum, imin, imax = iout
    if cur != 0:
        c, sy, sz, ly, hy, lz, hz = _fold_row(rc, y, z, c, sy, sz, ly, hy, lz, hz)
        i = np.int64(cur) - 1
        _flush(i, c, sz, sy, sx, lz, ly, lx, hz, hy, hx, count, lo, hi, csum)
        if V is not None:
            if s != s and mn == mn:
                # a NaN value, or +inf and -inf in the sum (then an infinite min or max)
                inf = mn == -np.inf or mx == np.inf
                if not inf or _nan_in_box(L, V, cur, lz, ly, lx, hz, hy, hx):
                    mn = mx = np.nan
            isum[i] += s
            imin[i] = _min(imin[i], mn)
            imax[i] = _max(imax[i], mx)
    # labels are numbered in raster order of their first voxel, which always starts a run of a
    # label other than the pending one
    if first is not None and lab == nxt:
        first[nxt - 1] = pos
        nxt += 1
    return nxt


@numba.njit(cache=True, nogil=True)
def _stats(L, V, count, lo, hi, csum, isum, imin, imax, first):
    # One pending component (label ``cur``) in registers; the per-label arrays are read and
    # written only when another label turns up. Each row first gets one branch-free, vectorised
    # scan: count and x sum of ``cur``, and how many voxels hold another label. A row of only
    # ``cur`` and background (most rows, in big components and in noise alike) is folded in
    # whole from that scan, its x range from its ends. A row with another label is walked again:
    # run by run where it is sparse (a run adds its length, an arithmetic series of x and its
    # ends; background costs one compare a voxel), voxel by voxel and branch-free where it is
    # dense (short runs would mispredict). ``V`` (intensity) and ``first`` (first voxel of each
    # label) may be None: numba then compiles their parts out.
    D, H, W = L.shape
    cur = L.dtype.type(0)
    c = sz = sy = sx = _I0
    lz = ly = lx = _IB
    hz = hy = hx = _IM
    s, mn, mx = 0.0, np.inf, -np.inf
    nxt = _I1
    out, iout = (count, lo, hi, csum), (isum, imin, imax)
    for z in range(D):
        for y in range(H):
            row = L[z, y]
            rc = _I0
            rsx = 0
            oth = 0
            for x in range(W):
                lab = row[x]
                m = lab == cur
                rc += m
                rsx += x if m else 0
                oth += (lab != cur) & (lab != 0)
            if oth == 0:
                if rc == 0 or cur == 0:
                    continue  # background only (or only cur, before any label: also background)
                a = 0
                while row[a] != cur:
                    a += 1
                b = W - 1
                while row[b] != cur:
                    b -= 1
                sx += rsx
                lx, hx = min(lx, a), max(hx, b)
                c, sy, sz, ly, hy, lz, hz = _fold_row(rc, y, z, c, sy, sz, ly, hy, lz, hz)
                if V is not None:
                    s, mn, mx = _pure_row_intensity(row, V[z, y], cur, s, mn, mx)
                continue
            if V is not None:
                vrow = V[z, y]
            if 4 * (oth + (rc if cur != 0 else 0)) <= W:
                # sparse: run by run
                rc = _I0
                x = 0
                while x < W:
                    lab = row[x]
                    if lab == 0:
                        x += 1
                        continue
                    a = k0 = x
                    x += 1
                    while x < W and row[x] == lab:
                        x += 1
                    if lab != cur:
                        acc = (c, sz, sy, sx, lz, ly, lx, hz, hy, hx, rc, y, z, s, mn, mx)
                        nxt = _switch(
                            L, V, first, cur, lab, nxt, (z * H + y) * W + a, acc, out, iout
                        )
                        cur = lab
                        rc, c, sx, sy, sz = _I0, _I0, _I0, _I0, _I0
                        lx, hx, ly, hy, lz, hz = a, x - 1, _IB, _IM, _IB, _IM
                        if V is not None:
                            # as the voxel loop does (a NaN here stays in mn and mx)
                            s = mn = mx = np.float64(vrow[a])
                            k0 = a + 1
                    rc += x - a
                    sx += (a + x - 1) * (x - a) // 2
                    lx, hx = min(lx, a), max(hx, x - 1)
                    if V is not None:
                        for k in range(k0, x):
                            v = np.float64(vrow[k])
                            s += v
                            mn = min(mn, v)
                            mx = max(mx, v)
                c, sy, sz, ly, hy, lz, hz = _fold_row(rc, y, z, c, sy, sz, ly, hy, lz, hz)
                continue
            # dense: a voxel of cur (or background) costs a compare and a few branch-free
            # updates; y and z are folded in once per stretch of the row
            rc = _I0
            for x in range(W):
                lab = row[x]
                m = lab == cur
                rc += m
                sx += x if m else 0
                lx = min(lx, x if m else _BIG)
                hx = max(hx, x if m else -1)
                if V is not None:
                    v = np.float64(vrow[x])
                    s += v if m else 0.0
                    mn = min(mn, v if m else np.inf)
                    mx = max(mx, v if m else -np.inf)
                if lab != cur and lab != 0:
                    acc = (c, sz, sy, sx, lz, ly, lx, hz, hy, hx, rc, y, z, s, mn, mx)
                    nxt = _switch(L, V, first, cur, lab, nxt, (z * H + y) * W + x, acc, out, iout)
                    cur = lab
                    rc, c, sx, sy, sz = _I1, _I0, x, _I0, _I0
                    lx, hx, ly, hy, lz, hz = x, x, _IB, _IM, _IB, _IM
                    if V is not None:
                        s, mn, mx = v, v, v
            c, sy, sz, ly, hy, lz, hz = _fold_row(rc, y, z, c, sy, sz, ly, hy, lz, hz)
    # the last pending label: its rows are folded already (a row count of 0 folds nothing)
    acc = (c, sz, sy, sx, lz, ly, lx, hz, hy, hx, _I0, _I0, _I0, s, mn, mx)
    _switch(L, V, first, cur, cur, nxt, _I0, acc, out, iout)  # cur < nxt: records nothing


@numba.njit(cache=True, nogil=True)
def _moments(L, V, m2, isq):
    # Run by run: a run of label l in row (z, y) adds its count times z*z, z*y and y*y, z and y
    # times its x sum, and its sum of x*x (the columns of m2: zz, zy, zx, yy, yx, xx); with V,
    # the squares of its intensities to isq. One pending label's sums stay in registers until
    # another label's run turns up, as in _stats.
    D, H, W = L.shape
    cur = L.dtype.type(0)
    zz = zy = zx = yy = yx = xx = 0
    sq = 0.0
    for z in range(D):
        for y in range(H):
            row = L[z, y]
            # a row of only the pending label and background (most rows of big components) is
            # folded in from one branch-free scan
            rc = rsx = rsxx = oth = 0
            for x in range(W):
                lab = row[x]
                m = lab == cur
                rc += m
                rsx += x if m else 0
                rsxx += x * x if m else 0
                oth += (lab != cur) & (lab != 0)
            if oth == 0:
                if rc == 0 or cur == 0:
                    continue
                zz += rc * z * z
                zy += rc * z * y
                zx += z * rsx
                yy += rc * y * y
                yx += y * rsx
                xx += rsxx
                if V is not None:
                    vrow = V[z, y]
                    for x in range(W):
                        v = np.float64(vrow[x])
                        sq += v * v if row[x] == cur else 0.0
                continue
            x = 0
            while x < W:
                lab = row[x]
                if lab == 0:
                    x += 1
                    continue
                a = x
                sx = x
                sxx = x * x
                x += 1
                while x < W and row[x] == lab:
                    sx += x
                    sxx += x * x
                    x += 1
                if lab != cur:
                    if cur != 0:
                        _flush_moments(m2, isq, np.int64(cur) - 1, zz, zy, zx, yy, yx, xx, sq)
                    cur = lab
                    zz = zy = zx = yy = yx = xx = 0
                    sq = 0.0
                c = x - a
                zz += c * z * z
                zy += c * z * y
                zx += z * sx
                yy += c * y * y
                yx += y * sx
                xx += sxx
                if V is not None:
                    vrow = V[z, y]
                    for k in range(a, x):
                        v = np.float64(vrow[k])
                        sq += v * v
    if cur != 0:
        _flush_moments(m2, isq, np.int64(cur) - 1, zz, zy, zx, yy, yx, xx, sq)


@numba.njit(cache=True, nogil=True, inline="always")
def _flush_moments(m2, isq, i, zz, zy, zx, yy, yx, xx, sq):
    m2[i, 0] += zz
    m2[i, 1] += zy
    m2[i, 2] += zx
    m2[i, 3] += yy
    m2[i, 4] += yx
    m2[i, 5] += xx
    if isq is not None:
        isq[i] += sq


def pairs(ndim: int) -> list[tuple[int, int]]:
    """The axis pairs of the ``m2`` columns: the upper triangle, row by row."""
    return [(a, b) for a in range(ndim) for b in range(a, ndim)]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tensors(s, m2, count, scale, ab, out):
    nd = s.shape[1]
    cov = np.empty((nd, nd))
    for r in range(s.shape[0]):
        c = count[r]
        for k in range(ab.shape[0]):
            a, b = ab[k, 0], ab[k, 1]
            v = (m2[r, k] - s[r, a] * s[r, b] / c) / c * (scale[a] * scale[b])
            cov[a, b] = v
            cov[b, a] = v
        trace = cov[0, 0]
        for a in range(1, nd):
            trace += cov[a, a]
        for a in range(nd):
            for b in range(nd):  # (off the diagonal -0.0 stays so: orientation reads its sign)
                out[a * nd + b, r] = -cov[a, b] + trace if a == b else -cov[a, b]


def inertia_tensors(csum: np.ndarray, m2: np.ndarray, count: np.ndarray, scale) -> np.ndarray:
    """scikit-image's inertia tensor (trace(C) I - C, C the covariance of the voxel
    coordinates, in physical units) of every row, as ``ndim * ndim`` contiguous columns
    (entry ``(a, b)`` in column ``a * ndim + b``), in one pass that lets go of the GIL: numpy's
    (n, 3, 3) arrays took most of a large table's time in strided copies."""
    n, ndim = csum.shape
    out = np.empty((ndim * ndim, n))
    ab = np.asarray(pairs(ndim), np.int64).reshape(-1, 2)
    _tensors(
        np.ascontiguousarray(csum, np.float64), np.ascontiguousarray(m2, np.float64),
        np.ascontiguousarray(count), np.asarray(scale, np.float64), ab, out,
    )  # fmt: skip
    return out


def empty_stats(n: int, ndim: int, intensity: bool, moments: bool = False) -> dict[str, np.ndarray]:
    """Identity elements of every field for ``n`` labels (what a label with no voxel has)."""
    big = np.iinfo(np.int64).max
    out = {
        "count": np.zeros((n, 1), np.int64),
        "lo": np.full((n, ndim), big, np.int64),
        "hi": np.full((n, ndim), -1, np.int64),
        "csum": np.zeros((n, ndim), np.int64),
    }
    if intensity:
        out["isum"] = np.zeros((n, 1), np.float64)
        out["imin"] = np.full((n, 1), np.inf)
        out["imax"] = np.full((n, 1), -np.inf)
    if moments:
        out["m2"] = np.zeros((n, len(pairs(ndim))), np.float64)
        if intensity:
            out["isq"] = np.zeros((n, 1), np.float64)
    return out


def to_global(stats: dict[str, np.ndarray], offset) -> dict[str, np.ndarray]:
    """Chunk-local coordinates to global ones, in place: boxes shift, sums gain offset * count,
    sums of coordinate products (``m2``, float64 from here on) gain their cross terms; in one
    pass that lets go of the GIL (a chunk's few thousand rows took twenty numpy calls)."""
    off = np.asarray(offset, np.int64)
    moments = "m2" in stats
    m2 = stats["m2"].astype(np.float64) if moments else np.empty((0, 0))
    if off.any():
        ab = np.asarray(pairs(off.size) if moments else [], np.int64).reshape(-1, 2)
        _shift(stats["count"][:, 0], stats["lo"], stats["hi"], stats["csum"], m2, off, ab)
    if moments:
        stats["m2"] = m2
    return stats


@numba.njit(cache=True, nogil=True)
def _shift(count, lo, hi, csum, m2, off, ab):
    of = off.astype(np.float64)
    for r in range(count.size):
        c = count[r]
        for k in range(ab.shape[0]):  # from the local sums, before they shift
            a, b = ab[k, 0], ab[k, 1]
            m2[r, k] += of[a] * float(csum[r, b]) + of[b] * float(csum[r, a]) + c * (of[a] * of[b])
        for a in range(off.size):
            lo[r, a] += off[a]
            hi[r, a] += off[a]
            csum[r, a] += c * off[a]


def _label_stats(labels, n, offset, intensity, first, moments=False):
    labels = np.asarray(labels)
    ndim = labels.ndim
    if ndim not in (2, 3):
        raise ValueError(f"label_stats takes 2D or 3D labels, got {ndim}D")
    out = empty_stats(n, 3, intensity is not None)
    L = np.ascontiguousarray(labels).reshape((1,) * (3 - ndim) + labels.shape)
    V = None
    if n and L.size:
        if intensity is not None:
            V = np.asarray(intensity)
            if V.shape != labels.shape:
                raise ValueError(f"intensity shape {V.shape} differs from labels {labels.shape}")
            if V.dtype == np.bool_:
                V = V.view(np.uint8)
            V = np.ascontiguousarray(V).reshape(L.shape)
        cnt = out["count"].reshape(-1)
        if V is None:
            _stats(L, None, cnt, out["lo"], out["hi"], out["csum"], None, None, None, first)
        else:
            isum, imin, imax = (out[k].reshape(-1) for k in ("isum", "imin", "imax"))
            _stats(L, V, cnt, out["lo"], out["hi"], out["csum"], isum, imin, imax, first)
    if moments:
        m2 = np.zeros((n, 6), np.int64)
        isq = np.zeros(n, np.float64) if intensity is not None else None
        if n and L.size:
            _moments(L, V, m2, isq)
        # 2D labels lie in plane z = 0: their pairs are the (y, x) ones
        out["m2"] = np.ascontiguousarray(m2[:, [3, 4, 5]] if ndim == 2 else m2)
        if isq is not None:
            out["isq"] = isq.reshape(n, 1)
    if ndim == 2:
        for name in ("lo", "hi", "csum"):
            out[name] = np.ascontiguousarray(out[name][:, 1:])
    if offset is not None or moments:
        to_global(out, (0,) * ndim if offset is None else offset)
    return out


def label_stats(
    labels: np.ndarray, n: int, offset=None, intensity=None, moments: bool = False
) -> dict[str, np.ndarray]:
    """Statistics of labels 1..n of ``labels`` (2D or 3D, every label present at least once).

    Returns a dict of (n, k) arrays: ``count`` (n, 1) int64; ``lo`` / ``hi`` (n, ndim) int64, the
    inclusive box; ``csum`` (n, ndim) int64, coordinate sums; with ``intensity`` (an array of the
    same shape) also ``isum``, ``imin``, ``imax`` (n, 1) float64. With ``moments`` also ``m2``
    (n, ndim * (ndim + 1) / 2) float64, the sums of coordinate products (axis pairs:
    :func:`pairs`), and with ``intensity`` ``isq`` (n, 1) float64, its sums of squares.
    Coordinates are shifted by ``offset`` (a chunk's position in the volume).
    """
    return _label_stats(labels, n, offset, intensity, None, moments)


def label_stats_first(
    labels: np.ndarray, n: int, offset=None, intensity=None, moments: bool = False
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``(label_stats(labels, n, offset, intensity, moments), first_indices(labels, n))``, the
    first voxels found by the statistics' pass.

    Labels must be numbered 1..n in raster order of their first voxel (as every kernel numbers
    them); the second item is the raster index (in ``labels``' own C order) of each label's first
    voxel, int64 (n,), as :func:`tilelabel.kernels.cpu.ops.first_indices` gives it.
    """
    first = np.empty(n, np.int64)
    return _label_stats(labels, n, offset, intensity, first, moments), first
