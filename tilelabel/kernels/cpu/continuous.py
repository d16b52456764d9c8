"""Continuous-value labeling (cc3d's ``delta``): run-based union find, sequential, in numba.

Two voxels join when they are neighbours under the connectivity, both are nonzero, and their
values are equal or differ by at most ``delta`` (:func:`join_rule`, the one statement of the
rule; :func:`delta_pairs` applies it to two arrays, e.g. the facing faces of two chunks). With
``delta`` > 0 that is not an equivalence of values (a-b and b-c may join while a and c differ by
more than ``delta``): the components are the connected components of the graph of joined
neighbour pairs. ``delta`` = 0 is cc3d's multi-label labeling, float input included.

The voxels of a row that each join the one before them form runs, and runs are the union-find
nodes: ids 0, 1, ... in raster order over the runs of nonzero voxels, in a forest as in
:mod:`.unionfind` (a union keeps the smaller root, so a root is its component's first run and
numbering the roots in run order gives cc3d's and scipy's order). The forest lives in the
output labels themselves where their dtype holds every run id (a run's id is at most the index
of its first voxel, which is what lets the last step write the labels over it).

0. :func:`prepare`: the values and ``delta`` as the rule compares them, cc3d's way (integers
   through an unsigned view of their width, ``delta`` truncated to an integer or rounded to the
   float dtype; bool as 0/1).
1. :func:`dl_scan`: rows in raster order. A row's run starts and every voxel's run id (kept in
   a ring of the last rows); then, for each earlier neighbour row
   (:data:`tilelabel.kernels.cpu.runs.DIRECTIONS`) and each offset along the row, the joined
   pairs are found by vectorized passes, and a union is made only where a pair does not join
   the same two runs as a joined pair just before it: a few unions per pair of touching runs.
2. :func:`dl_number`: the roots numbered 1..n in run order, every other run given its root's.
3. :func:`dl_fill`: every voxel written with its run's number (its row's runs found again),
   in reverse raster order.

cc3d's conventions, which :func:`label_delta` follows: 0 (and -0.0) is background; a NaN is
foreground that joins nothing (each NaN voxel is a component of its own); signed integers are
compared as the unsigned integers of their bits (-1 and 1 are 2^w - 2 apart in w bits; the
extremes of int64 are 1 apart), unless ``signed="numbers"``; ``delta`` equal to the dtype's
largest value makes the image binary (every nonzero voxel joins its nonzero neighbours, NaN
too). Where cc3d strays from its rule this module keeps the rule: cc3d's 2D 8-connected scan
with ``delta`` > 0 joins some pairs farther apart than ``delta`` (through a shortcut on the
image's value range) and then skips the voxel's other neighbours; at ``delta`` 0, an image whose
foreground lies in one row has its floats compared truncated to integers (0.37 and 0.37 do not
join); +inf and +inf, being equal, join here at any ``delta`` (cc3d, at ``delta`` > 0, joins
them only where a shortcut of its scan compares for equality: across planes under
26-connectivity, across rows in 2D 8-connectivity; along a row it may fail, its count of
provisional labels too low); float16 at ``delta`` 0 is compared as float32 here, as raw bits by
cc3d (-0.0 foreground, equal NaNs joined).
"""

from __future__ import annotations

from typing import Literal

import numba
import numpy as np
from numba import types
from numba.extending import overload

from tilelabel.kernels.cpu.runs import DIRECTIONS
from tilelabel.kernels.cpu.unionfind import find, merge

_ONE = np.uint64(1)

Signed = Literal["bits", "numbers"]


def distance(a, b):  # pragma: no cover - numba overload below
    """``|a - b|`` in the values' own dtype: for unsigned integers without wrapping around (the
    larger minus the smaller), for floats NaN where either is NaN."""
    raise NotImplementedError


@overload(distance, jit_options={"cache": True, "nogil": True})
def distance_impl(a, b):
    if isinstance(a, types.Integer):
        # the larger and the smaller chosen in the values' own type, then one subtraction: this
        # form vectorizes (a subtraction chosen by a comparison does not, for integers)
        def impl(a, b):
            hi = a if a > b else b
            lo = b if a > b else a
            return hi - lo

        return impl
    return lambda a, b: a - b if a > b else b - a


@numba.njit(cache=True, nogil=True, _nrt=False)
def join_rule(a, b, d, z):
    """Whether neighbours of values ``a`` and ``b`` join: neither is the background value ``z``
    and they are equal or differ by at most ``d`` (:func:`distance`; a NaN joins nothing).
    ``a``, ``b``, ``d``, ``z`` as :func:`prepare` gives them."""
    return (a != z) & (b != z) & ((a == b) | (distance(a, b) <= d))


def prepare(
    values: np.ndarray, delta: float, signed: Signed = "bits"
) -> tuple[np.ndarray, np.generic, np.generic]:
    """``(values, d, z)`` as :func:`join_rule` compares them: the values (a view where possible),
    ``delta`` in their dtype and the value that stands for background.

    As cc3d: bool is 0/1; an integer dtype is read as the unsigned integers of its width and
    ``delta`` truncated to an integer (above the unsigned range it is that range's top: every
    pair joins; cc3d raises); a float ``delta`` is rounded to the values' float dtype. A
    ``delta`` equal to the dtype's largest value makes the image binary (0/1, NaN foreground).
    float16 is refused for ``delta`` > 0 (as cc3d) and read as float32 at 0.
    ``signed="numbers"``: signed integers compared as numbers (their sign bit flipped, which
    keeps differences; background is then the flipped 0).
    """
    x = np.asarray(values)
    d = float(delta)
    if not d >= 0:
        raise ValueError(f"delta must be a number >= 0, got {delta!r}")
    if signed not in ("bits", "numbers"):
        raise ValueError(f"signed must be 'bits' or 'numbers', got {signed!r}")
    if x.dtype == np.bool_:
        return x.view(np.uint8), np.uint8(0), np.uint8(0)
    if x.dtype == np.float16:
        if d > 0:
            raise TypeError("float16 is not supported for continuous images (delta != 0)")
        x = x.astype(np.float32)
    if x.dtype.kind == "f":
        if d == float(np.finfo(x.dtype).max):
            return _binary(x)
        with np.errstate(over="ignore"):  # past the dtype's range: inf, every finite pair joins
            return x, x.dtype.type(d), x.dtype.type(0)
    if x.dtype.kind not in "iu":
        raise TypeError(f"values of dtype {x.dtype} cannot be labeled")
    k = int(delta) if d < 2.0**64 else 2**64  # cc3d's int(delta) (inf: past any range)
    if signed == "bits" and k == int(np.iinfo(x.dtype).max):
        return _binary(x)
    u = np.dtype(f"u{x.dtype.itemsize}")
    view = x.view(u)
    zero = u.type(0)
    if x.dtype.kind == "i" and signed == "numbers":
        zero = u.type(1 << (8 * u.itemsize - 1))
        view = view ^ zero
    return view, u.type(min(k, int(np.iinfo(u).max))), zero


def _binary(x: np.ndarray) -> tuple[np.ndarray, np.generic, np.generic]:
    return (x != 0).view(np.uint8), np.uint8(0), np.uint8(0)


@numba.njit(cache=True, nogil=True)
def _pairs(a, b, d, z, out):
    for i in range(a.size):
        out[i] = join_rule(a[i], b[i], d, z)


def delta_pairs(a: np.ndarray, b: np.ndarray, delta: float, signed: Signed = "bits") -> np.ndarray:
    """Where voxels of ``a`` join the voxels of ``b`` at the same positions (neighbours, e.g. the
    facing faces of two chunks): :func:`join_rule` on the values as :func:`prepare` gives them.
    ``a`` and ``b``: one shape and dtype. Returns a bool array of that shape."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"a and b differ: {a.shape} {a.dtype} and {b.shape} {b.dtype}")
    fa, d, z = prepare(np.ascontiguousarray(a), delta, signed)
    fb, _, _ = prepare(np.ascontiguousarray(b), delta, signed)
    out = np.empty(a.shape, np.bool_)
    if a.size:
        _pairs(fa.reshape(-1), fb.reshape(-1), d, z, out.reshape(-1).view(np.uint8))
    return out


@numba.njit(cache=True, nogil=True, _nrt=False)
def _starts(a, b, s, d, z):
    """``s[x]``: the voxel of value ``b[x]`` starts a run: it is nonzero and does not join the
    voxel before it, of value ``a[x]``."""
    for x in range(b.size):
        s[x] = (b[x] != z) & (join_rule(a[x], b[x], d, z) ^ True)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _codes(v, w, s, sq, J, U, nx, d, z):
    """``U[x]``: 2 where the pair (x, x) of this row ``v`` and the neighbour row ``w`` (padded
    rows: voxel x at x + 1; ``s``, ``sq`` their run starts) needs a union: it joins, and the pair
    (x - 1, x - 1) does not or its runs differ (a run starts at x in either row)."""
    j = J[1]
    for x in range(nx):
        j[x + 1] = join_rule(v[x + 1], w[x + 1], d, z)
    jp = j[:nx]
    jc = j[1:]
    sa = s[1:]
    sb = sq[1:]
    for x in range(nx):
        U[x] = (jc[x] & ((jp[x] & (sa[x] ^ 1) & (sb[x] ^ 1)) ^ 1)) << 1


@numba.njit(cache=True, nogil=True, _nrt=False)
def _codes_wide(v, w, s, sq, J, U, nx, d, z):
    """``U[x]``: bit o + 1 set where the pair (x, x + o), o = -1, 0, 1, of this row ``v`` and the
    neighbour row ``w`` (as :func:`_codes`) needs a union: it joins, and none of the pairs just
    before it, (x - 1, x + o - 1), (x - 1, x + o) and (x, x + o - 1), joins the same two runs."""
    jl = J[0]
    jm = J[1]
    jr = J[2]
    for x in range(nx):
        a = v[x + 1]
        jl[x + 1] = join_rule(a, w[x], d, z)
        jm[x + 1] = join_rule(a, w[x + 1], d, z)
        jr[x + 1] = join_rule(a, w[x + 2], d, z)
    # the pairs at x (suffix 1) and at x - 1 (suffix 0); "same": no run starts there
    l0 = jl[:nx]
    l1 = jl[1:]
    m0 = jm[:nx]
    m1 = jm[1:]
    r0 = jr[:nx]
    r1 = jr[1:]
    sa = s[1:]
    sl = sq[:nx]
    sm = sq[1:]
    sr = sq[2:]
    for x in range(nx):
        same_a = sa[x] ^ 1
        bl = sl[x] ^ 1
        bm = sm[x] ^ 1
        br = sr[x] ^ 1
        ul = l1[x] & ((same_a & ((l0[x] & bl) | m0[x])) ^ 1)
        um = m1[x] & (((same_a & ((m0[x] & bm) | r0[x])) | (l1[x] & bm)) ^ 1)
        ur = r1[x] & (((same_a & r0[x] & br) | (m1[x] & br)) ^ 1)
        U[x] = ul | (um << 1) | (ur << 2)


@numba.njit(cache=True, nogil=True)
def dl_scan(img, P, V, R, S, J, U, X, nz, ny, nx, dirs, d, z):
    """Number the runs of every row 0.. in raster order (``P[c] = c``) and unite the runs that
    join across rows in the forest ``P``; returns the number of runs.

    ``V``, ``R``, ``S``: rings of ``K`` rows of ``nx + 2`` (voxel x at x + 1, a background voxel
    at each end), row r in slot r % K (K = ny + 2 where there are several planes, else 2: the
    earliest neighbour row is ny + 1 rows back): the values, every voxel's run id (valid for
    nonzero voxels) and whether it starts a run. ``J``: (3, nx + 1) bytes, ``J[:, 0]`` zero;
    ``U``: ``nx`` bytes, a neighbour row's union codes (:func:`_codes`, :func:`_codes_wide`);
    ``X``: ``nx`` indices, the voxels that have a code, listed without a branch. The unions of
    one run share its root (found once per run and neighbour row).
    """
    K = R.shape[0]
    for k in range(K):
        V[k, 0] = z
        V[k, nx + 1] = z
        S[k, 0] = 0
        S[k, nx + 1] = 0
    m = np.uint64(0)
    for zz in range(nz):
        for y in range(ny):
            r = zz * ny + y
            v = V[r % K]
            s = S[r % K]
            rr = R[r % K]
            v[1 : nx + 1] = img[r * nx : r * nx + nx]
            _starts(v[:nx], v[1 : nx + 1], s[1 : nx + 1], d, z)
            a = m
            for x in range(1, nx + 1):
                m += np.uint64(s[x])
                rr[x] = m - _ONE  # (wraps around before the first run: background, never read)
            for c in range(a, m):
                P[c] = c
            for i in range(dirs.shape[0]):
                qz = zz + dirs[i, 0]
                qy = y + dirs[i, 1]
                if qz < 0 or qy < 0 or qy >= ny:
                    continue
                q = (qz * ny + qy) % K
                rq = R[q]
                if dirs[i, 2]:
                    _codes_wide(v, V[q], s, S[q], J, U, nx, d, z)
                else:
                    _codes(v, V[q], s, S[q], J, U, nx, d, z)
                # the voxels with a code, listed without a branch
                cnt = 0
                for x in range(nx):
                    X[cnt] = x
                    cnt += U[x] != 0
                last = np.int64(-1)
                root = np.int64(0)
                for j in range(cnt):
                    x = X[j]
                    code = U[x]
                    x += 1  # padded
                    ar = np.int64(rr[x])
                    if ar != last:
                        last = ar
                        root = find(P, ar)
                    if code & 1:
                        root = merge(P, np.int64(rq[x - 1]), root)
                    if code & 2:
                        root = merge(P, np.int64(rq[x]), root)
                    if code & 4:
                        root = merge(P, np.int64(rq[x + 1]), root)
    return m


@numba.njit(cache=True, nogil=True)
def dl_number(P, m):
    """Number the roots of the run forest ``P[:m]`` 1..n in run order and give every other run
    its root's number (a parent comes earlier, so it holds its number already). Returns n.
    Without a branch on which runs are roots."""
    n = np.uint64(0)
    for i in range(m):
        p = np.uint64(P[i])
        up = np.uint64(P[p])  # read whether needed or not: a choice of values, not a branch
        root = p == i
        n += np.uint64(root)
        P[i] = n if root else up
    return np.int64(n)


@numba.njit(cache=True, nogil=True)
def dl_fill(img, L, P, s, nrows, nx, m, d, z):
    """Write every voxel of ``L`` with its run's number ``P[c]`` (background 0), the runs found
    again as :func:`dl_scan` found them (``m`` of them; ``s``: ``nx`` bytes), voxels in reverse
    raster order: ``P`` may be ``L`` itself, as run c holds voxel c or a later one, so its slot
    is read before that voxel is written."""
    c = np.int64(m) - 1
    for r in range(nrows - 1, -1, -1):
        row = img[r * nx : r * nx + nx]
        out = L[r * nx : r * nx + nx]
        s[0] = row[0] != z
        _starts(row[: nx - 1], row[1:], s[1:nx], d, z)
        for x in range(nx - 1, -1, -1):
            out[x] = P[max(c, 0)] * np.uint64(row[x] != z)
            c -= np.int64(s[x])


_OUT = (np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))
_CONNECTIVITY = {2: {4: 4, 6: 4, 8: 8, 18: 8, 26: 8}, 3: {6: 6, 18: 18, 26: 26}}


def label_delta(
    values: np.ndarray,
    connectivity: int,
    delta: float,
    dtype: np.dtype | type = np.uint32,
    signed: Signed = "bits",
) -> tuple[np.ndarray, int]:
    """cc3d's ``connected_components(values, connectivity=connectivity, delta=delta)``: labels
    1..n of the components (neighbours join by :func:`join_rule` on :func:`prepare`'s values),
    numbered in raster order of their first voxels, C-ordered (a Fortran-ordered input is
    labeled in C order: its caller transposes it), and n.

    ``values``: 1D (one row), 2D or 3D, bool, integer or float; ``connectivity``: 4 or 8 in 2D
    (6 is 4, 18 and 26 are 8, as cc3d), 6, 18 or 26 in 3D; ``dtype``: uint16, uint32 or uint64
    (OverflowError where n does not fit); ``signed``: as :func:`prepare`.
    """
    x = np.ascontiguousarray(values)
    shape = x.shape
    if x.ndim == 1:
        x = x.reshape(1, -1)
        connectivity = 4
    if x.ndim not in _CONNECTIVITY:
        raise ValueError(f"expected a 1D, 2D or 3D image, got shape {x.shape}")
    conn = _CONNECTIVITY[x.ndim].get(int(connectivity))
    if conn is None:
        raise ValueError(f"connectivity {connectivity} is not one of a {x.ndim}D image")
    dtype = np.dtype(dtype)
    if dtype not in _OUT:
        raise ValueError(f"label dtype must be uint16, uint32 or uint64, got {dtype}")
    img, d, z = prepare(x, delta, signed)
    labels = np.empty(shape, dtype)
    if img.size == 0:
        return labels, 0
    nz, ny, nx = (1, *img.shape) if img.ndim == 2 else img.shape
    flat = img.reshape(-1)
    # the forest: run ids 0.. (at most one run per voxel), in the labels themselves where they
    # hold every id (dl_fill writes them in place); uint16 labels never do (one fewer compiled
    # scan: that dtype is for few labels, not few voxels)
    out = labels.reshape(-1)
    forest = out
    if dtype == np.uint16 or flat.size > np.iinfo(dtype).max:
        forest = np.empty(flat.size, np.uint32 if flat.size <= 2**32 - 1 else np.uint64)
    k = ny + 2 if nz > 1 else 2
    rings = (
        np.empty((k, nx + 2), img.dtype),
        np.empty((k, nx + 2), forest.dtype),
        np.empty((k, nx + 2), np.uint8),
    )
    joins = np.zeros((3, nx + 1), np.uint8)
    codes = np.zeros(nx, np.uint8)
    dirs = DIRECTIONS[(x.ndim, conn)]
    scratch = (*rings, joins, codes, np.empty(nx, np.uint32), nz, ny, nx, dirs)
    runs = int(dl_scan(flat, forest, *scratch, d, z))
    n = int(dl_number(forest, runs))
    if n > np.iinfo(dtype).max:
        raise OverflowError(f"{n} labels do not fit in {dtype}")
    dl_fill(flat, out, forest, rings[2][0], nz * ny, nx, runs, d, z)
    return labels, n
