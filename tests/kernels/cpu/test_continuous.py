"""The continuous-value (``delta``) CPU kernel against cc3d.connected_components, exactly.

cc3d is the reference everywhere but in three cases where it strays from its own rule (the
kernel's module docstring has them), and there the reference is cc3d's plain scan of the same
graph: a 2D image with ``delta`` > 0 under 8-connectivity is labeled as one plane of a 3D image
under 26-connectivity, and a float image at ``delta`` 0 whose foreground lies in one row as its
values renumbered to integers. Signed integers compared as numbers (``signed="numbers"``, no
cc3d counterpart) are checked against a brute-force graph of Python integers.
"""

from __future__ import annotations

import itertools

import cc3d
import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tilelabel.kernels.cpu.continuous import delta_pairs, label_delta, prepare

CONNECTIVITIES = [(2, 4), (2, 8), (3, 6), (3, 18), (3, 26)]
DTYPES = [np.uint8, np.uint16, np.int16, np.int64, np.float32, np.float64]


def classes(x: np.ndarray) -> np.ndarray:
    """Integer classes of ``x``'s values (0 background, every NaN a class of its own)."""
    out = np.unique(x, return_inverse=True)[1].reshape(x.shape).astype(np.uint32) + 1
    out[x == 0] = 0
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    out[nan] = out.max(initial=0) + 1 + np.arange(int(nan.sum()), dtype=np.uint32)
    return out


def oracle(x: np.ndarray, conn: int, delta: float) -> tuple[np.ndarray, int]:
    """cc3d's labels and count, through its plain scans where its shortcuts stray."""
    if x.ndim == 2 and conn == 8 and delta > 0:
        labels, n = cc3d.connected_components(x[None], connectivity=26, delta=delta, return_N=True)
        return labels[0], n
    _, first, last = cc3d.estimate_provisional_labels(x)
    if x.dtype.kind == "f" and delta == 0 and first == last:
        x = classes(x)
    return cc3d.connected_components(x, connectivity=conn, delta=delta, return_N=True)


def check(x: np.ndarray, conn: int, delta: float, dtype=np.uint32) -> None:
    labels, n = label_delta(x, conn, delta, dtype)
    ref, rn = oracle(x, conn, delta)
    assert labels.dtype == dtype and labels.shape == x.shape
    assert n == rn, (x.shape, x.dtype, conn, delta)
    np.testing.assert_array_equal(labels, ref)


def volume(shape, dtype, smooth: bool, rng) -> np.ndarray:
    """Random values of ``dtype``, about 15% background: noise, or a random walk along every
    axis (neighbours close, so that components are large). uint8 wraps around (0 beside 255);
    signed dtypes are negative too; int64 lies near both its extremes."""
    dtype = np.dtype(dtype)
    if smooth:
        v = rng.integers(-2, 3, shape)
        for axis in range(len(shape)):
            v = np.cumsum(v, axis=axis)
    else:
        v = rng.integers(-12, 13, shape)
    if dtype.kind == "f":
        v = v * 0.25 + rng.random(shape) * (0.1 if smooth else 0.0)
    elif dtype == np.int64:
        top = np.int64(np.iinfo(np.int64).max - 1000)
        v = np.where(rng.random(shape) < 0.5, v + top, v - top)
    elif dtype.kind == "u":
        v = v % (256 if dtype == np.uint8 else 60000)
    out = v.astype(dtype)
    out[rng.random(shape) < 0.15] = 0
    return out


def deltas(dtype) -> list[float]:
    return [0, 0.3, 2.0] if np.dtype(dtype).kind == "f" else [0, 1, 2.7, 9]


def shapes(nd: int, rng) -> list[tuple[int, ...]]:
    """Odd shapes, size-1 axes among them."""
    fixed = [(1,) * nd, (1,) * (nd - 1) + (13,), (13,) + (1,) * (nd - 1)]
    return fixed + [
        tuple(int(s) for s in rng.integers(1, 15 if nd == 3 else 40, nd)) for _ in range(5)
    ]


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_random_volumes_equal_cc3d(nd, conn, dtype):
    rng = np.random.default_rng(nd * 100 + conn + np.dtype(dtype).num)
    for shape in shapes(nd, rng):
        for smooth in (False, True):
            x = volume(shape, dtype, smooth, rng)
            for delta in deltas(dtype):
                check(x, conn, delta)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
def test_larger_smooth_volumes_equal_cc3d(nd, conn):
    """Long runs and large union trees: a smooth uint8 and float32 field, several deltas."""
    rng = np.random.default_rng(conn)
    shape = (30, 35, 40) if nd == 3 else (150, 170)
    for dtype, ds in ((np.uint8, (0, 1, 3, 8)), (np.float32, (0, 0.5, 1.5))):
        x = volume(shape, dtype, True, rng)
        for delta in ds:
            check(x, conn, delta)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
def test_overflowing_differences(nd, conn):
    """Values whose naive difference wraps around: 0, 1, 254, 255 in uint8, the extremes of
    uint16 and int64 (cc3d compares int64 through its unsigned bits: min and max are 1 apart)."""
    rng = np.random.default_rng(conn)
    shape = (9, 10, 11) if nd == 3 else (30, 31)
    u8 = rng.choice(np.array([0, 1, 2, 253, 254, 255], np.uint8), shape)
    u16 = rng.choice(np.array([0, 1, 65534, 65535], np.uint16), shape)
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    i64 = rng.choice(np.array([0, lo, lo + 1, hi - 1, hi, -1, 1], np.int64), shape)
    for x, ds in ((u8, (0, 1, 2, 250, 254)), (u16, (0, 1, 65533)), (i64, (0, 1, 2, 5))):
        for delta in ds:
            check(x, conn, delta)


def brute(x: np.ndarray, conn: int, delta: int) -> tuple[np.ndarray, int]:
    """Labels of signed integers compared as numbers: the graph of neighbour pairs, nonzero both
    and at most ``delta`` apart in Python integers, numbered by first voxel."""
    v = x.reshape((1,) * (3 - x.ndim) + x.shape).astype(object)
    idx = np.arange(v.size).reshape(v.shape)
    reach = {4: 1, 6: 1, 8: 2, 18: 2, 26: 3}[conn]
    rows, cols = [], []
    for off in itertools.product((-1, 0, 1), repeat=3):
        if x.ndim == 2 and off[0]:
            continue
        if not 0 < sum(map(abs, off)) <= reach:
            continue
        a = tuple(slice(max(0, -o), s - max(0, o)) for o, s in zip(off, v.shape, strict=True))
        b = tuple(slice(max(0, o), s - max(0, -o)) for o, s in zip(off, v.shape, strict=True))
        va, vb = v[a], v[b]
        ok = (va != 0) & (vb != 0) & (abs(va - vb) <= delta)
        rows.append(idx[a][ok.astype(bool)])
        cols.append(idx[b][ok.astype(bool)])
    r, c = np.concatenate(rows), np.concatenate(cols)
    graph = coo_matrix((np.ones(r.size), (r, c)), shape=(v.size, v.size))
    comp = connected_components(graph, directed=False)[1]
    fg = (v != 0).reshape(-1).astype(bool)
    order = {}
    labels = np.zeros(v.size, np.int64)
    for i in np.flatnonzero(fg):
        labels[i] = order.setdefault(comp[i], len(order) + 1)
    return labels.reshape(x.shape), len(order)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
def test_signed_as_numbers(nd, conn):
    rng = np.random.default_rng(conn)
    shape = (6, 7, 8) if nd == 3 else (20, 21)
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    for x in (
        rng.integers(-4, 5, shape).astype(np.int8),
        rng.choice(np.array([0, lo, lo + 1, hi - 1, hi, -1, 1, 2], np.int64), shape),
    ):
        for delta in (0, 1, 2, 3):
            labels, n = label_delta(x, conn, delta, signed="numbers")
            ref, rn = brute(x, conn, delta)
            assert n == rn
            np.testing.assert_array_equal(labels, ref)


def test_background_nan_and_signed_zero():
    """0 and -0.0 are background; a NaN is foreground that joins nothing, not even a NaN."""
    nan = np.nan
    for dtype in (np.float32, np.float64):
        x = np.array([[0.0, 1e-9, -0.0, 0.5, 0.6, nan, nan, 0.7], [nan, 0.5, 0, 0, 0, 0, 0, 0.7]])
        x = x.astype(dtype)
        for conn in (4, 8):
            for delta in (0, 0.15, 1.0):
                check(x, conn, delta)
    x = np.where(np.random.default_rng(0).random((8, 9, 10)) < 0.3, np.nan, 1.0)
    for conn in (6, 18, 26):
        check(x.astype(np.float32), conn, 0)
        check(x.astype(np.float32), conn, 0.5)


def test_delta_rounding_as_cc3d():
    """An integer dtype's delta is truncated (1.99 is 1); a float delta is rounded to the
    values' dtype (float32: 1.1 - 1.0 is above float32(0.1))."""
    x = np.array([[1, 3, 4, 6, 0, 200, 201]], np.uint8)
    for delta in (0.5, 1.0, 1.99, 2.0, 2.5):
        check(x, 4, delta)
    for dtype in (np.float32, np.float64):
        check(np.array([[1.0, 1.1, 1.2, 0, 2.0, 2.25]], dtype), 4, 0.1)


def test_delta_at_dtype_max_is_binary():
    """cc3d: delta equal to the dtype's largest value makes the image binary (int8 127: 1 and
    -100 join, 156 apart in bits; float32's max: NaN joins too). As one plane of a 3D image:
    cc3d's 2D 4-connected binary scan does not join neighbours along a row whose values
    differ."""
    x = np.array([[1, -100, 0, 5, 120], [0, 7, 7, 0, -128]], np.int8)
    for delta in (126, 127, 128, 200, 255):
        for conn in (6, 26):
            check(x[None], conn, delta)
        check(x, 8, delta)
        np.testing.assert_array_equal(
            label_delta(x, 4, delta)[0], label_delta(x[None], 6, delta)[0][0]
        )
    assert label_delta(x, 4, 127)[1] == 2
    f = np.array([[[1.0, np.nan, 3.0e38, 0, -3.0e38]]], np.float32)
    check(f, 6, float(np.finfo(np.float32).max))
    labels, n = label_delta(f, 6, float(np.finfo(np.float32).max))
    assert n == 2 and labels.tolist() == [[[1, 1, 1, 0, 2]]]


def test_bool_and_every_integer_width():
    rng = np.random.default_rng(3)
    b = rng.random((10, 11, 12)) < 0.5
    for delta in (0, 0.5, 3):
        check(b, 26, delta)
        check(b, 6, delta)
    for dtype in (np.int8, np.int32, np.uint32, np.uint64):
        x = volume((9, 10, 11), dtype, True, rng)
        for delta in (0, 1, 4):
            check(x, 18, delta)


def test_fortran_order_is_the_transpose():
    """cc3d numbers a Fortran-ordered array in Fortran order: the labels of its transpose."""
    rng = np.random.default_rng(5)
    x = volume((12, 13, 14), np.float32, True, rng)
    f = np.asfortranarray(x)
    for conn, delta in ((6, 0.5), (26, 1.0), (18, 0)):
        ref, rn = cc3d.connected_components(f, connectivity=conn, delta=delta, return_N=True)
        labels, n = label_delta(f.T, conn, delta)
        assert n == rn
        np.testing.assert_array_equal(labels.T, ref)


def test_label_dtypes_and_overflow():
    rng = np.random.default_rng(6)
    x = volume((14, 15, 16), np.uint16, False, rng)
    for dtype in (np.uint16, np.uint32, np.uint64):
        check(x, 26, 3, dtype)
    many = np.zeros((2, 70000), np.uint8)
    many[0, ::2] = 1  # 35000 components in a row, then a row of 35000 more
    many[1, ::2] = 100
    labels, n = label_delta(many, 4, 1, np.uint32)
    assert n == 70000 and labels.max() == n
    with pytest.raises(OverflowError, match="do not fit in uint16"):
        label_delta(many, 4, 1, np.uint16)


def test_cc3d_2d_8_shortcut():
    """cc3d's 2D 8-connected scan joins 95 to 5 (delta 10: both within 10 of the image's range)
    and then skips 95's other neighbours; the rule joins 95 to 100 only."""
    x = np.array([[0, 5, 0], [100, 95, 0]], np.uint8)
    labels, n = label_delta(x, 8, 10)
    assert n == 2 and labels.tolist() == [[0, 1, 0], [2, 2, 0]]
    assert cc3d.connected_components(x, connectivity=8, delta=10).tolist() == [[0, 1, 0], [2, 1, 0]]


def test_cc3d_float_row_shortcut():
    """cc3d labels an image whose foreground is one row through a shortcut that truncates its
    floats to integers: 0.37 and 0.37 stay apart there, and join here."""
    x = np.array([[0.37, 0.37, 0.0, 2.5], [0, 0, 0, 0]])
    labels, n = label_delta(x, 4, 0)
    assert n == 2 and labels.tolist() == [[1, 1, 0, 2], [0, 0, 0, 0]]
    assert cc3d.connected_components(x, connectivity=4, return_N=True)[1] == 3


def test_infinities_join_when_equal():
    """+inf and +inf are equal, so they join at any delta (cc3d: at 0, and at delta > 0 only
    where a shortcut of its scan compares for equality); inf - x is inf, above a finite delta."""
    inf = np.inf
    x = np.array([[inf, inf, 0, -inf, -inf, 5.0, inf]], np.float32)
    for delta in (0, 1, inf):
        labels, n = label_delta(x, 4, delta)
        expect = [1, 1, 0, 2, 2, 3, 4] if delta < inf else [1, 1, 0, 2, 2, 2, 2]
        assert labels[0].tolist() == expect, delta
    check(np.array([[[inf, 0]], [[inf, 1]]], np.float32), 26, 1)


def test_delta_pairs_is_the_rule_of_the_labels():
    """Two neighbours are one component exactly where delta_pairs says they join."""
    rng = np.random.default_rng(7)
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    cases = [
        (rng.integers(0, 256, 400).astype(np.uint8), (0, 1, 5, 254, 255)),
        (rng.integers(-5, 6, 400).astype(np.int16), (0, 1, 3, 65534)),
        (rng.choice(np.array([0, lo, hi, lo + 2, -1, 1], np.int64), 400), (0, 1, 3)),
        (
            np.concatenate([rng.random(390) * 4 - 2, [0, -0.0, np.nan, np.inf, -np.inf] * 2]),
            (0, 0.5),
        ),
    ]
    for values, ds in cases:
        a, b = values[:200], values[200:]
        for delta in ds:
            for signed in ("bits", "numbers"):
                join = delta_pairs(a, b, delta, signed)
                assert join.dtype == np.bool_ and join.shape == a.shape
                for i in range(0, 200, 7):
                    n = label_delta(np.array([a[i], b[i]]), 4, delta, signed=signed)[1]
                    both = a[i] != 0 and b[i] != 0
                    assert join[i] == (both and n == 1), (a[i], b[i], delta, signed)
    with pytest.raises(ValueError, match="differ"):
        delta_pairs(np.zeros(3, np.uint8), np.zeros(3, np.uint16), 1)


def test_prepare_and_errors():
    x = np.array([[-1, 1]], np.int8)
    v, d, z = prepare(x, 2.9)
    assert v.dtype == np.uint8 and d == 2 and z == 0 and v.tolist() == [[255, 1]]
    v, d, z = prepare(x, 300, signed="numbers")
    assert d == 255 and z == 128 and v.tolist() == [[127, 129]]
    assert prepare(np.ones(2, np.float32), 0.1)[1] == np.float32(0.1)
    with pytest.raises(ValueError, match="delta"):
        label_delta(x, 4, -1)
    with pytest.raises(ValueError, match="delta"):
        label_delta(x, 4, np.nan)
    with pytest.raises(TypeError, match="float16"):
        label_delta(np.ones((2, 2), np.float16), 4, 1)
    with pytest.raises(ValueError, match="connectivity"):
        label_delta(np.ones((2, 2, 2), np.uint8), 8, 1)
    with pytest.raises(ValueError, match="label dtype"):
        label_delta(x, 4, 1, np.int32)
    with pytest.raises(ValueError, match="1D, 2D or 3D"):
        label_delta(np.ones((2, 2, 2, 2)), 26, 1)


def test_empty_and_one_dimensional():
    labels, n = label_delta(np.zeros((0, 4), np.float32), 4, 1)
    assert n == 0 and labels.shape == (0, 4)
    x = np.array([1, 2, 4, 0, 5, 5], np.uint8)
    labels, n = label_delta(x, 26, 1)
    ref, rn = cc3d.connected_components(x, connectivity=26, delta=1, return_N=True)
    assert n == rn and labels.shape == x.shape
    np.testing.assert_array_equal(labels, ref)
    # float16 at delta 0: compared as float32
    h = np.array([[0.5, 0.5, -0.0, 0.25]], np.float16)
    assert label_delta(h, 4, 0)[0].tolist() == [[1, 1, 0, 2]]
