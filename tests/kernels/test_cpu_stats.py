"""The CPU stats kernel against scikit-image's regionprops_table on whole arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage
from skimage.measure import regionprops_table

from tests.cases import families
from tilelabel.kernels.backends import get_backend
from tilelabel.kernels.cpu_stats import label_stats
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
