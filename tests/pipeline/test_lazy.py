"""The pipeline on dask arrays against scipy.ndimage.label on the whole volume, for any chunking."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage

import tilelabel
from tests.cases import diagonal, spiral
from tilelabel.connectivity import CONNECTIVITIES, structure
from tilelabel.synth import random_volume


def check(img: np.ndarray, chunks, conn: int) -> None:
    expected, n_expected = ndimage.label(img, structure(img.ndim, conn))
    labels, n = tilelabel.label(da.from_array(img, chunks=chunks), conn, backend="cpu")
    with dask.config.set(scheduler="sync"):
        got, count = dask.compute(labels, n)
    assert int(count) == n_expected
    np.testing.assert_array_equal(got, expected)


@st.composite
def volumes(draw):
    ndim = draw(st.sampled_from([2, 3]))
    shape = tuple(draw(st.integers(1, 11 if ndim == 3 else 24)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, s)) for s in shape)
    density = draw(st.sampled_from([0.05, 0.3, 0.5, 0.7, 0.95]))
    granularity = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31))
    conn = draw(st.sampled_from(CONNECTIVITIES[ndim]))
    return random_volume(shape, density, granularity, seed), chunks, conn


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volumes())
def test_any_chunking_equals_scipy(case):
    img, chunks, conn = case
    check(img, chunks, conn)


@pytest.mark.parametrize("chunk", [1, 2, 3])
@pytest.mark.parametrize("ndim", [2, 3])
def test_tiny_chunks(ndim, chunk):
    img = random_volume((7,) * ndim, 0.5, 1, seed=chunk)
    for conn in CONNECTIVITIES[ndim]:
        check(img, chunk, conn)


@pytest.mark.parametrize("ndim", [2, 3])
def test_diagonal_through_chunk_corners(ndim):
    # a line that crosses from chunk to chunk only through corners: one component under full
    # connectivity, single voxels under face connectivity
    img = diagonal((12,) * ndim)
    for conn in CONNECTIVITIES[ndim]:
        for chunks in (3, 4, 5):
            check(img, chunks, conn)
    anti = img[::-1].copy()
    for chunks in (2, 3):
        check(anti, chunks, CONNECTIVITIES[ndim][-1])


def test_spiral_across_many_chunks():
    img = spiral(61)
    for chunks in ((7, 5), (16, 16), (1, 61)):
        check(img, chunks, 4)
        check(img, chunks, 8)


def test_uneven_and_irregular_chunks():
    img = random_volume((23, 17, 19), 0.4, 2, seed=5)
    check(img, ((5, 10, 8), (17,), (1, 2, 16)), 26)
    check(img, ((23,), (4, 4, 9), (19,)), 6)


def test_components_spanning_every_chunk():
    img = np.ones((9, 10, 11), np.uint8)
    img[4] = 0
    check(img, 3, 26)
    check(np.ones((9, 10, 11), np.uint8), 2, 6)


def test_empty_volume():
    check(np.zeros((8, 9, 10), np.uint8), 4, 26)


def test_numpy_and_dask_inputs_agree_and_keep_dtype():
    img = random_volume((20, 30), 0.5, 1, seed=2)
    np_labels, n = tilelabel.label(img, backend="cpu")
    assert isinstance(np_labels, np.ndarray) and np_labels.dtype == np.uint32
    labels, count = tilelabel.label(da.from_array(img, chunks=7), backend="cpu")
    assert labels.dtype == np.uint32
    np.testing.assert_array_equal(labels.compute(scheduler="sync"), np_labels)
    assert int(count.compute()) == n
    labels64, _ = tilelabel.label(img, backend="cpu", dtype="uint64")
    assert labels64.dtype == np.uint64


def test_float_and_bool_inputs():
    rng = np.random.default_rng(0)
    f = rng.normal(size=(15, 16)) * (rng.random((15, 16)) < 0.4)
    check(f, 4, 8)
    check(f != 0, 5, 4)


def test_nan_is_refused():
    f = np.zeros((6, 6), np.float32)
    f[3, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        tilelabel.label(f, backend="cpu")
    labels, _ = tilelabel.label(da.from_array(f, chunks=3), backend="cpu")
    with pytest.raises(ValueError, match="NaN"):
        labels.compute(scheduler="sync")


@pytest.mark.parametrize(
    "arr, match",
    [
        (np.zeros(5), "2D and 3D"),
        (np.zeros((2, 2, 2, 2)), "2D and 3D"),
        (np.zeros((0, 4)), "zero-size"),
        (np.array([["a", "b"], ["c", "d"]]), "not numeric"),
    ],
)
def test_bad_arrays(arr, match):
    with pytest.raises(ValueError, match=match):
        tilelabel.label(arr)


def test_connectivity_and_structure_arguments():
    img = random_volume((9, 9, 9), 0.4, 1, seed=1)
    ref = ndimage.label(img)[0]  # scipy's default: face connectivity
    np.testing.assert_array_equal(tilelabel.label(img, 1, backend="cpu")[0], ref)
    np.testing.assert_array_equal(tilelabel.label(img, 6, backend="cpu")[0], ref)
    s = ndimage.generate_binary_structure(3, 1)
    np.testing.assert_array_equal(tilelabel.label(img, structure=s, backend="cpu")[0], ref)
    full = ndimage.label(img, np.ones((3, 3, 3)))[0]
    np.testing.assert_array_equal(tilelabel.label(img, backend="cpu")[0], full)
    with pytest.raises(ValueError, match="not valid for a 3D array"):
        tilelabel.label(img, 8)
    with pytest.raises(ValueError, match="standard structuring elements"):
        tilelabel.label(img, structure=np.eye(3, dtype=bool)[None].repeat(3, 0))
    with pytest.raises(ValueError, match="disagree"):
        tilelabel.label(img, 26, structure=s)
