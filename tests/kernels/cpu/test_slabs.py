"""One host array labeled by several threads (:mod:`tilelabel.kernels.cpu.slabs`): equal to
the sequential kernels' labels, so to scipy's and cc3d's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

import tilelabel
from tilelabel.connectivity import structure
from tilelabel.kernels.backends import get_backend
from tilelabel.kernels.cpu import slabs

CONNS = {2: (4, 8), 3: (6, 18, 26)}


@pytest.fixture
def tiny_slabs(monkeypatch):
    """Slabs of any size, so that small arrays are cut into many."""
    monkeypatch.setattr(slabs, "MIN_SLAB", 1)


def random_values(rng, shape, classes):
    return ((rng.random(shape) < 0.5) * rng.integers(1, classes + 1, shape)).astype(np.int16)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("threads", [2, 3, 8])
def test_threads_label_as_one_pass(tiny_slabs, seed, threads):
    rng = np.random.default_rng(seed)
    be = get_backend("cpu")
    for shape in [(13, 9, 11), (40, 5, 6), (3, 17, 8), (31, 12), (7, 50)]:
        for conn in CONNS[len(shape)]:
            x = random_values(rng, shape, 3)
            for multilabel in (False, True):
                want, n = be.label(x, conn, np.uint32, None, multilabel)
                got, m = be.label(x, conn, np.uint32, None, multilabel, threads=threads)
                assert m == n and np.array_equal(got, want), (shape, conn, multilabel)
            binary, k = ndi.label(x != 0, structure(x.ndim, conn))
            got, m = be.label(x != 0, conn, np.uint32, None, False, threads=threads)
            assert m == k and np.array_equal(got, binary)


def test_a_component_that_leaves_a_slab_and_comes_back_is_one(tiny_slabs):
    # a U: two arms in slab 0 joined only at the bottom of slab 1
    x = np.zeros((6, 1, 5), np.uint8)
    x[:, 0, 0] = x[:, 0, 4] = 1
    x[5, 0, :] = 1
    x[0, 0, 2] = 1  # a third component, numbered between the arms' first voxels
    got, n = get_backend("cpu").label(x, 26, np.uint32, threads=3)
    want, m = ndi.label(x, np.ones((3, 3, 3)))
    assert (n, m) == (2, 2) and np.array_equal(got, want)


def test_more_threads_than_planes_and_one_plane(tiny_slabs):
    rng = np.random.default_rng(7)
    be = get_backend("cpu")
    for shape in [(2, 30, 30), (1, 30, 30), (1, 40)]:
        x = random_values(rng, shape, 2)
        conn = CONNS[len(shape)][-1]
        want, n = be.label(x, conn, np.uint32, None, True)
        got, m = be.label(x, conn, np.uint32, None, True, threads=16)
        assert m == n and np.array_equal(got, want)


def test_cuts_keep_slabs_large_and_below_32_bit_labels(monkeypatch):
    assert slabs._cuts((100, 10, 10), threads=8) == [0, 100]  # too small to split
    assert slabs._cuts((64, 512, 512), threads=4) == [0, 16, 32, 48, 64]
    assert slabs._cuts((5, 1024, 1024), threads=8) == [0, 1, 2, 3, 4, 5]  # a plane at least
    monkeypatch.setattr(slabs, "MAX_SLAB", 1000)
    monkeypatch.setattr(slabs, "MIN_SLAB", 1)
    assert len(slabs._cuts((40, 10, 10), threads=1)) - 1 == 4  # 4000 voxels: 4 slabs


def test_the_public_label_uses_threads_and_matches_cc3d(tiny_slabs):
    cc3d = pytest.importorskip("cc3d")
    x = random_values(np.random.default_rng(3), (24, 20, 20), 4)
    for conn in (6, 18, 26):
        got, n = tilelabel.label(x, conn, multilabel=True, backend="cpu")
        want, m = cc3d.connected_components(x, connectivity=conn, return_N=True)
        assert n == m and np.array_equal(got, want)
        got, n = tilelabel.label(x, conn, multilabel=True, backend="cpu", wrap_axes="z,y,x")
        if conn == 6:
            want, m = cc3d.connected_components(
                x, connectivity=6, return_N=True, periodic_boundary=True
            )
            assert n == m and np.array_equal(got, want)
