"""tilelabel.measure.regionprops against scikit-image's: the same regions in the same order and,
property by property, the same values of the same types (exact for integers, boxes and slices,
tight tolerances for floats), the same errors; numpy and dask (odd chunkings) label images."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from skimage import measure as sk

from tilelabel import measure as tm
from tilelabel import regions

#: roots of rounding noise where the value is near 0: compared squared, like the table's
SQUARED = ("axis_major_length", "axis_minor_length", "eccentricity")


def given_labels(rng, shape):
    """A label image as a user has one: values not 1..n, regions not connected, a negative
    value (no region, for scikit-image)."""
    lab = rng.integers(0, 6, shape) * 7 + 2
    lab[rng.random(shape) < 0.45] = 0
    lab[rng.random(shape) < 0.03] = -3
    return lab


def assert_same(got, want, name):
    """``got`` is ``want``: type, structure, dtype and shape alike; values exact for integers,
    within 1e-9 for floats."""
    assert type(got) is type(want), (name, type(got), type(want))
    if isinstance(want, tuple | list):
        assert len(got) == len(want), name
        for g, w in zip(got, want, strict=True):
            assert_same(g, w, name)
    elif isinstance(want, np.ndarray):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        if want.dtype.kind in "biuO":
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=name)
    elif isinstance(want, float | np.floating) and name in SQUARED:
        np.testing.assert_allclose(got**2, want**2, rtol=1e-9, atol=1e-6, err_msg=name)
    elif isinstance(want, float | np.floating | complex):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=name)
    else:
        assert got == want, (name, got, want)


def value(region, name):
    """``region[name]``, or the type of the error it raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NaNs of empty moments
            return region[name]
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return type(e)


def assert_regions(got, want, extra=()):
    assert [r.label for r in got] == [r.label for r in want]
    for g, w in zip(got, want, strict=True):
        assert type(g.label) is int
        names = list(w)
        assert list(g) == names
        for name in (*names, *extra):
            assert_same(value(g, name), value(w, name), name)


def images(lab, chunks):
    """The label image as numpy and as dask arrays of odd chunkings."""
    yield lab
    for c in chunks:
        yield da.from_array(lab, chunks=c)


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"spacing": (2.0, 0.5, 1.25)},
        {"offset": (3, -5, 11)},
        {"spacing": 3, "offset": (1, 2, 3), "cache": False},
    ],
    ids=["plain", "spacing", "offset", "all"],
)
@pytest.mark.parametrize("intensity", [False, True])
def test_regionprops_equals_scikit_image(ndim, kw, intensity):
    rng = np.random.default_rng(ndim + 10 * intensity)
    shape = (23, 29) if ndim == 2 else (9, 13, 8)
    lab = given_labels(rng, shape)
    kw = {k: v[-ndim:] if isinstance(v, tuple) else v for k, v in kw.items()}
    inten = rng.normal(100, 20, shape) if intensity else None
    want = sk.regionprops(lab, inten, **kw)
    # without the cache every property builds its crop again: one chunking only
    chunks = [(5, 7, 4)[-ndim:], (1,) * (ndim - 1) + (6,)][: 1 if "cache" in kw else 2]
    with dask.config.set(scheduler="sync"):
        for image in images(lab, chunks):
            assert_regions(tm.regionprops(image, inten, **kw), want)


def test_dask_intensity_and_extra_properties():
    rng = np.random.default_rng(4)
    lab = given_labels(rng, (14, 17, 9))
    inten = rng.integers(0, 200, lab.shape).astype(np.uint8)

    def pixelcount(mask):
        return np.sum(mask)

    def quartile(mask, image):
        return np.percentile(image[mask], 75)

    extra = (pixelcount, quartile)
    want = sk.regionprops(lab, inten, extra_properties=extra)
    with dask.config.set(scheduler="sync"):
        for image in images(lab, [(4, 5, 3)]):
            for i in (inten, da.from_array(inten, chunks=(7, 3, 5))):
                got = tm.regionprops(image, i, extra_properties=extra)
                assert_regions(got, want, extra=("pixelcount", "quartile"))


@pytest.mark.parametrize(
    "inten",
    [
        np.float32,  # numpy's mean and std of float32: float32
        np.bool_,
        np.int16,
        np.float16,  # a dtype the kernels do not take: scikit-image's own
        "channels",  # a channel axis: scikit-image's own
    ],
)
def test_intensity_types(inten):
    rng = np.random.default_rng(5)
    lab = given_labels(rng, (19, 21))
    if inten == "channels":
        image = rng.normal(100, 20, (*lab.shape, 3))
    elif inten == np.bool_:
        image = rng.random(lab.shape) < 0.5
    else:
        image = rng.normal(100, 20, lab.shape).astype(inten)
    want = sk.regionprops(lab, image)
    got = tm.regionprops(lab, image)
    names = ("intensity_mean", "intensity_min", "intensity_max", "intensity_std")
    for g, w in zip(got, want, strict=True):
        for name in names:
            a, b = g[name], w[name]
            assert type(a) is type(b) and np.shape(a) == np.shape(b), name
            np.testing.assert_allclose(a, b, rtol=1e-5 if inten == np.float32 else 1e-9)
        assert_same(g.moments_weighted, w.moments_weighted, "moments_weighted")


def test_own_properties_read_no_crop(monkeypatch):
    # one statistics pass for the whole image; its properties and those derived from them
    # never build the region's image, the crop that every other property reads
    calls = []
    measure = tm._measure
    monkeypatch.setattr(tm, "_measure", lambda *a: calls.append(1) or measure(*a))
    rng = np.random.default_rng(6)
    lab = given_labels(rng, (16, 18))
    got = tm.regionprops(lab, rng.random(lab.shape))
    assert len(calls) == 1 and len(got) > 3
    for region in got:
        for name in ("label", "slice", *regions.OWN, *regions.DERIVED):
            region[name]
        assert "image" not in region._cache
        region.solidity  # noqa: B018 - scikit-image's, from the crop
        assert "image" in region._cache
    uncached = tm.regionprops(lab, cache=False)[0]
    uncached.area, uncached.image_filled  # noqa: B018
    assert uncached._cache == {}


def test_regionprops_errors_as_scikit_image():
    lab = np.zeros((5, 6), np.int32)
    lab[1:3, 2:5] = 4

    def same_error(*args, **kw):
        with pytest.raises(Exception) as want:  # noqa: PT011 - whatever scikit-image raises
            sk.regionprops(*args, **kw)[0].centroid  # noqa: B018
        with pytest.raises(want.type) as got:
            tm.regionprops(*args, **kw)[0].centroid  # noqa: B018
        assert str(got.value) == str(want.value)

    same_error(lab[None, None])
    same_error(lab.astype(float))
    same_error(lab.astype(bool))
    same_error(lab, offset=(1, 2, 3))
    same_error(lab, spacing=(1, 2, 3))
    same_error(lab, spacing=(1, np.inf))
    same_error(lab, spacing=(1, 1j))
    same_error(lab, np.ones((5, 7)))
    region, want = tm.regionprops(lab)[0], sk.regionprops(lab)[0]
    for name in ("intensity_mean", "intensity_std", "image_intensity", "centroid_weighted"):
        with pytest.raises(AttributeError) as e:
            getattr(region, name)
        with pytest.raises(AttributeError) as f:
            getattr(want, name)
        assert str(e.value) == str(f.value)
    assert tm.regionprops(np.zeros((3, 4), int)) == []
    assert tm.regionprops(np.full((3, 4), -2)) == []
    assert isinstance(region, tm.RegionProperties)
    # scikit-image's equality, property by property (exact: these floats are exact in both)
    assert region == want and want == region and region != sk.regionprops(lab.T)[0]


def test_regionprops_table_offset():
    rng = np.random.default_rng(7)
    lab = given_labels(rng, (12, 15, 10))
    lab[lab < 0] = 0
    offset = (4, -2, 9)
    want = sk.regionprops(lab, spacing=(1, 2, 3), offset=offset)
    for image in images(lab, [(5, 4, 7)]):
        with dask.config.set(scheduler="sync"):
            got = tm.regionprops_table(image, None, ("label", "bbox", "centroid"),
                                       spacing=(1, 2, 3), offset=offset)  # fmt: skip
        np.testing.assert_array_equal(got["label"], [r.label for r in want])
        for i in range(3):
            np.testing.assert_allclose(got[f"centroid-{i}"], [r.centroid[i] for r in want])
        for i in range(6):
            np.testing.assert_array_equal(got[f"bbox-{i}"], [r.bbox[i] for r in want])
    with pytest.raises(ValueError, match="Offset should be an array-like"):
        tm.regionprops_table(lab, offset=(1, 2))


@pytest.mark.gpu
def test_cupy_regionprops():
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    import cupy as cp

    rng = np.random.default_rng(8)
    lab = given_labels(rng, (20, 21, 22))
    inten = rng.normal(100, 20, lab.shape)
    want = sk.regionprops(lab, inten, spacing=(1, 2, 3), offset=(1, 0, 2))
    for i in (inten, cp.asarray(inten)):
        got = tm.regionprops(cp.asarray(lab), i, spacing=(1, 2, 3), offset=(1, 0, 2))
        assert_regions(got, want)
