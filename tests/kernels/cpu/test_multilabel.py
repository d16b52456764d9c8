"""The multi-label CPU kernel against cc3d.connected_components, exactly."""

from __future__ import annotations

import cc3d
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilelabel.kernels.cpu import algorithms as cpu
from tilelabel.kernels.registry import MULTILABEL_DEFAULTS, algorithms, get_kernel
from tilelabel.synth import voronoi_labels

CONNECTIVITIES = [(2, 4), (2, 8), (3, 6), (3, 18), (3, 26)]
DTYPES = [np.bool_, np.uint8, np.int8, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def multilabel_volume(shape, classes: int, grain: int, dtype, seed: int) -> np.ndarray:
    """Values 0..classes in blocks of ``grain`` voxels, signed dtypes also negative, uint64 past
    2^63: equal values are what make one class, whatever their bits."""
    rng = np.random.default_rng(seed)
    cells = tuple(-(-s // grain) for s in shape)
    small = rng.integers(0, classes + 1, cells)
    vol = small
    for axis in range(len(shape)):
        vol = np.repeat(vol, grain, axis=axis)
    vol = vol[tuple(slice(0, s) for s in shape)]
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return vol != 0
    if dtype.kind == "i":
        return np.where(vol % 2 == 1, -vol, vol).astype(dtype)
    if dtype == np.uint64:
        return np.where(vol > 0, vol.astype(np.uint64) + np.uint64(2**63), 0).astype(dtype)
    return vol.astype(dtype)


def oracle(img: np.ndarray, conn: int) -> tuple[np.ndarray, int]:
    """cc3d's labels and count; values are renumbered first (the same classes), as cc3d
    overflows on some uint64 values past 2^63."""
    classes = np.unique(img, return_inverse=True)[1].reshape(img.shape) + 1
    classes[img == 0] = 0
    return cc3d.connected_components(classes, connectivity=conn, return_N=True)


def check(img: np.ndarray, conn: int, dtype=np.uint32) -> None:
    labels, n = get_kernel("cpu", img.ndim, conn, multilabel=True)(img, np.dtype(dtype))
    ref, rn = oracle(img, conn)
    assert labels.dtype == dtype and n == rn
    np.testing.assert_array_equal(labels, ref)


def test_registered_for_every_connectivity():
    for nd, conn in CONNECTIVITIES:
        assert algorithms("cpu", nd, conn, multilabel=True) == [MULTILABEL_DEFAULTS["cpu"]]
    with pytest.raises(ValueError, match="multi-label kernel 'buf'"):
        get_kernel("cpu", 3, 26, "buf", multilabel=True)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_volumes_equal_cc3d(nd, conn, data):
    shape = tuple(data.draw(st.integers(1, 14 if nd == 3 else 40)) for _ in range(nd))
    classes = data.draw(st.integers(1, 5))
    grain = data.draw(st.integers(1, 3))
    dtype = data.draw(st.sampled_from(DTYPES))
    check(multilabel_volume(shape, classes, grain, dtype, data.draw(st.integers(0, 99))), conn)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
def test_voronoi_field_equals_cc3d(nd, conn):
    shape = (40, 45, 50) if nd == 3 else (300, 280)
    check(voronoi_labels(shape, cell=6, ids=40, seed=nd), conn, np.uint64)


@pytest.mark.parametrize("conn", [6, 18, 26])
@pytest.mark.parametrize("width", [1, 7, 8, 9, 61])
def test_specks_on_a_field_equal_cc3d(conn, width):
    """Single voxels of random values over a coarse field: runs that lie on one run of their
    value below, on several split by a speck, or beside one shifted by a voxel (26's covered
    rule and its gaps), in rows of every width modulo 8."""
    shape = (23, 19, width)
    rng = np.random.default_rng(width)
    img = voronoi_labels(shape, cell=5, ids=6, seed=width).astype(np.uint16)
    at = rng.random(shape) < 0.05
    img[at] = rng.integers(0, 7, int(at.sum()))
    check(img, conn)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
@pytest.mark.parametrize("value", [np.uint8(200), np.int8(-3), np.uint64(2**63 + 5)])
def test_blocks_of_one_value(nd, conn, value):
    """A block whose nonzero voxels hold one value is labeled by the binary kernel: the same
    labels as the run-based multi-label scan, with the background empty, full and random."""
    shape = (9, 10, 11) if nd == 3 else (30, 27)
    rng = np.random.default_rng(conn)
    u32 = np.dtype(np.uint32)
    for mask in (np.zeros(shape, bool), np.ones(shape, bool), rng.random(shape) < 0.4):
        img = np.where(mask, value, 0).astype(value.dtype)
        check(img, conn)
        labels, n = get_kernel("cpu", nd, conn, multilabel=True)(img, u32)
        scan, m = cpu._run(img, u32, nd, cpu._ml_into(nd, conn), multilabel=True)
        assert n == m
        np.testing.assert_array_equal(labels, scan)


def test_every_voxel_its_own_component():
    """A checkerboard of distinct values: one component per voxel (the label bound)."""
    img = np.arange(1, 6 * 7 * 8 + 1, dtype=np.int64).reshape(6, 7, 8)
    check(img, 26)


def test_float_input_refused():
    with pytest.raises(ValueError, match="integer or bool"):
        get_kernel("cpu", 2, 8, multilabel=True)(np.ones((3, 3), np.float32), np.dtype(np.uint32))
