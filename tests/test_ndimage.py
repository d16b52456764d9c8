"""tilelabel.ndimage.label against scipy.ndimage.label and dask_image.ndmeasure.label: the same
labels, count and dtype for any rank, structure and output (scipy's own tests run against it in
tests/peers)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from scipy import ndimage as sp

from tilelabel import ndimage as tn


def random_structure(rng, ndim):
    s = rng.random((3,) * ndim) < 0.5
    s |= s[(slice(None, None, -1),) * ndim]
    s[(1,) * ndim] = True
    return s


@pytest.mark.parametrize("seed", range(4))
def test_any_rank_and_structure_equals_scipy(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        ndim = int(rng.integers(0, 6))
        shape = tuple(int(s) for s in rng.integers(0 if rng.random() < 0.1 else 1, 7, ndim))
        x = rng.random(shape) < rng.random()
        choices = [None] + ([sp.generate_binary_structure(ndim, ndim)] if ndim else [])
        if ndim:
            choices.append(random_structure(rng, ndim))
        s = choices[int(rng.integers(len(choices)))]
        want, n = sp.label(x, s)
        got, m = tn.label(x, s)
        assert m == n and got.dtype == want.dtype == np.int32
        np.testing.assert_array_equal(got, want)


def test_defaults_dtypes_and_output():
    # scipy's default structure is the cross: two diagonal voxels are two features
    assert tn.label([[1, 0], [0, 1]])[1] == 2
    x = np.array([[1, 0, 2], [0, 0, 3], [4, 0, 0]], np.float32)
    for dtype in (np.int8, np.uint16, np.int64, np.float32):
        got, n = tn.label(x, output=dtype)
        assert got.dtype == dtype and n == 3
    out = np.zeros(x.shape, np.int16)
    assert tn.label(x, output=out) == 3
    np.testing.assert_array_equal(out, sp.label(x)[0])
    x = x.astype(np.int32)
    assert tn.label(x, output=x) == 3  # in place
    np.testing.assert_array_equal(x, sp.label(x)[0])
    with pytest.raises(ValueError, match="output shape"):
        tn.label(x, output=np.zeros((2, 2), np.int32))
    with pytest.raises(RuntimeError, match="insufficient bit-depth"):
        tn.label(np.arange(600) % 2, output=np.int8)
    with pytest.raises(RuntimeError, match="equal rank"):
        tn.label(x, np.ones((3, 3, 3)))
    with pytest.raises(TypeError, match="Complex"):
        tn.label(np.ones(3, complex))
    assert tn.label(np.ones(()))[1] == 1 and tn.label(np.zeros((0, 4)))[1] == 0


@pytest.mark.parametrize(
    "prob, shape, chunks, connectivity",
    [
        (0.4, (15, 16), (15, 16), 1),
        (0.4, (15, 16), (4, 5), 1),
        (0.4, (15, 16), (4, 5), 2),
        (0.4, (15, 16), (8, 5), 2),
        (0.3, (10, 8, 6), (5, 4, 3), 1),
        (0.3, (10, 8, 6), (5, 4, 3), 2),
        (0.3, (10, 8, 6), (5, 4, 3), 3),
        (0.3, (4, 5, 6, 3), (2, 3, 3, 2), 2),
        (0.5, (40,), (7,), 1),
    ],
)
def test_dask_like_dask_image(prob, shape, chunks, connectivity):
    """dask-image's label contract: lazy labels of scipy's dtype and shape and a lazy count; the
    labels here are scipy's exactly (dask-image's are only an equivalent labeling)."""
    di = pytest.importorskip("dask_image.ndmeasure")
    x = np.random.default_rng(42).random(shape) < prob
    d = da.from_array(x, chunks=chunks)
    s = sp.generate_binary_structure(x.ndim, connectivity)
    want, n = sp.label(x, s)
    with dask.config.set(scheduler="sync"):
        got, m = tn.label(d, s)
        theirs, k = di.label(d, s)
        assert got.dtype == theirs.dtype == want.dtype and got.shape == want.shape
        assert got.chunks == d.chunks
        got, m, theirs, k = dask.compute(got, m, theirs, k)
    assert int(m) == int(k) == n
    np.testing.assert_array_equal(got, want)
    # dask-image's labels are the same partition
    pairs = np.unique(np.stack([got.ravel(), theirs.ravel()]), axis=1)
    assert pairs.shape[1] == n + 1


@pytest.mark.parametrize(
    "shape, chunks, connectivity, wrap",
    [
        ((15, 16), (4, 5), 1, (0,)),
        ((15, 16), (8, 5), 2, (0, 1)),
        ((10, 8, 6), (5, 4, 3), 1, (1,)),
        ((10, 8, 6), (5, 4, 3), 3, (0, 2)),
    ],
)
def test_wrap_axes_like_dask_image(shape, chunks, connectivity, wrap):
    """dask-image's ``wrap_axes``: the same components and count (dask-image's numbering is
    only an equivalent one)."""
    di = pytest.importorskip("dask_image.ndmeasure")
    x = np.random.default_rng(7).random(shape) < 0.4
    d = da.from_array(x, chunks=chunks)
    s = sp.generate_binary_structure(x.ndim, connectivity)
    with dask.config.set(scheduler="sync"):
        got, m = dask.compute(*tn.label(d, s, wrap_axes=wrap))
        theirs, k = dask.compute(*di.label(d, s, wrap_axes=wrap))
    assert int(m) == int(k)
    pairs = np.unique(np.stack([got.ravel(), theirs.ravel()]), axis=1)
    assert pairs.shape[1] == int(m) + 1
    np.testing.assert_array_equal(tn.label(x, s, wrap_axes=wrap)[0], got)


@pytest.mark.gpu
def test_cupy_in_cupy_out():
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    import cupy as cp

    rng = np.random.default_rng(1)
    for shape, s in (((30, 31), None), ((9, 10, 11), np.ones((3, 3, 3))), ((5, 6, 7, 4), None)):
        x = rng.random(shape) < 0.4
        got, n = tn.label(cp.asarray(x), s)
        want, m = sp.label(x, s)
        assert isinstance(got, cp.ndarray) and got.dtype == np.int32 and n == m
        np.testing.assert_array_equal(cp.asnumpy(got), want)
