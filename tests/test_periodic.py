"""Periodic boundaries in memory (numpy; CuPy on a GPU) and through tilelabel.ndimage: exactly
cc3d's ``periodic_boundary`` where cc3d has it (4, 8 and 6 neighbours, every axis wrapped), and
an independent oracle (scipy plus explicit unions across the wrapped faces,
:func:`tests.cases.periodic_label`) for every connectivity and subset of wrapped axes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage as sp

import tilelabel
from tests.cases import periodic_label
from tests.test_ndimage import random_structure
from tilelabel import ndimage as tn
from tilelabel.connectivity import CONNECTIVITIES, structure
from tilelabel.periodic import axes, spelled
from tilelabel.synth import random_volume

cc3d = pytest.importorskip("cc3d")


@st.composite
def cases(draw, most: int = 1 << 10):
    """A random binary volume, a connectivity and a non-empty set of wrapped axes."""
    ndim = draw(st.sampled_from([2, 3]))
    side = 10 if ndim == 3 else 24
    shape = tuple(draw(st.integers(1, side)) for _ in range(ndim))
    density = draw(st.sampled_from([0.05, 0.2, 0.35, 0.5, 0.8]))
    img = random_volume(shape, density, draw(st.integers(1, 3)), draw(st.integers(0, 2**31)))
    conn = draw(st.sampled_from(CONNECTIVITIES[ndim]))
    wrap = tuple(sorted(draw(st.sets(st.integers(0, ndim - 1), min_size=1))))
    return img, conn, wrap


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_in_memory_equals_the_oracle(case):
    img, conn, wrap = case
    want, n = periodic_label(img, structure(img.ndim, conn), wrap)
    got, m = tilelabel.label(img, conn, wrap_axes=wrap, backend="cpu")
    assert m == n
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("ndim, conn", [(2, 4), (2, 8), (3, 6)])
def test_every_axis_wrapped_equals_cc3d(ndim, conn):
    rng = np.random.default_rng(conn)
    for _ in range(15):
        shape = tuple(int(s) for s in rng.integers(1, 12 if ndim == 3 else 30, ndim))
        density = float(rng.choice([0.1, 0.3, 0.5, 0.7]))
        img = random_volume(shape, density, int(rng.integers(1, 3)), int(rng.integers(2**31)))
        want = cc3d.connected_components(img, connectivity=conn, periodic_boundary=True)
        got, n = tilelabel.label(img, conn, wrap_axes=tuple(range(ndim)), backend="cpu")
        assert n == int(want.max())
        np.testing.assert_array_equal(got, want)


def test_the_box_edges_and_corners_touch_where_their_axes_wrap():
    img = np.zeros((5, 6, 7), np.uint8)
    img[0, 0, 0] = img[-1, -1, -1] = 1  # opposite corners of the box
    assert tilelabel.label(img, 26, wrap_axes=(0, 1, 2))[1] == 1
    assert tilelabel.label(img, 18, wrap_axes=(0, 1, 2))[1] == 2  # a corner is 3 hops
    assert tilelabel.label(img, 26, wrap_axes=(0, 1))[1] == 2  # x does not wrap
    img = np.zeros((5, 6, 7), np.uint8)
    img[0, 0, 3] = img[-1, -1, 3] = 1  # opposite edges along x
    assert tilelabel.label(img, 18, wrap_axes="z,y")[1] == 1
    assert tilelabel.label(img, 6, wrap_axes="z,y")[1] == 2
    img = np.zeros((4, 9), np.uint8)
    img[1, 0] = img[2, -1] = img[0, 4] = 1
    labels, n = tilelabel.label(img, 8, wrap_axes=("x",))  # a diagonal across the wrapped face
    assert n == 2 and labels[0, 4] == 1 and labels[1, 0] == labels[2, -1] == 2


def test_numbering_stays_by_first_voxel():
    # the component whose first voxel comes first is 1, wherever the wrap joins it
    img = np.zeros((3, 8), np.uint8)
    img[0, 3] = 1  # alone
    img[1, 7] = img[1, 0] = 1  # joined across x
    labels, n = tilelabel.label(img, 4, wrap_axes=(1,))
    assert n == 2 and labels[0, 3] == 1 and labels[1, 0] == labels[1, 7] == 2


def test_axes_by_index_or_name():
    assert axes(3, "z,y,x") == axes(3, ["x", "Y", "z"]) == axes(3, (2, 0, -2)) == (0, 1, 2)
    assert axes(2, "x") == axes(2, -1) == (1,) and axes(4, "z") == (1,)
    assert axes(3, None) == axes(3, ()) == ()
    assert spelled("0, z") == (0, "z")
    for bad, message in (
        ((0, 0), "given twice"),
        (("z", 0), "given twice"),
        ((3,), "out of range"),
        ((-4,), "out of range"),
        ("z", "not an axis of a 2D volume"),
        ("w", "names z, y, x"),
        ((True,), "names z, y, x"),
        (1.5, "names z, y, x"),
    ):
        with pytest.raises(ValueError, match=message):
            axes(2 if bad == "z" else 3, bad)
    with pytest.raises(ValueError, match="out of range"):
        tilelabel.label(np.ones((3, 3)), wrap_axes=(2,))


def test_statistics_and_size_filter_are_those_of_the_wrapped_labels():
    from skimage.measure import regionprops_table

    img = random_volume((14, 13, 12), 0.25, 2, seed=3)
    want, n = periodic_label(img, structure(3, 6), (0, 2))
    df = tilelabel.regionprops(img, 6, wrap_axes=(0, 2), backend="cpu")
    ref = regionprops_table(want, properties=("label", "num_pixels", "bbox", "centroid"))
    assert len(df) == n
    for col, values in ref.items():
        np.testing.assert_allclose(df[col].to_numpy(), values, rtol=1e-12, err_msg=col)
    # a component across the wrap spans both ends of its axis
    across = (df["bbox-0"] == 0) & (df["bbox-3"] == img.shape[0])
    assert across.any()
    sizes = np.bincount(want.ravel())[1:]
    keep = np.flatnonzero((sizes >= 3) & (sizes <= 40)) + 1
    filtered = np.searchsorted(keep, want) + 1
    filtered[~np.isin(want, keep)] = 0
    got, m = tilelabel.label(img, 6, wrap_axes=(0, 2), min_size=3, max_size=40, backend="cpu")
    assert m == keep.size
    np.testing.assert_array_equal(got, filtered)


@pytest.mark.parametrize("seed", range(3))
def test_ndimage_any_rank_and_structure_equals_the_oracle(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        ndim = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 7, ndim))
        x = rng.random(shape) < rng.random()
        s = random_structure(rng, ndim) if rng.random() < 0.6 else None
        wrap = tuple(a for a in range(ndim) if rng.random() < 0.6) or (ndim - 1,)
        want, n = periodic_label(x, tn.structure_of(ndim, s), wrap)
        got, m = tn.label(x, s, wrap_axes=wrap)
        assert m == n and got.dtype == np.int32
        np.testing.assert_array_equal(got, want)


def test_ndimage_dask_wraps_as_dask_image_names_it():
    import dask
    import dask.array as da

    rng = np.random.default_rng(7)
    x = rng.random((13, 11, 9)) < 0.3
    for s in (None, sp.generate_binary_structure(3, 3), random_structure(rng, 3)):
        want, n = periodic_label(x, tn.structure_of(3, s), (0, 2))
        with dask.config.set(scheduler="sync"):
            got, m = dask.compute(
                *tn.label(da.from_array(x, chunks=(5, 4, 9)), s, wrap_axes=(0, 2))
            )
        assert int(m) == n and got.dtype == np.int32
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_cupy_equals_cpu():
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    import cupy as cp

    rng = np.random.default_rng(11)
    for _ in range(12):
        ndim = int(rng.integers(2, 4))
        shape = tuple(int(s) for s in rng.integers(1, 40 if ndim == 3 else 300, ndim))
        img = random_volume(shape, float(rng.choice([0.2, 0.4, 0.6])), 1, int(rng.integers(2**31)))
        wrap = tuple(a for a in range(ndim) if rng.random() < 0.6) or (0,)
        for conn in CONNECTIVITIES[ndim]:
            want, n = tilelabel.label(img, conn, wrap_axes=wrap, backend="cpu")
            got, m = tilelabel.label(cp.asarray(img), conn, wrap_axes=wrap)
            host, k = tilelabel.label(img, conn, wrap_axes=wrap, backend="cuda")
            assert isinstance(got, cp.ndarray) and m == k == n
            np.testing.assert_array_equal(cp.asnumpy(got), want)
            np.testing.assert_array_equal(host, want)
        df = tilelabel.regionprops(cp.asarray(img), wrap_axes=wrap)
        ref = tilelabel.regionprops(img, wrap_axes=wrap, backend="cpu")
        np.testing.assert_array_equal(df["bbox-0"], ref["bbox-0"])


@pytest.mark.parametrize("ndim, conn", [(2, 4), (2, 8), (3, 6)])
def test_multilabel_every_axis_wrapped_equals_cc3d(ndim, conn):
    import dask
    import dask.array as da

    rng = np.random.default_rng(conn + 1)
    every = tuple(range(ndim))
    for _ in range(12):
        shape = tuple(int(s) for s in rng.integers(1, 10 if ndim == 3 else 24, ndim))
        img = rng.integers(0, 4, shape).astype(np.uint16)
        want = cc3d.connected_components(img, connectivity=conn, periodic_boundary=True)
        got, n = tilelabel.label(img, conn, wrap_axes=every, multilabel=True, backend="cpu")
        assert n == int(want.max())
        np.testing.assert_array_equal(got, want)
        chunks = tuple(int(rng.integers(1, s + 1)) for s in shape)
        lazy = tilelabel.label(
            da.from_array(img, chunks=chunks), conn, wrap_axes=every, multilabel=True
        )
        with dask.config.set(scheduler="sync"):
            got, n = dask.compute(*lazy)
        assert int(n) == int(want.max())
        np.testing.assert_array_equal(got, want)
