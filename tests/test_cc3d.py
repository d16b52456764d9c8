"""``tilelabel.cc3d`` against cc3d itself on random images: labels, counts, dtypes and memory
order of ``connected_components``, ``dust``, ``largest_k``, ``statistics`` and ``each``.

Binary labels (``binary_image``, bool input) are compared with scipy's: cc3d 4.1.1 splits
components of some 2D binary images, labels background in others and fails on some
(``test_cc3d_s_own_binary_labels_differ_from_scipy_s`` shows two).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

import tilelabel.cc3d as mine
from tests.kernels.test_backends import BACKENDS

cc3d = pytest.importorskip("cc3d")

DTYPES = [np.uint8, np.int16, np.uint32, np.int64, np.float32, np.bool_]


def random_image(rng, ndims=(1, 2, 3), dtypes=DTYPES, values=4):
    """A small random image of a few values, in C or Fortran order, and a connectivity cc3d
    takes for it."""
    nd = int(rng.choice(ndims))
    shape = tuple(int(s) for s in rng.integers(1, 12, nd))
    x = rng.integers(0, values, shape).astype(rng.choice(dtypes))
    if rng.random() < 0.3:
        x = np.asfortranarray(x)
    conn = int(rng.choice((4, 8, 6, 18, 26) if nd == 2 else (6, 18, 26)))
    return x, conn


def fortran(x: np.ndarray) -> bool:
    return x.ndim > 1 and x.flags.f_contiguous and not x.flags.c_contiguous


def scipy_labels(x: np.ndarray, conn: int) -> tuple[np.ndarray, int]:
    """scipy's binary labels of ``x`` in cc3d's numbering: Fortran order for a Fortran array,
    a 1D array as a row of a 3D one, a 2D one's 6 as 4 and 18 / 26 as 8."""
    work = x.reshape(1, 1, -1) if x.ndim == 1 else (x.T if fortran(x) else x)
    if work.ndim == 2:
        conn = 4 if conn in (4, 6) else 8
    rank = {4: 1, 8: 2, 6: 1, 18: 2, 26: 3}[conn]
    ref, n = ndimage.label(work != 0, ndimage.generate_binary_structure(work.ndim, rank))
    return (ref.T if fortran(x) else ref).reshape(x.shape), n


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.flags.f_contiguous == want.flags.f_contiguous
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(4))
def test_connected_components_as_cc3d(seed):
    # multi-label (floats too), binary, 1D to 3D, C and Fortran order, every connectivity
    rng = np.random.default_rng(seed)
    for _ in range(100):
        x, conn = random_image(rng)
        binary = bool(rng.random() < 0.3)
        got, n = mine.connected_components(x, connectivity=conn, return_N=True, binary_image=binary)
        if binary or x.dtype == np.bool_:  # small images: uint16
            ref, n_want = scipy_labels(x, conn)
            want = np.asarray(ref, np.uint16, order="F" if fortran(x) else "C")
        else:
            want, n_want = cc3d.connected_components(x, connectivity=conn, return_N=True)
        assert n == n_want
        same(got, want)


def test_cc3d_s_own_binary_labels_differ_from_scipy_s():
    # why binary labels are compared with scipy's: cc3d 4.1.1 splits this one component of
    # a 2D binary image at connectivity 4, and labels a background pixel of a bool row at 8
    x = np.array([[3, 1], [3, 3]], np.int16)
    assert cc3d.connected_components(x, connectivity=4, binary_image=True, return_N=True)[1] == 2
    assert mine.connected_components(x, connectivity=4, binary_image=True, return_N=True)[1] == 1
    row = np.array([[1, 1, 0, 0, 1, 1, 1, 1, 1, 1]], bool)
    assert cc3d.connected_components(row, connectivity=8)[0, 2] != 0
    np.testing.assert_array_equal(
        mine.connected_components(row, connectivity=8), scipy_labels(row, 8)[0]
    )


def test_output_dtype_periodic_and_refusals_as_cc3d():
    # uint16 while the foreground's runs are fewer than 2^16 - 1, then uint32
    for k in (65534, 65535):
        row = np.zeros((1, 2 * k + 2), np.uint8)
        row[0, 1 : 2 * k : 2] = 1
        assert mine.connected_components(row).dtype == cc3d.connected_components(row).dtype
    x = np.zeros((4, 5, 6), np.int8)
    x[0, 0, 0] = x[3, 4, 5] = x[3, 0, 0] = 7
    for conn in (6,):
        same(
            mine.connected_components(x, connectivity=conn, periodic_boundary=True),
            cc3d.connected_components(x, connectivity=conn, periodic_boundary=True),
        )
    for conn in (4, 8):
        same(
            mine.connected_components(x[0], connectivity=conn, periodic_boundary=True),
            cc3d.connected_components(x[0], connectivity=conn, periodic_boundary=True),
        )
    for out in (np.uint16, np.uint32, np.uint64):
        same(
            mine.connected_components(x, out_dtype=out), cc3d.connected_components(x, out_dtype=out)
        )
    empty = mine.connected_components(np.zeros((0, 3), np.uint8), return_N=True)
    assert empty[0].shape == (0, 3) and empty[1] == 0
    for call, match in [
        (lambda: mine.connected_components(x, connectivity=8), "Only 6, 18, and 26"),
        (lambda: mine.connected_components(x[0], connectivity=5), "Only 4, 8, and 6"),
        (lambda: mine.connected_components(x, out_dtype=np.uint8), "must be one of"),
        (lambda: mine.connected_components(x, connectivity=26, periodic_boundary=True),
         "not yet implemented for 26"),
        (lambda: mine.connected_components(np.zeros((2,) * 4)), "Only 1D, 2D, and 3D"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=match):
            call()


@pytest.mark.parametrize("seed", range(3))
def test_dust_largest_k_statistics_each_as_cc3d(seed):
    rng = np.random.default_rng(100 + seed)
    ints = [np.uint8, np.int16, np.uint32, np.int64]
    for _ in range(60):
        x, conn = random_image(rng, ndims=(2, 3), dtypes=ints, values=int(rng.integers(2, 6)))
        threshold = (
            int(rng.integers(0, 6))
            if rng.random() < 0.6
            else [int(rng.integers(0, 3)), int(rng.integers(2, 8))]
        )
        invert = bool(rng.random() < 0.3)
        got, n = mine.dust(x.copy(), threshold, conn, invert=invert, return_N=True)
        want, n_want = cc3d.dust(x.copy(), threshold, conn, invert=invert, return_N=True)
        assert n == n_want
        same(got, want)
        k = int(rng.integers(1, 6))
        got, n = mine.largest_k(x, k, connectivity=conn, return_N=True)
        want, n_want = cc3d.largest_k(x, k, connectivity=conn, return_N=True)
        assert n == n_want
        same(got, want)
        same(mine.largest_k(x, 0), cc3d.largest_k(x, 0))
        labels = cc3d.connected_components(x, connectivity=conn)
        for boxes_as_array in (False, True):
            got = mine.statistics(labels, boxes_as_array)
            want = cc3d.statistics(labels, boxes_as_array)
            same(got["voxel_counts"], want["voxel_counts"])
            np.testing.assert_allclose(got["centroids"], want["centroids"], rtol=1e-12)
            if boxes_as_array:
                same(got["bounding_boxes"], want["bounding_boxes"])
            else:
                assert got["bounding_boxes"] == want["bounding_boxes"]
        for binary in (False, True):
            for in_place in (False, True):
                got = [(v, img.copy()) for v, img in mine.each(labels, binary, in_place)]
                want = [(v, img.copy()) for v, img in cc3d.each(labels, binary, in_place)]
                assert [v for v, _ in got] == [v for v, _ in want]
                for (_, a), (_, b) in zip(got, want, strict=True):
                    same(a, b)


def test_in_place_each_hands_out_a_read_only_buffer():
    labels = np.array([[1, 0, 2], [2, 2, 0]], np.uint32)
    for value, img in mine.each(labels, in_place=True):
        assert not img.flags.writeable and set(np.unique(img)) <= {0, value}


@pytest.mark.parametrize("backend", BACKENDS)
def test_connected_components_of_dask_and_cupy_arrays(backend):
    import dask.array as da

    rng = np.random.default_rng(7)
    x = rng.integers(0, 3, (23, 17, 19)).astype(np.uint16)
    want = cc3d.connected_components(x, connectivity=18)
    lazy = mine.connected_components(da.from_array(x, chunks=(8, 9, 7)), connectivity=18)
    np.testing.assert_array_equal(lazy.compute(), want)
    if backend == "cuda":
        import cupy

        got, n = mine.connected_components(cupy.asarray(x), connectivity=18, return_N=True)
        assert isinstance(got, cupy.ndarray) and n == want.max()
        np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dust_and_largest_k_of_dask_and_cupy_arrays(backend):
    import dask.array as da

    rng = np.random.default_rng(8)
    x = rng.integers(0, 3, (21, 18, 17)).astype(np.int16)
    x[rng.random(x.shape) < 0.3] = 0
    # cubes of distinct sizes (no ties for largest_k), one value each, apart
    cubes = np.zeros((24, 24, 24), np.uint8)
    for i, edge in enumerate((2, 3, 4, 5)):
        cubes[6 * i : 6 * i + edge, :edge, 6 * i : 6 * i + edge] = i + 1
    arrays = [lambda a: da.from_array(a, chunks=(8, 7, 9))]
    if backend == "cuda":
        import cupy

        arrays.append(cupy.asarray)
    for make in arrays:
        host = (lambda a: a.get()) if make is not arrays[0] else (lambda a: a.compute())
        for threshold, invert in ((4, False), (4, True), ((2, 9), False), ((2, 9), True)):
            for conn in (6, 26):
                want, n = cc3d.dust(x, threshold, conn, invert=invert, return_N=True)
                got, m = mine.dust(make(x), threshold, conn, invert=invert, return_N=True)
                assert m == n and got.dtype == want.dtype
                np.testing.assert_array_equal(host(got), want)
        assert host(mine.largest_k(make(cubes), 0, return_N=True)).max() == 0  # as cc3d's
        for k in (1, 2, 3, 10):
            want, n = cc3d.largest_k(cubes, k, connectivity=26, return_N=True)
            got, m = mine.largest_k(make(cubes), k, connectivity=26, return_N=True)
            assert m == n
            np.testing.assert_array_equal(host(got), want)
    if backend == "cuda":
        labels = cc3d.connected_components(x)
        want = cc3d.dust(labels, 4, precomputed_ccl=True)
        got = mine.dust(cupy.asarray(labels), 4, precomputed_ccl=True)
        np.testing.assert_array_equal(got.get(), want)


def test_connected_components_stack_labels_the_slabs_as_one_volume(tmp_path):
    rng = np.random.default_rng(3)
    vol = rng.integers(0, 3, (20, 18, 30)).astype(np.uint8)
    slabs = (vol[:, :, z : z + 7] for z in range(0, 30, 7))
    labels, n = mine.connected_components_stack(
        slabs, connectivity=6, return_N=True, out=str(tmp_path)
    )
    want, n_want = cc3d.connected_components(vol, connectivity=6, return_N=True)
    assert n == n_want
    np.testing.assert_array_equal(labels[...], want)


def test_estimate_provisional_labels_and_empty_statistics_as_cc3d():
    rng = np.random.default_rng(9)
    for _ in range(40):
        x, _ = random_image(rng, ndims=(2, 3), dtypes=[np.uint8, np.int32], values=3)
        x[rng.random(x.shape) < 0.5] = 0
        assert mine.estimate_provisional_labels(x) == cc3d.estimate_provisional_labels(x)
    empty = mine.statistics(np.zeros((0, 1, 1), np.uint8))
    assert empty == {"voxel_counts": None, "bounding_boxes": None, "centroids": None}


@pytest.mark.parametrize("seed", range(2))
def test_delta_and_float_input_as_cc3d(seed):
    # 2D at 8 with delta > 0 is left out: there cc3d's scan joins some pairs farther apart than
    # delta (tests/kernels/cpu/test_continuous.py holds tilelabel to the rule)
    rng = np.random.default_rng(200 + seed)
    for _ in range(100):
        x, conn = random_image(rng, dtypes=[np.uint8, np.int16, np.float32, np.float64])
        x = (x * rng.random(x.shape) * 7).astype(x.dtype)
        delta = float(rng.choice([0, 0.5, 1, 3]))
        if x.ndim == 2 and conn in (8, 18, 26) and delta > 0:
            continue
        got, n = mine.connected_components(x, connectivity=conn, delta=delta, return_N=True)
        want, n_want = cc3d.connected_components(x, connectivity=conn, delta=delta, return_N=True)
        assert n == n_want
        same(got, want)


def test_delta_and_largest_k_of_dask_arrays_in_chunks():
    import dask.array as da

    rng = np.random.default_rng(9)
    x = (rng.random((19, 23, 21)) * 6).astype(np.float32)
    x[rng.random(x.shape) < 0.3] = 0
    lazy = da.from_array(x, chunks=(8, 7, 9))
    for conn, delta in ((6, 0), (18, 1.5), (26, 0.5)):
        want, n = cc3d.connected_components(x, connectivity=conn, delta=delta, return_N=True)
        got, m = mine.connected_components(lazy, connectivity=conn, delta=delta, return_N=True)
        assert m.compute() == n
        np.testing.assert_array_equal(got.compute(), want)
    sizes = np.bincount(want.ravel())[1:]
    k = int(np.sum(sizes > np.sort(sizes)[-4]))  # the largest that no tie cuts
    got = mine.largest_k(lazy, k, connectivity=26, delta=0.5)
    np.testing.assert_array_equal(got.compute(), cc3d.largest_k(x, k, connectivity=26, delta=0.5))


def test_contacts_and_region_graph_as_cc3d():
    # counts on images with a background border: at their edge cc3d counts some pairs twice
    # at 8 and 26 (tests/kernels/cpu/test_contacts.py)
    rng = np.random.default_rng(5)
    for _ in range(60):
        x, conn = random_image(rng, ndims=(2, 3), dtypes=[np.uint16, np.int64], values=5)
        assert mine.region_graph(x, conn) == cc3d.region_graph(x, conn)
        got = mine.contacts(x, conn, anisotropy=(0.5, 2.0, 3.0))
        want = cc3d.contacts(x, conn, anisotropy=(0.5, 2.0, 3.0))
        assert got.keys() == want.keys()
        for pair, area in want.items():
            assert got[pair] == pytest.approx(area, rel=1e-6)
        padded = np.pad(x, 1)
        want = cc3d.contacts(padded, conn, surface_area=False)
        assert mine.contacts(padded, conn, surface_area=False) == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_contacts_and_region_graph_of_dask_and_cupy_arrays(backend):
    """A label image whose labels lie in several pieces (Voronoi cells of one value apart)."""
    import dask.array as da

    rng = np.random.default_rng(9)
    for conn, shape in ((26, (21, 17, 19)), (6, (21, 17, 19)), (8, (40, 33))):
        x = np.pad(rng.integers(0, 6, shape).astype(np.int32), 1)
        want = cc3d.contacts(x, conn, anisotropy=(0.5, 2.0, 3.0))
        counts = cc3d.contacts(x, conn, surface_area=False)
        arrays = [da.from_array(x, chunks=(7, 9, 8)[: x.ndim])]
        if backend == "cuda":
            import cupy

            arrays.append(cupy.asarray(x))
        for arr in arrays:
            assert mine.region_graph(arr, conn) == cc3d.region_graph(x, conn)
            assert mine.contacts(arr, conn, surface_area=False) == counts
            got = mine.contacts(arr, conn, anisotropy=(0.5, 2.0, 3.0))
            assert got.keys() == want.keys()
            for pair, area in want.items():
                assert got[pair] == pytest.approx(area, rel=1e-6)


def test_voxel_and_color_connectivity_graphs_as_cc3d():
    # values, dtypes and memory order: cc3d's graphs come in Fortran order whatever the input's
    rng = np.random.default_rng(11)
    for _ in range(40):
        x, conn = random_image(rng, ndims=(2, 3), dtypes=[np.uint8, np.uint32], values=3)
        vcg = mine.voxel_connectivity_graph(x, conn)
        same(vcg, cc3d.voxel_connectivity_graph(x, conn))
        ccg_conn = 4 if x.ndim == 2 else 6
        vcg = cc3d.voxel_connectivity_graph(x, ccg_conn)
        got, n = mine.color_connectivity_graph(vcg, ccg_conn, return_N=True)
        want, n_want = cc3d.color_connectivity_graph(vcg, ccg_conn, return_N=True)
        assert n == n_want
        same(got, want)
    for fn in (mine.voxel_connectivity_graph, mine.color_connectivity_graph):
        with pytest.raises(mine.DimensionError):
            fn(np.zeros((2, 2, 2, 2), np.uint32))


def test_binary_output_dtype_as_cc3d_on_both_sides_of_uint16():
    # cc3d sizes a binary image's labels by its shape alone
    shapes = {
        1: [(65534,), (65535,), (131068,), (131070,)],
        2: [(255, 256), (256, 256), (510, 256), (511, 256), (1022, 256), (1023, 256)],
        3: [(30, 64, 64), (31, 64, 64), (62, 64, 64), (63, 64, 64), (126, 64, 64), (127, 64, 64)],
    }
    for ndim, group in shapes.items():
        for shape in group:
            for conn in (4, 6, 8, 18, 26) if ndim == 2 else (6, 18, 26):
                x = np.zeros(shape, bool)
                want = cc3d.connected_components(x, connectivity=conn).dtype
                assert mine.connected_components(x, connectivity=conn).dtype == want
                got = mine.connected_components(
                    x.astype(np.uint8), connectivity=conn, binary_image=True
                )
                assert got.dtype == want, (shape, conn)
