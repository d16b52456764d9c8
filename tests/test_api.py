"""The in-memory entry point: the array type that comes back is the one that went in."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

import tilelabel
from tilelabel.kernels.backends import cuda_available

needs_gpu = pytest.mark.skipif(not cuda_available(), reason="needs a usable GPU")


def _volume():
    rng = np.random.default_rng(7)
    return rng.random((20, 30, 40)) < 0.3


def _scipy(img):
    return ndimage.label(img, structure=np.ones((3, 3, 3)))


@pytest.mark.parametrize(
    "backend", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, needs_gpu])]
)
@pytest.mark.parametrize("min_size", [None, 3])
def test_numpy_in_numpy_out(backend, min_size):
    img = _volume()
    labels, n = tilelabel.label(img, backend=backend, min_size=min_size)
    assert type(labels) is np.ndarray
    kept = img
    if min_size:
        ref, _ = _scipy(img)
        kept = np.isin(ref, np.flatnonzero(np.bincount(ref.ravel()) >= min_size)) & img
    ref, ref_n = _scipy(kept)
    assert n == ref_n
    np.testing.assert_array_equal(labels, ref)


@pytest.mark.gpu
@needs_gpu
def test_cupy_in_cupy_out():
    import cupy as cp

    img = _volume()
    labels, n = tilelabel.label(cp.asarray(img))
    assert isinstance(labels, cp.ndarray)
    ref, ref_n = _scipy(img)
    assert n == ref_n
    np.testing.assert_array_equal(cp.asnumpy(labels), ref)


def test_dask_in_lazy_out_and_a_count_that_int_takes():
    import dask.array as da

    img = _volume()
    labels, n = tilelabel.label(da.from_array(img, chunks=(7, 11, 13)))
    assert isinstance(labels, da.Array) and isinstance(n, da.Array)
    ref, ref_n = _scipy(img)
    assert int(n) == ref_n and n.compute().dtype == np.int64
    np.testing.assert_array_equal(labels.compute(), ref)
