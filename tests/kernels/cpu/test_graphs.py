"""The voxel connectivity graph kernels against cc3d, exactly: bits, dtypes, numbering, counts,
shapes and errors."""

from __future__ import annotations

import cc3d
import numpy as np
import pytest

from tilelabel.kernels.cpu.graphs import color_connectivity_graph, voxel_connectivity_graph

SHAPES = {
    1: [(1,), (2,), (17,)],
    2: [(1, 1), (1, 9), (9, 1), (2, 2), (13, 17), (32, 3)],
    3: [(1, 1, 1), (1, 5, 7), (6, 1, 5), (5, 7, 1), (1, 1, 9), (9, 8, 7), (2, 17, 3), (33, 5, 4)],
}
VCG_CONNECTIVITIES = {1: [6, 18, 26], 2: [4, 8, 6, 18, 26], 3: [6, 18, 26]}
CCG_CONNECTIVITIES = {2: [4, 8, 6, 26], 3: [6, 26]}
DTYPES = [np.uint8, np.uint32, np.int64, np.bool_]


def layouts(a: np.ndarray) -> list[np.ndarray]:
    """``a`` in C order, Fortran order and as a strided view (the same values)."""
    out = [np.ascontiguousarray(a), np.asfortranarray(a)]
    if a.ndim > 1:
        big = np.zeros(tuple(2 * s for s in a.shape), a.dtype)
        view = big[(slice(None, None, 2),) * a.ndim]
        view[...] = a
        out.append(view)
    return out


def image(rng, shape, values: int, dtype) -> np.ndarray:
    """Random values 0..values-1 (signed dtypes negative too, int64 also past 2^32)."""
    a = rng.integers(0, values, shape)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return a % 2 == 1
    if dtype.kind == "i":
        return np.where(a % 2 == 1, -a * 2**33, a).astype(dtype)
    return a.astype(dtype)


def bit_field(rng, shape, dtype, density: float) -> np.ndarray:
    """Random bits, each set with probability ``density`` (all 8 or 32 of them)."""
    nbits = np.dtype(dtype).itemsize * 8
    bits = rng.random((*shape, nbits)) < density
    return (bits * (np.uint64(1) << np.arange(nbits, dtype=np.uint64))).sum(-1).astype(dtype)


def check_vcg(img: np.ndarray, conn: int) -> None:
    want = cc3d.voxel_connectivity_graph(img, conn)
    got = voxel_connectivity_graph(img, conn)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if img.ndim > 1 and img.flags.f_contiguous and not img.flags.c_contiguous:
        assert got.flags.f_contiguous  # the input's memory order
    elif img.flags.c_contiguous:
        assert got.flags.c_contiguous


def check_ccg(vcg: np.ndarray, conn: int) -> None:
    want, n_want = cc3d.color_connectivity_graph(vcg, conn, return_N=True)
    got, n = color_connectivity_graph(vcg, conn)
    assert n == n_want
    assert got.dtype == want.dtype == np.uint32 and got.shape == want.shape
    assert got.flags.f_contiguous
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_voxel_connectivity_graph(ndim, dtype):
    rng = np.random.default_rng(ndim * 10 + DTYPES.index(dtype))
    for conn in VCG_CONNECTIVITIES[ndim]:
        for shape in SHAPES[ndim]:
            for values in (2, 3, 1000):
                for img in layouts(image(rng, shape, values, dtype)):
                    check_vcg(img, conn)


def test_voxel_connectivity_graph_borders_and_background():
    """Uniform images: every bit of the connectivity set, borders included; the background is
    connected like any value."""
    for conn, full in [(4, 0x0F), (8, 0xFF), (6, 0x3F), (18, 0x3FFFF), (26, 0x3FFFFFF)]:
        ndim = 2 if conn in (4, 8) else 3
        for value in (0, 7):
            img = np.full((3,) * ndim, value, np.uint8)
            assert (voxel_connectivity_graph(img, conn) == full).all()
            check_vcg(img, conn)
    img = np.zeros((4, 5, 6), np.uint16)
    img[1:3, 2:4, 1:5] = 3
    for conn in (6, 18, 26):
        check_vcg(img, conn)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ndim", [2, 3])
def test_color_connectivity_graph_random_bits(ndim, dtype):
    """Arbitrary (directed, asymmetric) bit fields: only the later voxel's bits count."""
    rng = np.random.default_rng(ndim * 7 + (dtype == np.uint32))
    for conn in CCG_CONNECTIVITIES[ndim]:
        for shape in SHAPES[ndim]:
            if ndim == 3 and conn == 26 and dtype == np.uint8 and shape[2] > 1:
                continue  # cc3d refuses it (tested below)
            for density in (0.1, 0.5, 0.9):
                for vcg in layouts(bit_field(rng, shape, dtype, density)):
                    check_ccg(vcg, conn)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ndim", [2, 3])
def test_round_trip(ndim, dtype):
    """image -> vcg -> ccg: cc3d's coloring of cc3d's graph, and cc3d's connected components
    of the image with every value (0 too) made a nonzero class, numbered in Fortran order."""
    rng = np.random.default_rng(100 + ndim * 10 + DTYPES.index(dtype))
    pairs = [(4, 4, 4), (8, 8, 8), (6, 6, 4), (26, 26, 8)] if ndim == 2 else []
    pairs += [(6, 6, 6), (18, 26, 18), (26, 26, 26)] if ndim == 3 else []
    for vcg_conn, ccg_conn, cc_conn in pairs:
        for shape in SHAPES[ndim] + ([(40, 37)] if ndim == 2 else [(24, 21, 19)]):
            for values in (2, 4, 1000):
                img = image(rng, shape, values, dtype)
                vcg = voxel_connectivity_graph(img, vcg_conn)
                check_ccg(vcg, ccg_conn)
                check_ccg(cc3d.voxel_connectivity_graph(img, vcg_conn), ccg_conn)
                labels, n = color_connectivity_graph(vcg, ccg_conn)
                classes = np.unique(img, return_inverse=True)[1].reshape(shape) + 1
                want, n_want = cc3d.connected_components(
                    np.asfortranarray(classes.astype(np.uint32)),
                    connectivity=cc_conn,
                    return_N=True,
                )
                assert n == n_want
                np.testing.assert_array_equal(labels, want)


def test_color_connectivity_graph_larger():
    """Long rows and many unions (noise near percolation, uniform blocks), both memory orders."""
    rng = np.random.default_rng(5)
    noise = rng.integers(0, 3, (37, 64, 70)).astype(np.uint8)
    blocks = np.kron(rng.integers(0, 5, (6, 9, 10)), np.ones((7, 7, 7), np.int64))
    for img in (noise, blocks):
        for conn in (6, 18, 26):
            vcg = cc3d.voxel_connectivity_graph(img, conn)
            check_vcg(img, conn)
            for v in layouts(vcg)[:2]:
                check_ccg(v, 26 if conn == 18 else conn)


def test_empty():
    for shape, conn in [((0,), 26), ((0, 3), 4), ((0, 3), 18), ((3, 0, 2), 6)]:
        for dtype in (np.uint8, np.float32):
            check_vcg(np.zeros(shape, dtype), conn)
    for shape, conn, dtype in [((0, 3), 4, np.uint8), ((3, 0, 2), 26, np.uint8)]:
        vcg = np.zeros(shape, dtype)
        got, n = color_connectivity_graph(vcg, conn)
        want = cc3d.color_connectivity_graph(vcg, conn, return_N=True)  # the array alone
        assert n == 0 and got.shape == want.shape and got.dtype == want.dtype


def raises_like(ours, theirs) -> None:
    """Ours raises cc3d's message (a ValueError where cc3d raises its DimensionError)."""
    with pytest.raises(Exception) as want:
        theirs()
    expected = ValueError if isinstance(want.value, cc3d.DimensionError) else type(want.value)
    with pytest.raises(expected) as got:
        ours()
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize(
    "shape,conn,dtype",
    [
        ((), 26, np.uint8),
        ((2, 2, 2, 2), 26, np.uint8),
        ((5,), 4, np.uint8),
        ((5,), 8, np.uint8),
        ((3, 3), 5, np.uint8),
        ((3, 3), 0, np.uint8),
        ((3, 3, 3), 4, np.uint8),
        ((3, 3, 3), 8, np.uint8),
        ((3, 3), 4, np.float32),
        ((3, 3, 3), 26, np.float64),
        ((3, 3), 5, np.float32),
    ],
)
def test_voxel_connectivity_graph_errors(shape, conn, dtype):
    img = np.zeros(shape, dtype)
    raises_like(
        lambda: voxel_connectivity_graph(img, conn),
        lambda: cc3d.voxel_connectivity_graph(img, conn),
    )


@pytest.mark.parametrize(
    "shape,conn,dtype",
    [
        ((), 26, np.uint32),
        ((5,), 6, np.uint32),
        ((2, 2, 2, 2), 26, np.uint32),
        ((3, 3), 18, np.uint32),
        ((3, 3), 5, np.uint8),
        ((3, 3, 3), 4, np.uint32),
        ((3, 3, 1), 8, np.uint32),
        ((3, 3, 3), 18, np.uint32),
        ((3, 3), 4, np.int8),
        ((3, 3, 3), 6, np.uint16),
        ((3, 3), 8, np.bool_),
        ((3, 3, 3), 26, np.uint8),
        ((1, 3, 3), 26, np.uint8),
        ((0, 3), 4, np.int32),
    ],
)
def test_color_connectivity_graph_errors(shape, conn, dtype):
    vcg = np.zeros(shape, dtype)
    raises_like(
        lambda: color_connectivity_graph(vcg, conn),
        lambda: cc3d.color_connectivity_graph(vcg, conn),
    )
