"""The CPU stats kernel against scikit-image's regionprops_table on whole arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import types
from scipy import ndimage
from skimage.measure import regionprops_table

from tests.cases import families
from tilelabel.kernels.backends import get_backend
from tilelabel.kernels.cpu.ops import first_indices
from tilelabel.kernels.cpu.stats import label_stats, label_stats_first, pairs
from tilelabel.synth import random_volume

PROPS = ("label", "area", "bbox", "centroid")
IPROPS = PROPS + ("intensity_mean", "intensity_min", "intensity_max")


def check(stats, labels, offset=None, intensity=None):
    """``stats`` (fields of label_stats) equal regionprops_table of ``labels`` (shifted)."""
    ndim = labels.ndim
    off = np.zeros(ndim, np.int64) if offset is None else np.asarray(offset)
    n = int(labels.max(initial=0))
    assert stats["count"].shape == (n, 1)
    if n == 0:
        return
    props = IPROPS if intensity is not None else PROPS
    ref = regionprops_table(labels, intensity_image=intensity, properties=props)
    count = stats["count"][:, 0]
    np.testing.assert_array_equal(count, ref["area"])
    for a in range(ndim):
        np.testing.assert_array_equal(stats["lo"][:, a], ref[f"bbox-{a}"] + off[a])
        np.testing.assert_array_equal(stats["hi"][:, a] + 1, ref[f"bbox-{ndim + a}"] + off[a])
        np.testing.assert_allclose(
            stats["csum"][:, a] / count, ref[f"centroid-{a}"] + off[a], rtol=1e-12
        )
    if intensity is not None:
        # scikit-image averages in the image's dtype (float32 stays float32); we sum in float64
        tol = 1e-5 if intensity.dtype == np.float32 else 1e-12
        mean = stats["isum"][:, 0] / count
        np.testing.assert_allclose(mean, ref["intensity_mean"], rtol=tol, atol=tol)
        np.testing.assert_array_equal(stats["imin"][:, 0], ref["intensity_min"])
        np.testing.assert_array_equal(stats["imax"][:, 0], ref["intensity_max"])
        sums = ndimage.sum_labels(intensity.astype(np.float64), labels, np.arange(1, n + 1))
        np.testing.assert_allclose(stats["isum"][:, 0], sums, rtol=1e-12)


@pytest.mark.parametrize("ndim", [2, 3])
def test_case_families(ndim):
    for name, img in families(ndim, size=23 if ndim == 3 else 37):
        labels, n = ndimage.label(img, np.ones((3,) * ndim))
        for dtype in (np.uint32, np.uint64):
            stats = label_stats(labels.astype(dtype), n)
            check(stats, labels)
        assert name


@pytest.mark.parametrize("idtype", [np.uint8, np.int16, np.int64, np.float32, np.float64, np.bool_])
def test_intensity_dtypes_and_offset(idtype):
    img = random_volume((19, 23, 31), 0.3, 1, seed=4)
    labels, n = ndimage.label(img)
    rng = np.random.default_rng(7)
    vals = (
        rng.normal(0, 50, img.shape)
        if np.dtype(idtype).kind == "f"
        else rng.integers(0, 100, img.shape)
    )
    intensity = vals.astype(idtype)
    stats = label_stats(labels.astype(np.uint32), n, (100, 7, 2**33), intensity)
    check(stats, labels, (100, 7, 2**33), intensity)


def test_backend_method_matches_kernel():
    img = random_volume((40, 50), 0.4, 2, seed=2)
    be = get_backend("cpu")
    labels, n = be.label(img, 8, np.uint32)
    stats = be.label_stats(labels, n, (5, 6))
    check(stats, np.asarray(labels, np.int64), (5, 6))


def test_label_without_voxels_keeps_identities():
    stats = label_stats(np.zeros((4, 5), np.uint32), 0)
    assert all(v.shape[0] == 0 for v in stats.values())
    with pytest.raises(ValueError, match="intensity shape"):
        label_stats(np.ones((4, 5), np.uint32), 1, None, np.ones((5, 4)))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([2, 3]),
    st.integers(1, 12),
    st.sampled_from([0.1, 0.4, 0.7]),
    st.integers(1, 3),
    st.integers(0, 2**31),
)
def test_random_against_regionprops(ndim, size, density, granularity, seed):
    shape = tuple(size + i for i in range(ndim))
    img = random_volume(shape, density, granularity, seed)
    labels, n = ndimage.label(img)
    intensity = np.random.default_rng(seed).integers(-5, 5, shape).astype(np.int32)
    check(label_stats(labels.astype(np.uint64), n, None, intensity), labels, None, intensity)


def raster_numbered(lab):
    """``lab`` renumbered 1..n in raster order of each label's first voxel (as kernels number)."""
    flat = lab.reshape(-1)
    u, first = np.unique(flat, return_index=True)
    keep = u != 0
    keys = u[keep][np.argsort(first[keep])]
    lut = np.zeros(int(flat.max(initial=0)) + 1, np.int64)
    lut[keys] = np.arange(1, len(keys) + 1)
    return lut[lab], len(keys)


def brute_stats(lab, n, intensity=None):
    """label_stats' fields by numpy scatter operations, voxel by voxel."""
    flat = lab.reshape(-1)
    fg = flat != 0
    idx = flat[fg] - 1
    coords = np.stack(np.unravel_index(np.flatnonzero(fg), lab.shape), axis=1)
    out = {
        "count": np.bincount(idx, minlength=n).astype(np.int64)[:, None],
        "lo": np.full((n, lab.ndim), np.iinfo(np.int64).max, np.int64),
        "hi": np.full((n, lab.ndim), -1, np.int64),
        "csum": np.zeros((n, lab.ndim), np.int64),
    }
    np.minimum.at(out["lo"], idx, coords)
    np.maximum.at(out["hi"], idx, coords)
    np.add.at(out["csum"], idx, coords)
    if intensity is not None:
        v = intensity.reshape(-1)[fg].astype(np.float64)
        out["isum"] = np.zeros((n, 1))
        out["imin"] = np.full((n, 1), np.inf)
        out["imax"] = np.full((n, 1), -np.inf)
        np.add.at(out["isum"][:, 0], idx, v)
        np.minimum.at(out["imin"][:, 0], idx, v)
        np.maximum.at(out["imax"][:, 0], idx, v)
    return out


def random_labels(rng, shape, k, background, run):
    """Labels 1..k scattered without regard to connectivity, in runs of ``run`` along x."""
    cells = shape[:-1] + (-(-shape[-1] // run),)
    lab = rng.integers(1, k + 1, cells) * (rng.random(cells) >= background)
    lab = np.repeat(lab, run, axis=-1)[..., : shape[-1]]
    return raster_numbered(lab)


def any_labels(rng, longest: int = 90):
    """:func:`random_labels` of a random 2-D or 3-D shape (rows up to ``longest``), count of
    labels, background fraction and run length."""
    ndim = int(rng.integers(2, 4))
    shape = tuple(int(s) for s in rng.integers(1, 9, ndim - 1)) + (int(rng.integers(1, longest)),)
    k, background = int(rng.integers(1, 7)), rng.random()
    return random_labels(rng, shape, k, background, int(rng.choice([1, 2, 5, 40])))


@pytest.mark.parametrize("seed", range(6))
def test_random_labels_against_brute_force(seed):
    # labels need not be connected: rows mixing several labels, sparse and dense, runs of one
    # voxel and runs touching either end of a row, labels that leave a row and come back
    rng = np.random.default_rng(seed)
    for _ in range(60):
        lab, n = any_labels(rng)
        shape = lab.shape
        idt = rng.choice([np.uint8, np.int16, np.int32, np.int64, np.uint64])
        intensity = rng.integers(0, 120, shape).astype(idt)
        want = brute_stats(lab, n, intensity)
        for dtype in (np.uint32, np.uint64):
            for inten in (None, intensity):
                got, first = label_stats_first(lab.astype(dtype), n, None, inten)
                assert list(got) == [k for k in want if inten is not None or k[0] != "i"]
                for key, val in got.items():
                    assert val.dtype == want[key].dtype, key
                    np.testing.assert_array_equal(val, want[key], err_msg=key)
                if n:
                    np.testing.assert_array_equal(first, first_indices(lab.astype(dtype), n))
                else:
                    assert first.shape == (0,)


#: 1 comes back in a sparse row that also holds 2, further left than before (its box must
#: widen); 3 is a single voxel at the row's last x; 4 fills a whole row; 5 and 2 alternate
#: voxel by voxel in a dense row
ROWS_BY_HAND = np.array(
    [
        [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 3],
        [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4],
        [5, 2, 5, 2, 5, 2, 5, 2, 5, 2, 5, 1],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    ],
    np.uint32,
)


def test_rows_by_hand():
    lab = ROWS_BY_HAND.copy()
    intensity = np.arange(lab.size, dtype=np.uint16).reshape(lab.shape)
    for dtype in (np.uint32, np.uint64):
        for shape in (lab.shape, (1,) + lab.shape, (5, 1, 12)):
            L = lab.astype(dtype).reshape(shape)
            got, first = label_stats_first(L, 5, None, intensity.reshape(shape))
            want = brute_stats(L, 5, intensity.reshape(shape))
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=key)
            np.testing.assert_array_equal(first, [3, 20, 23, 24, 36])
            assert label_stats(L, 5)["lo"][0, -1] == 0


def test_float_and_nan_intensity_sums_in_raster_order():
    # float intensities are summed per label in raster order, so the sums are those of a plain
    # loop; NaN neither crashes nor spills into another label
    rng = np.random.default_rng(3)
    lab, n = random_labels(rng, (6, 7, 80), 4, 0.5, 3)
    vals = rng.normal(0, 1e3, lab.shape)
    for dt in (np.float32, np.float64):
        v = vals.astype(dt)
        got = label_stats(lab, n, None, v)
        want = np.zeros(n)
        for i, value in zip(lab.reshape(-1), v.reshape(-1), strict=True):
            if i:
                want[i - 1] += np.float64(value)
        np.testing.assert_allclose(got["isum"][:, 0], want, rtol=1e-12)
    v = vals.copy()
    v[lab == 1] = np.nan
    got = label_stats(lab, n, None, v)
    assert np.isfinite(got["isum"][1:]).all() and np.isnan(got["isum"][0, 0])


def test_nan_helpers_have_one_specialisation():
    # _min / _max are called with float64 only, whatever the label and intensity types
    from tilelabel.kernels.cpu import stats

    lab = np.array([[1, 1, 0, 2], [2, 0, 3, 3]])
    for dtype in (np.uint32, np.uint64):
        for idt in (np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64, np.bool_):
            label_stats(lab.astype(dtype), 3, None, np.ones(lab.shape, idt))
    for fn in (stats._min, stats._max):  # (none where the callers came from numba's cache)
        assert set(fn.signatures) <= {(types.float64, types.float64)}, fn.signatures


def test_first_indices_without_labels():
    stats, first = label_stats_first(np.zeros((3, 4, 5), np.uint64), 0)
    assert first.shape == (0,) and first.dtype == np.int64 and stats["count"].shape == (0, 1)


def brute_moments(lab, n, offset, intensity=None):
    """Sums of products of global coordinates (label_stats' ``m2``, axis pairs in upper-triangle
    order) and of squared intensities, voxel by voxel, in exact integers."""
    flat = lab.reshape(-1)
    fg = flat != 0
    idx = flat[fg] - 1
    coords = np.stack(np.unravel_index(np.flatnonzero(fg), lab.shape), axis=1)
    coords = coords.astype(np.int64) + np.asarray(offset, np.int64)
    cols = [coords[:, a] * coords[:, b] for a, b in pairs(lab.ndim)]
    m2 = np.zeros((n, len(cols)), np.int64)
    for k, c in enumerate(cols):
        np.add.at(m2[:, k], idx, c)
    out = {"m2": m2.astype(np.float64)}
    if intensity is not None:
        v = intensity.reshape(-1)[fg].astype(np.float64)
        out["isq"] = np.zeros((n, 1))
        np.add.at(out["isq"][:, 0], idx, v * v)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_moments_against_brute_force(seed):
    # sums of coordinate products from the run-by-run pass, made global with an offset: exact
    # while they stay below 2**53, as here
    rng = np.random.default_rng(seed)
    for _ in range(30):
        lab, n = any_labels(rng)
        shape, ndim = lab.shape, lab.ndim
        intensity = rng.integers(0, 120, shape).astype(np.int16)
        offset = tuple(int(o) for o in rng.integers(0, 5000, ndim))
        want = brute_moments(lab, n, offset, intensity)
        got = label_stats(lab.astype(np.uint32), n, offset, intensity, moments=True)
        np.testing.assert_array_equal(got["m2"], want["m2"])
        np.testing.assert_array_equal(got["isq"], want["isq"])
        got = label_stats(lab.astype(np.uint64), n, None, None, moments=True)
        assert "isq" not in got
        np.testing.assert_array_equal(got["m2"], brute_moments(lab, n, (0,) * ndim)["m2"])


def with_nans(rng, lab, n, dtype=np.float64, overflow=False):
    """A float intensity for ``lab``: NaN at some voxels of half the labels (and of the
    background), the first of them also with +inf and -inf; of the others, one with +inf and
    -inf and no NaN (min -inf, max +inf, sum NaN); with ``overflow`` one with the type's largest
    value twice and -inf (in float64 a sum in raster order gone to +inf, then NaN without a NaN;
    in another order -inf)."""
    v = rng.normal(0, 50, lab.shape).astype(dtype)
    flat = v.reshape(-1)
    where = [np.flatnonzero(lab.reshape(-1) == i) for i in rng.permutation(np.arange(1, n + 1))]
    nan, rest = where[: n // 2], where[n // 2 :]
    for at in nan:
        flat[rng.choice(at, int(rng.integers(1, at.size + 1)), replace=False)] = np.nan
    big = np.finfo(dtype).max
    extra = [(nan[:1], (np.inf, -np.inf)), (rest[:1], (np.inf, -np.inf))]
    if overflow:
        extra.append((rest[1:2], (big, big, -np.inf)))
    for at, values in extra:
        for a in at:  # voxels drawn with replacement: fewer where the label is small
            flat[rng.choice(a, len(values))] = values
    v[(lab == 0) & (rng.random(lab.shape) < 0.3)] = np.nan
    return v


@pytest.mark.parametrize("seed", range(4))
def test_nan_intensity_min_max_as_numpy(seed):
    # a label with a NaN among its values has min and max NaN, as np.min / np.max (and
    # regionprops_table) give; every other label keeps its values; in pure, sparse and dense
    # rows alike, at a label's first voxel or later
    rng = np.random.default_rng(seed)
    for _ in range(40):
        lab, n = any_labels(rng)
        for dt in (np.float32, np.float64):
            v = with_nans(rng, lab, n, dt, overflow=True)
            with np.errstate(invalid="ignore", over="ignore"):  # np.minimum.at: NaN wins
                want = brute_stats(lab, n, v)
            # sums with infinities depend on the order of the adds: compare the finite ones;
            # a NaN value makes any sum NaN
            finite = np.isfinite(want["isum"])
            for dtype in (np.uint32, np.uint64):
                got = label_stats(lab.astype(dtype), n, None, v)
                for key in ("imin", "imax"):
                    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
                np.testing.assert_allclose(got["isum"][finite], want["isum"][finite], rtol=1e-12)
                assert np.isnan(got["isum"][np.isnan(want["imin"])]).all()


def test_nan_at_every_voxel_by_hand():
    # a single NaN at each foreground voxel in turn of test_rows_by_hand's rows: its label's
    # min and max are NaN, the other labels' as without it; also where labels hold +inf and
    # -inf (4), or a sum gone to +inf and a -inf (5), whose sums are NaN without a NaN
    lab = ROWS_BY_HAND.copy()
    finite = np.arange(lab.size, dtype=np.float64).reshape(lab.shape) - 20
    infs = finite.copy()
    infs[2, 3], infs[2, 9] = np.inf, -np.inf
    infs[3, 0], infs[3, 2], infs[3, 6] = 1e308, 1e308, -np.inf
    for base in (finite, infs):
        base = base.copy()
        base[lab == 0] = np.nan  # background: touches no label
        for at in [None, *zip(*np.nonzero(lab), strict=True)]:
            v = base.copy()
            if at is not None:
                v[at] = np.nan
            with np.errstate(invalid="ignore", over="ignore"):
                want = brute_stats(lab, 5, v)
            for shape in (lab.shape, (1,) + lab.shape, (5, 1, 12)):
                got = label_stats(lab.reshape(shape), 5, None, v.reshape(shape))
                for key in ("imin", "imax", "isum"):
                    np.testing.assert_array_equal(got[key], want[key], err_msg=f"{key} {at}")
    got = label_stats(lab, 5, None, infs)
    assert got["imin"][3, 0] == -np.inf and got["imax"][3, 0] == np.inf
    assert got["imin"][4, 0] == -np.inf and got["imax"][4, 0] == 1e308
    assert np.isnan(got["isum"][3:, 0]).all() and np.isfinite(got["isum"][:3, 0]).all()
