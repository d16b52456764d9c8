"""The CUDA stats kernel against the CPU kernel and scikit-image (on a GPU; skipped without one).

Counts, boxes and coordinate sums must be equal exactly; intensity sums (added in another order)
to float tolerance, intensity min and max exactly.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage

import tilelabel
from tests.cases import families
from tests.kernels.cpu.test_stats import any_labels, brute_stats, check, with_nans
from tilelabel.kernels.backends import cuda_available
from tilelabel.kernels.cpu.stats import label_stats
from tilelabel.synth import random_volume

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
]


def gpu_stats(labels, n, offset=None, intensity=None, moments=False):
    import cupy as cp

    from tilelabel.kernels.cuda.stats import label_stats_device

    return label_stats_device(cp.asarray(labels), n, offset, intensity, moments)


def same(got, want):
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k].shape == v.shape and got[k].dtype == v.dtype, k
        if k in ("isum", "isq"):
            np.testing.assert_allclose(got[k], v, rtol=1e-12, atol=1e-9, err_msg=k)
        else:
            np.testing.assert_array_equal(got[k], v, err_msg=k)


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_case_families_equal_cpu(ndim, dtype):
    for _, img in families(ndim, size=37 if ndim == 2 else 29):
        labels, n = ndimage.label(img, np.ones((3,) * ndim))
        labels = labels.astype(dtype)
        intensity = np.random.default_rng(n).normal(0, 10, img.shape)
        same(gpu_stats(labels, n), label_stats(labels, n))
        same(gpu_stats(labels, n, None, intensity), label_stats(labels, n, None, intensity))
        # second moments: exact sums of coordinate products, made global as on the CPU
        off = (7, 11, 300)[-ndim:]
        same(
            gpu_stats(labels, n, off, intensity, moments=True),
            label_stats(labels, n, off, intensity, moments=True),
        )
        same(gpu_stats(labels, n, None, None, True), label_stats(labels, n, None, None, True))


@pytest.mark.parametrize(
    "idtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64, np.float32, np.bool_]
)
def test_intensity_dtypes_against_regionprops(idtype):
    img = random_volume((21, 45, 70), 0.3, 1, seed=3)
    labels, n = ndimage.label(img)
    rng = np.random.default_rng(1)
    raw = (
        rng.normal(0, 40, img.shape)
        if np.dtype(idtype).kind == "f"
        else rng.integers(-9, 99, img.shape)
    )
    intensity = (raw > 0) if idtype is np.bool_ else raw.astype(idtype)
    got = gpu_stats(labels.astype(np.uint32), n, (3, 2**32, 5), intensity)
    check(got, labels, (3, 2**32, 5), intensity)
    same(got, label_stats(labels.astype(np.uint32), n, (3, 2**32, 5), intensity))


@pytest.mark.parametrize(
    "shape", [(1, 1), (7, 1), (1, 200), (3, 64, 64), (2, 5, 1000), (64, 33, 95)]
)
def test_big_components_and_row_shapes(shape):
    # filled volumes and long rows exercise the per-warp pending component
    for img in (np.ones(shape, np.uint8), random_volume(shape, 0.8, 4, seed=1)):
        labels, n = ndimage.label(img, np.ones((3,) * len(shape)))
        intensity = np.arange(img.size, dtype=np.float64).reshape(shape) % 13
        same(gpu_stats(labels, n, None, intensity), label_stats(labels, n, None, intensity))
        same(
            gpu_stats(labels, n, None, intensity, moments=True),
            label_stats(labels, n, None, intensity, moments=True),
        )


def test_backend_and_pipeline_on_gpu():
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    img = random_volume((40, 44, 48), 0.15, 1, seed=2)
    intensity = np.random.default_rng(0).integers(0, 255, img.shape).astype(np.uint8)
    labels, n = ndimage.label(img, np.ones((3, 3, 3)))
    cpu = tilelabel.regionprops(img, intensity=intensity, backend="cpu", min_size=2)
    gpu = tilelabel.regionprops(img, intensity=intensity, backend="cuda", min_size=2)
    import cupy as cp

    gpu_cp = tilelabel.regionprops(cp.asarray(img), intensity=cp.asarray(intensity), min_size=2)
    with dask.config.set(scheduler="sync"):
        lazy = tilelabel.regionprops(
            da.from_array(img, chunks=(16, 20, 24)), intensity=intensity, backend="cuda", min_size=2
        )
        lab, m = tilelabel.label(
            da.from_array(img, chunks=(16, 20, 24)), backend="cuda", min_size=2
        )
        lab, m = dask.compute(lab, m)
    for df in (gpu, gpu_cp, lazy):
        assert list(df.columns) == list(cpu.columns) and len(df) == len(cpu) == int(m)
        for c in cpu.columns:
            if c.startswith(("intensity_sum", "intensity_mean", "intensity_std", "centroid")):
                np.testing.assert_allclose(df[c], cpu[c], rtol=1e-12)
            else:
                np.testing.assert_array_equal(df[c], cpu[c])
    ref, _ = tilelabel.label(img, backend="cpu", min_size=2)
    np.testing.assert_array_equal(lab, ref)
    got, k = tilelabel.label(cp.asarray(img), min_size=2)
    assert isinstance(got, cp.ndarray) and k == int(m)
    np.testing.assert_array_equal(cp.asnumpy(got), ref)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([2, 3]),
    st.integers(1, 70),
    st.sampled_from([0.1, 0.5, 0.9]),
    st.integers(1, 4),
    st.integers(0, 2**31),
)
def test_random_equal_cpu(ndim, size, density, granularity, seed):
    shape = (size, size + 3) if ndim == 2 else (max(1, size // 8), size // 2 + 1, size + 3)
    img = random_volume(shape, density, granularity, seed)
    labels, n = ndimage.label(img)
    intensity = np.random.default_rng(seed).integers(0, 9, shape).astype(np.int16)
    same(gpu_stats(labels, n, None, intensity), label_stats(labels, n, None, intensity))


@pytest.mark.parametrize("seed", range(2))
def test_nan_intensity_min_max_equal_cpu(seed):
    # a NaN among a label's values makes its min and max NaN (np.min / np.max, the CPU kernel):
    # in a warp's runs, in the pending component and through the encoded atomics alike; +inf
    # and -inf without NaN: min -inf, max +inf
    rng = np.random.default_rng(seed)
    for _ in range(30):
        lab, n = any_labels(rng, longest=200)
        for dt in (np.float32, np.float64):
            v = with_nans(rng, lab, n, dt)
            with np.errstate(invalid="ignore"):
                want = brute_stats(lab, n, v)
            for dtype in (np.uint32, np.uint64):
                got = gpu_stats(lab.astype(dtype), n, None, v)
                same(got, label_stats(lab.astype(dtype), n, None, v))
                for key in ("imin", "imax"):
                    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    # big components: whole rows of one label, one NaN in a row pending across warps' chunks
    for shape in ((3, 64, 64), (2, 5, 1000), (64, 33, 95)):
        for img in (np.ones(shape, np.uint8), random_volume(shape, 0.8, 4, seed=1)):
            labels, n = ndimage.label(img, np.ones((3,) * len(shape)))
            intensity = np.arange(img.size, dtype=np.float64).reshape(shape) % 13
            flat = intensity.reshape(-1)
            flat[rng.choice(np.flatnonzero(labels), 3, replace=False)] = np.nan
            flat[labels.reshape(-1) == 0] = np.nan
            got = gpu_stats(labels, n, None, intensity, moments=True)
            same(got, label_stats(labels, n, None, intensity, moments=True))
            with np.errstate(invalid="ignore"):
                check(got, labels, None, intensity)
