"""tilelabel.measure against scikit-image's label and regionprops_table: the same labels, counts
and dtypes; the same table columns and values (with spacing) for a label image it is given."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from scipy import ndimage
from skimage import measure as sk

from tests.kernels.cpu.test_stats import raster_numbered
from tilelabel import measure as tm

PROPS = tm.PROPERTIES


@pytest.mark.parametrize("seed", range(3))
def test_label_equals_scikit_image(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 12, ndim))
        kind = rng.integers(3)
        if kind == 0:
            x = rng.random(shape) < rng.random()
        else:
            x = rng.integers(0, int(rng.integers(2, 5)), shape).astype(
                rng.choice([np.uint8, np.int16, np.int64])
            )
        bg = rng.choice([None, 0, 1, -1])
        conn = rng.choice([None, *range(1, ndim + 1)])
        want, n = sk.label(x, background=bg, connectivity=conn, return_num=True)
        got, m = tm.label(x, background=bg, connectivity=conn, return_num=True)
        assert m == n and got.dtype == want.dtype, (x.dtype, bg, conn)
        # the same partition; the same numbers wherever scikit-image numbers in raster order
        # (for some shapes with axes of length 1 it does not; tilelabel always does)
        np.testing.assert_array_equal(got, raster_numbered(want)[0])
        if (raster_numbered(want)[0] == want).all():
            np.testing.assert_array_equal(got, want)
        assert tm.label(x, bg, False, conn).dtype == want.dtype


def test_label_beyond_scikit_image():
    # any rank (scikit-image labels integer images of 1 to 3 dimensions)
    x = np.random.default_rng(0).integers(0, 3, (4, 5, 3, 4))
    got = tm.label(x, connectivity=1)
    # each value labeled on its own by scipy, the whole renumbered in raster order
    cross = ndimage.generate_binary_structure(4, 1)
    per_value = np.zeros(x.shape, np.int64)
    for v in (1, 2):
        lab, _ = ndimage.label(x == v, cross)
        per_value[lab > 0] = lab[lab > 0] + 1000 * v
    np.testing.assert_array_equal(got, raster_numbered(per_value)[0])
    with pytest.raises(ValueError, match="connectivity"):
        tm.label(x, connectivity=5)
    with dask.config.set(scheduler="sync"):
        lazy, n = tm.label(da.from_array(x, chunks=2), connectivity=1, return_num=True)
        np.testing.assert_array_equal(lazy.compute(), got)
        b = np.random.default_rng(1).random((20, 22, 9)) < 0.3
        lazy, n = tm.label(da.from_array(b, chunks=(7, 8, 9)), return_num=True)
        want, m = sk.label(b, return_num=True)
        assert lazy.dtype == want.dtype and int(n.compute()) == m
        np.testing.assert_array_equal(lazy.compute(), want)


def given_labels(rng, shape):
    """A label image as a user has one: values not 1..n, regions not connected."""
    lab = rng.integers(0, 6, shape) * 7
    lab[rng.random(shape) < 0.3] = 0
    return lab


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("spacing", [None, (2.0, 0.5, 0.25)])
def test_regionprops_table_equals_scikit_image(ndim, spacing):
    rng = np.random.default_rng(ndim)
    shape = (17, 23, 19)[-ndim:]
    spacing = None if spacing is None else spacing[-ndim:]
    lab = given_labels(rng, shape)
    inten = rng.normal(100, 20, shape)
    want = sk.regionprops_table(lab, inten, properties=PROPS, spacing=spacing)
    chunked = da.from_array(lab, chunks=tuple(s // 3 for s in shape))
    for image in (lab, chunked):
        with dask.config.set(scheduler="sync"):
            got = tm.regionprops_table(image, inten, properties=PROPS, spacing=spacing)
        assert list(got) == list(want)
        for col, w in want.items():
            if col.startswith(("label", "num_pixels", "bbox")):
                np.testing.assert_array_equal(got[col], w, err_msg=col)
            elif col.startswith("axis_"):  # roots of rounding noise where the length is 0
                np.testing.assert_allclose(got[col] ** 2, w**2, rtol=1e-9, atol=1e-6, err_msg=col)
            else:
                np.testing.assert_allclose(got[col], w, rtol=1e-9, atol=1e-9, err_msg=col)
    assert list(tm.regionprops_table(lab)) == list(sk.regionprops_table(lab))
    got = tm.regionprops_table(lab, properties=("label", "centroid"), separator="_")
    assert list(got) == ["label", *(f"centroid_{i}" for i in range(ndim))]


def test_regionprops_table_takes_other_properties_from_scikit_image():
    rng = np.random.default_rng(5)
    lab = given_labels(rng, (15, 16, 9))
    inten = rng.normal(100, 20, lab.shape)
    props = ("label", "euler_number", "area", "moments_central", "intensity_median")

    def median_cubed(mask, intensity):
        return float(np.median(intensity[mask]) ** 3)

    for image in (lab, da.from_array(lab, chunks=(5, 6, 9))):
        kw = {"properties": props, "extra_properties": [median_cubed], "spacing": (1, 2, 3)}
        got = tm.regionprops_table(image, inten, **kw)
        want = sk.regionprops_table(lab, inten, **kw)
        assert list(got) == list(want)
        for col, w in want.items():  # (first central moments: 0 but for rounding)
            np.testing.assert_allclose(got[col], w, rtol=1e-9, atol=1e-9, err_msg=col)
    none = tm.regionprops_table(np.zeros((4, 5), int), properties=("label", "moments_hu"))
    want = sk.regionprops_table(np.zeros((4, 5), int), properties=("label", "moments_hu"))
    assert list(none) == list(want) and all(v.size == 0 for v in none.values())
    with pytest.raises(AttributeError):
        tm.regionprops_table(lab, properties=("label", "no_such_property"))


def test_regionprops_table_refusals():
    lab = np.ones((4, 4), np.int32)
    with pytest.raises(AttributeError, match="intensity"):
        tm.regionprops_table(lab, properties=("intensity_mean",))
    with pytest.raises(TypeError, match="Non-integer"):
        tm.regionprops_table(lab.astype(float))


@pytest.mark.gpu
def test_cupy_inputs():
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    import cupy as cp

    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, (20, 21, 22))
    got = tm.label(cp.asarray(x), connectivity=2)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(got), sk.label(x, connectivity=2))
    b = rng.random((30, 31, 32)) < 0.3
    np.testing.assert_array_equal(cp.asnumpy(tm.label(cp.asarray(b))), sk.label(b))
    lab = given_labels(rng, (20, 21, 22))
    inten = rng.normal(100, 20, lab.shape)
    want = sk.regionprops_table(lab, inten, properties=PROPS, spacing=(1, 2, 3))
    got = tm.regionprops_table(cp.asarray(lab), cp.asarray(inten), PROPS, spacing=(1, 2, 3))
    for col, w in want.items():
        tol = 1e-6 if col.startswith("axis_") else 1e-9
        np.testing.assert_allclose(got[col], w, rtol=1e-9, atol=tol, err_msg=col)


def nan_case(rng, shape):
    """Labels 3, 6, ..., 36 scattered (and background), a float64 intensity with NaN at some
    voxels of four labels and of the background, +inf and -inf in one label without NaN."""
    lab = rng.integers(1, 13, shape) * 3
    lab[rng.random(shape) < 0.3] = 0
    inten = rng.normal(100, 20, shape)
    flat, v = lab.reshape(-1), inten.reshape(-1)
    for value in (3, 9, 15, 21):
        at = np.flatnonzero(flat == value)
        v[rng.choice(at, int(rng.integers(1, 4)), replace=False)] = np.nan
    at = rng.choice(np.flatnonzero(flat == 27), 2, replace=False)
    v[at] = np.inf, -np.inf
    v[(flat == 0) & (rng.random(flat.size) < 0.2)] = np.nan
    return lab, inten


def same_table(got, want):
    assert list(got) == list(want)
    for col, w in want.items():
        if col.startswith(("label", "num_pixels", "bbox", "intensity_min", "intensity_max")):
            np.testing.assert_array_equal(got[col], w, err_msg=col)  # NaN where w has NaN
        elif col.startswith("axis_"):
            np.testing.assert_allclose(got[col] ** 2, w**2, rtol=1e-9, atol=1e-6, err_msg=col)
        else:
            np.testing.assert_allclose(got[col], w, rtol=1e-9, atol=1e-9, err_msg=col)


@pytest.mark.parametrize("ndim", [2, 3])
def test_regionprops_table_nan_intensity_equals_scikit_image(ndim):
    # a region with a NaN among its values: intensity_min and intensity_max NaN as well (as
    # np.min / np.max give), like intensity_mean and intensity_sum; +inf and -inf without NaN:
    # min -inf, max +inf, mean NaN; a NaN in the background touches no region; any chunking
    rng = np.random.default_rng(10 + ndim)
    shape = (17, 23, 19)[-ndim:]
    lab, inten = nan_case(rng, shape)
    with np.errstate(invalid="ignore"):
        want = sk.regionprops_table(lab, inten, properties=PROPS)
    nan = np.isin(want["label"], (3, 9, 15, 21))
    np.testing.assert_array_equal(np.isnan(want["intensity_min"]), nan)
    np.testing.assert_array_equal(np.isnan(want["intensity_max"]), nan)
    assert want["intensity_min"][want["label"] == 27] == -np.inf
    assert want["intensity_max"][want["label"] == 27] == np.inf
    for chunks in (shape, tuple(s // 3 for s in shape), (4,) * ndim, (1,) * (ndim - 1) + (5,)):
        with dask.config.set(scheduler="sync"):
            got = tm.regionprops_table(da.from_array(lab, chunks=chunks), inten, properties=PROPS)
        same_table(got, want)
    same_table(tm.regionprops_table(lab, inten, properties=PROPS), want)
    # float32 the same; integer intensities as before
    cols = ("label", "intensity_min", "intensity_max")
    for image in (inten.astype(np.float32), np.nan_to_num(inten, posinf=9, neginf=-9).astype(int)):
        want = sk.regionprops_table(lab, image, properties=cols)
        for got in (
            tm.regionprops_table(lab, image, properties=cols),
            tm.regionprops_table(da.from_array(lab, chunks=4), image, properties=cols),
        ):
            for col in cols:
                np.testing.assert_array_equal(got[col], want[col], err_msg=col)


@pytest.mark.gpu
def test_cupy_nan_intensity():
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    import cupy as cp

    rng = np.random.default_rng(5)
    lab, inten = nan_case(rng, (20, 21, 22))
    with np.errstate(invalid="ignore"):
        want = sk.regionprops_table(lab, inten, properties=PROPS)
    same_table(tm.regionprops_table(cp.asarray(lab), cp.asarray(inten), PROPS), want)
    f32 = inten.astype(np.float32)
    want = sk.regionprops_table(lab, f32, properties=("label", "intensity_min", "intensity_max"))
    got = tm.regionprops_table(cp.asarray(lab), cp.asarray(f32), PROPS)
    for col in ("intensity_min", "intensity_max"):
        np.testing.assert_array_equal(got[col], want[col], err_msg=col)
