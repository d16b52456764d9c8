"""CUDA kernels against scipy.ndimage.label, exactly (on a GPU; skipped where CuPy sees none)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage

from tests.cases import families
from tilelabel.connectivity import structure
from tilelabel.kernels.backends import cuda_available
from tilelabel.synth import random_volume

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
]

BLOCK = ["buf", "buf_ic", "bke", "bke_ic", "bke_tile"]
PIXEL = ["uf", "uf_ic", "ke", "seg"]
EXPECTED = {
    (2, 4): PIXEL + ["ole", "ha4"],
    (2, 8): BLOCK + PIXEL + ["be", "ole"],
    (3, 6): PIXEL,
    (3, 18): PIXEL,
    (3, 26): BLOCK + PIXEL + ["be"],
}
COMBOS = [(nd, c, a) for (nd, c), algs in EXPECTED.items() for a in algs]
DTYPES = [np.uint32, np.uint64]


def _cp():
    import cupy

    return cupy


def _kernel(nd, conn, alg):
    from tilelabel.kernels.registry import get_kernel

    return get_kernel("cuda", nd, conn, alg)


def _check(img: np.ndarray, conn: int, alg: str, dtype=np.uint32, name: str = ""):
    cp = _cp()
    ref, rn = ndimage.label(img, structure(img.ndim, conn))
    labels, n = _kernel(img.ndim, conn, alg)(cp.asarray(np.ascontiguousarray(img)), dtype)
    assert isinstance(labels, cp.ndarray)
    assert labels.dtype == dtype and labels.shape == img.shape
    assert n == rn, (name, img.shape, conn, alg, n, rn)
    np.testing.assert_array_equal(cp.asnumpy(labels), ref, err_msg=f"{name} {conn} {alg}")


def test_registry_lists_every_algorithm():
    from tilelabel.kernels.registry import DEFAULTS, algorithms

    for (nd, conn), algs in EXPECTED.items():
        assert set(algs) <= set(algorithms("cuda", nd, conn))
        assert DEFAULTS[("cuda", nd, conn)] in algorithms("cuda", nd, conn)


@pytest.mark.parametrize("dtype", DTYPES, ids=["u32", "u64"])
@pytest.mark.parametrize(("nd", "conn", "alg"), COMBOS, ids=[f"{n}d-{c}-{a}" for n, c, a in COMBOS])
def test_case_families(nd, conn, alg, dtype):
    for name, img in families(nd, 37 if nd == 2 else 23):
        _check(img, conn, alg, dtype, name)


@pytest.mark.parametrize(("nd", "conn", "alg"), COMBOS, ids=[f"{n}d-{c}-{a}" for n, c, a in COMBOS])
def test_case_families_other_seed_size(nd, conn, alg):
    for name, img in families(nd, 64 if nd == 2 else 34, seed=7):
        _check(img, conn, alg, np.uint32, name)


ODD_2D = [(1, 1), (1, 7), (7, 1), (2, 9), (9, 2), (3, 3), (5, 8), (8, 5), (33, 65), (129, 31)]
ODD_3D = [
    (1, 1, 1), (1, 1, 9), (1, 9, 1), (9, 1, 1), (1, 2, 3), (3, 2, 1), (2, 3, 5), (5, 3, 2),
    (3, 5, 7), (7, 5, 3), (2, 2, 2), (4, 6, 9), (9, 6, 4), (1, 33, 65), (65, 1, 33),
    (17, 19, 23), (31, 2, 47),
]  # fmt: skip


@pytest.mark.parametrize(("nd", "conn", "alg"), COMBOS, ids=[f"{n}d-{c}-{a}" for n, c, a in COMBOS])
def test_odd_shapes(nd, conn, alg):
    rng = np.random.default_rng(nd * 1000 + conn)
    for shape in ODD_2D if nd == 2 else ODD_3D:
        for density in (0.15, 0.5, 0.85):
            img = (rng.random(shape) < density).astype(np.uint8)
            _check(img, conn, alg, np.uint32, f"odd{shape}-{density}")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    combo=st.sampled_from(COMBOS),
    dims=st.lists(st.integers(1, 40), min_size=3, max_size=3),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
    u64=st.booleans(),
)
def test_random_volumes(combo, dims, density, seed, u64):
    nd, conn, alg = combo
    shape = tuple(dims[:nd])
    img = (np.random.default_rng(seed).random(shape) < density).astype(np.uint8)
    _check(img, conn, alg, np.uint64 if u64 else np.uint32, "hypothesis")


@pytest.mark.parametrize("nd", [2, 3])
def test_bke_tile_across_tiles(nd):
    """bke_tile on volumes spanning several tiles in every axis (partial tiles at the far faces,
    odd sides) and one full volume (one component)."""
    conn = 3**nd - 1
    shapes = [(150, 130), (257, 131)] if nd == 2 else [(37, 41, 71), (20, 66, 67)]
    rng = np.random.default_rng(21 + nd)
    for shape in shapes:
        for density in (0.1, 0.3, 0.6, 1.0):
            img = (rng.random(shape) < density).astype(np.uint8)
            for dtype in DTYPES:
                _check(img, conn, "bke_tile", dtype, f"tile-{shape}-{density}")


@pytest.mark.parametrize(("nd", "conn"), [(2, 4), (2, 8), (3, 6), (3, 18), (3, 26)])
def test_seg_across_tiles(nd, conn):
    """seg on volumes spanning several of its tiles in every axis: rows of whole 32-bit words and
    not, partial tiles at the far faces, and one full volume (one component)."""
    from tilelabel.kernels.cuda.ccl import SEG_TILE

    kx, ky, kz = SEG_TILE[nd]
    tile = (ky, 32 * kx) if nd == 2 else (kz, ky, 32 * kx)
    rng = np.random.default_rng(conn)
    for extra in ((1, 1, 0), (2, 3, 5)):
        shape = tuple(2 * t + e for t, e in zip(tile, extra[-nd:], strict=True))
        for density in (0.1, 0.3, 0.6, 1.0):
            for g in (1, 3):
                img = random_volume(shape, density, g, seed=int(rng.integers(1 << 30)))
                for dtype in DTYPES:
                    _check(img, conn, "seg", dtype, f"seg-{shape}-{density}-{g}")


def test_ole_iterations_at_the_ends_of_density():
    """TPDS 2020's Table 4 at 0 % and 100 %: one scan finds nothing to change on an empty image;
    a full one needs one Analysis, then a scan that changes nothing."""
    cp = _cp()
    from tilelabel.kernels.cuda.ccl import make_labeling

    for conn in (4, 8):
        for fill, want in ((0, 1), (1, 2)):
            run = make_labeling(cp.full((64, 96), fill, np.uint8), np.uint32, conn, "ole")
            for _, step in run.steps():
                step()
            assert run.iterations == want and run.count() == fill


@pytest.mark.parametrize("nd", [2, 3])
def test_be_key_is_not_the_root_block(nd):
    """BE's root is the component's smallest block index; the first voxel can lie in another
    block of its row (2D) or plane (3D) when the root block has no voxel in its first row or
    plane."""
    if nd == 2:
        img = np.zeros((6, 9), np.uint8)
        img[1, 1] = img[0, 2] = 1  # block (0, 0) only in its second row; (0, 2) is first
        img[3, 5] = img[2, 7] = img[5, 8] = img[4, 8] = 1
    else:
        img = np.zeros((4, 6, 5), np.uint8)
        img[1, 1, 1] = img[0, 2, 1] = 1  # block (0, 0, 0) only in plane 1; (0, 2, 1) is first
        img[3, 4, 3] = img[2, 5, 4] = 1
    for dtype in DTYPES:
        _check(img, 3**nd - 1, "be", dtype, "be-key")


def test_ha4_strips_and_words():
    """HA4 on strips of 4 rows and words of 32 pixels: rows of partial words, segments over many
    words, components across many strips."""
    rng = np.random.default_rng(4)
    for shape in ((1, 100), (9, 100), (37, 300), (130, 64), (67, 33)):
        imgs = [np.ones(shape, np.uint8)]
        imgs += [
            random_volume(shape, d, g, int(rng.integers(1 << 30)))
            for d in (0.3, 0.6, 0.9)
            for g in (1, 7)
        ]
        for img in imgs:
            for dtype in DTYPES:
                _check(img, 4, "ha4", dtype, f"ha4-{shape}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["u32", "u64"])
def test_ha4_analysis_equals_the_statistics_kernel(dtype):
    """HA4's features of the labeling pass: the counts, boxes and coordinate sums of the
    statistics kernel (and of the CPU's)."""
    from tests.kernels.cuda.test_stats import same
    from tilelabel.kernels.cpu.stats import label_stats
    from tilelabel.kernels.cuda.ha4 import label_analysis

    cp = _cp()
    imgs = [img for _, img in families(2, 45)]
    imgs += [random_volume((70, 333), d, g, 5) for d in (0.2, 0.64, 1.0) for g in (1, 4)]
    for img in imgs:
        ref, rn = ndimage.label(img, structure(2, 4))
        labels, n, stats, first = label_analysis(cp.asarray(img), dtype)
        assert n == rn and labels.dtype == dtype
        np.testing.assert_array_equal(cp.asnumpy(labels), ref)
        same(stats, label_stats(ref.astype(dtype), rn))
        flat = ref.ravel()
        want = np.array([np.flatnonzero(flat == k)[0] for k in range(1, n + 1)], np.int64)
        np.testing.assert_array_equal(cp.asnumpy(first), want.reshape(-1))


def test_kernels_compile_once_per_device_and_labeling():
    """A labeling compiles only the kernels it launches, once: a second labeling of the same
    kind gets the same kernels without compiling."""
    cp = _cp()
    from tilelabel.kernels.cuda.ccl import kernel_names
    from tilelabel.kernels.cuda.compile import kernels

    img = cp.asarray((np.random.default_rng(2).random((20, 22, 24)) < 0.4).astype(np.uint8))
    _kernel(3, 26, "bke_tile")(img, np.uint32)
    names = kernel_names("bke_tile", 3, 26, np.uint32, True)
    assert set(names) == {"tile", "block", "renumber"}
    for family, exprs in names.items():
        got = kernels(family, exprs)
        assert set(got) == set(exprs)
        assert kernels(family, tuple(reversed(exprs))) is got  # one module per set of names


def test_input_values_other_than_one():
    cp = _cp()
    rng = np.random.default_rng(3)
    img = rng.integers(0, 4, (21, 22, 23)).astype(np.uint8) * 60  # 0, 60, 120, 180
    ref, rn = ndimage.label(img != 0, structure(3, 26))
    labels, n = _kernel(3, 26, "bke_ic")(cp.asarray(img), np.uint32)
    assert n == rn
    np.testing.assert_array_equal(cp.asnumpy(labels), ref)


# --- the backend ---------------------------------------------------------------------------


def test_backend_contract():
    cp = _cp()
    from tilelabel.kernels.backends import get_backend
    from tilelabel.kernels.cpu.ops import first_indices

    be = get_backend("cuda")
    assert be.name == "cuda"
    rng = np.random.default_rng(11)
    for nd, conn in ((2, 4), (2, 8), (3, 6), (3, 18), (3, 26)):
        shape = (45, 38) if nd == 2 else (19, 14, 23)
        host = (rng.random(shape) < 0.4) * rng.integers(1, 300, shape)  # int64, nonzero values
        for block in (host, cp.asarray(host), host.astype(bool), host.astype(np.float32)):
            labels, n = be.label(block, conn, np.uint32)
            ref, rn = ndimage.label(host != 0, structure(nd, conn))
            assert n == rn
            h = be.to_host(labels)
            assert isinstance(h, np.ndarray)
            np.testing.assert_array_equal(h, ref)
            want = first_indices(ref.astype(np.uint32), n)
            got = be.first_indices(labels, n)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, want)
            # the by-product of labeling: the same labels and first voxels
            labels2, n2, first = be.label_first(block, conn, np.uint32)
            assert n2 == n and first.dtype == np.int64 and isinstance(first, np.ndarray)
            np.testing.assert_array_equal(be.to_host(labels2), ref)
            np.testing.assert_array_equal(first, want)
            lut = rng.permutation(n + 1).astype(np.uint64)
            lut[0] = 0
            out = be.apply_lut(labels, lut)
            assert isinstance(out, np.ndarray) and out.dtype == np.uint64
            np.testing.assert_array_equal(out, lut[ref])
        for alg in EXPECTED[(nd, conn)]:
            labels, n = be.label(host, conn, np.uint64, alg)
            np.testing.assert_array_equal(be.to_host(labels), ref)


def test_backend_empty_and_full():
    from tilelabel.kernels.backends import get_backend

    be = get_backend("cuda")
    for shape in ((5, 7), (3, 4, 5)):
        for fill in (0, 1):
            img = np.full(shape, fill, np.uint8)
            labels, n = be.label(img, 3 ** len(shape) - 1, np.uint32)
            assert n == fill
            np.testing.assert_array_equal(be.to_host(labels), img.astype(np.uint32))
            np.testing.assert_array_equal(be.first_indices(labels, n), np.zeros(fill, np.int64))
            *_, first = be.label_first(img, 3 ** len(shape) - 1, np.uint32)
            np.testing.assert_array_equal(first, np.zeros(fill, np.int64))


def test_labeling_keeps_no_labels_alive():
    """A worker thread's last chunk of labels is freed with its caller's reference: a copy kept
    for first_indices held 512 MiB per worker thread between runs."""
    cp = _cp()
    from tilelabel.kernels.backends import get_backend

    be = get_backend("cuda")
    pool = cp.get_default_memory_pool()
    block = (np.random.default_rng(5).random((64, 64, 64)) < 0.3).astype(np.uint8)
    be.label_first(block, 26, np.uint32)  # kernels loaded, the thread's stream made
    cp.cuda.get_current_stream().synchronize()
    before = pool.used_bytes()
    labels, n, first = be.label_first(block, 26, np.uint32)
    labels2, n2 = be.label(block, 26, np.uint32)
    assert pool.used_bytes() >= before + 2 * block.size * 4
    del labels, labels2
    assert pool.used_bytes() == before


def test_gpu_and_cpu_kernels_agree():
    cp = _cp()
    from tilelabel.kernels.registry import DEFAULTS, get_kernel

    try:
        get_kernel("cpu", 2, 8)
    except Exception as e:  # the CPU kernels are another module, maybe absent here
        pytest.skip(f"CPU kernels not importable: {e}")
    rng = np.random.default_rng(5)
    for (nd, conn), gpu_algs in EXPECTED.items():
        cpu_algs = [DEFAULTS[("cpu", nd, conn)]]  # one each: numba compiles take device time
        for trial in range(3):
            shape = (57, 61) if nd == 2 else (21, 18, 25)
            img = (rng.random(shape) < (0.1, 0.35, 0.7)[trial]).astype(np.uint8)
            results = [get_kernel("cpu", nd, conn, a)(img, np.dtype(np.uint32)) for a in cpu_algs]
            results += [
                get_kernel("cuda", nd, conn, a)(cp.asarray(img), np.dtype(np.uint32))
                for a in gpu_algs
            ]
            first, n0 = cp.asnumpy(results[0][0]), results[0][1]
            for labels, n in results[1:]:
                assert n == n0
                np.testing.assert_array_equal(cp.asnumpy(labels), first)


def test_tilelabel_label_with_cupy():
    cp = _cp()
    try:
        from tilelabel.api import label
    except Exception as e:
        pytest.skip(f"tilelabel.api not importable here: {e}")
    rng = np.random.default_rng(8)
    img = (rng.random((30, 31, 32)) < 0.3).astype(np.uint8)
    for conn in (6, 18, 26):
        labels, n = label(cp.asarray(img), connectivity=conn, backend="cuda")
        ref, rn = ndimage.label(img, structure(3, conn))
        assert isinstance(labels, cp.ndarray)
        assert int(n) == rn
        np.testing.assert_array_equal(cp.asnumpy(labels), ref)


# --- sizes past 2^31 and 2^32 voxels -------------------------------------------------------


def _free():
    cp = _cp()
    cp.get_default_memory_pool().free_all_blocks()


def _big(shape, conn, alg, dtype, tail):
    """Zeros except voxel 0 and a random slab of ``tail`` planes (rows in 2D) at the end, which
    straddles voxel 2^31 or 2^32; checks every voxel, the count and the first voxels."""
    cp = _cp()
    from tilelabel.kernels.backends import get_backend
    from tilelabel.kernels.cpu.ops import first_indices

    _free()
    nd = len(shape)
    free, total = cp.cuda.Device().mem_info
    size = int(np.prod(shape, dtype=object))
    tagged = alg in BLOCK  # the block forest keeps a tag bit: 32-bit entries below 2^31 voxels
    work = 8 if size > (2**31 - 1 if tagged else 2**32 - 1) else np.dtype(dtype).itemsize
    need = int(size * (1.05 + work + (np.dtype(dtype).itemsize if work == 8 else 0)))
    if need > free:
        pytest.skip(f"needs about {need / 2**30:.0f} GiB of GPU memory, {free / 2**30:.0f} free")
    img = cp.zeros(shape, np.uint8)
    z0 = shape[0] - tail
    slab = (np.random.default_rng(1).random((tail, *shape[1:])) < 0.3).astype(np.uint8)
    img[z0:] = cp.asarray(slab)
    img[(0,) * nd] = 1
    plane = int(np.prod(shape[1:]))
    boundary = 2**32 if size > 2**32 else 2**31
    assert z0 * plane < boundary < size  # the slab straddles the boundary
    be = get_backend("cuda")
    labels, n = be.label(img, conn, dtype, alg)
    del img
    ref, rn = ndimage.label(slab, structure(nd, conn))
    assert n == rn + 1
    assert labels.dtype == dtype
    np.testing.assert_array_equal(cp.asnumpy(labels[z0:]), np.where(ref > 0, ref + 1, 0))
    assert int(labels[(0,) * nd]) == 1
    step = max(1, (2**30) // plane)
    nonzero = sum(int(cp.count_nonzero(labels[a : min(a + step, z0)])) for a in range(0, z0, step))
    assert nonzero == 1
    first = be.first_indices(labels, n)
    want = np.concatenate([[0], first_indices(ref.astype(np.uint64), rn) + z0 * plane])
    np.testing.assert_array_equal(first, want)
    del labels
    _free()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("conn", "alg"),
    [(26, "bke_ic"), (26, "buf"), (26, "bke_tile"), (6, "uf"), (18, "ke"), (6, "seg")],
)
def test_3d_over_2_31_voxels(conn, alg):
    _big((1300, 1300, 1300), conn, alg, np.uint32, tail=40)


@pytest.mark.slow
@pytest.mark.parametrize(("conn", "alg"), [(8, "bke"), (4, "uf_ic"), (4, "seg")])
def test_2d_over_2_31_voxels(conn, alg):
    _big((46341, 46341), conn, alg, np.uint32, tail=160)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("conn", "alg", "dtype"),
    [(26, "bke_ic", np.uint64), (18, "ke", np.uint64), (26, "buf_ic", np.uint32)],
)
def test_3d_over_2_32_voxels(conn, alg, dtype):
    _big((1025, 2048, 2048), conn, alg, dtype, tail=4)


def test_device_memory_counts_the_input_at_its_width():
    """A uint64 label field takes 8 bytes a voxel on the device, and 8 more per decoded input
    byte while it is decoded, not the 1 of a 0/1 mask."""
    from tilelabel.kernels.cuda import nvcomp
    from tilelabel.kernels.cuda.backend import device_memory

    shape = (64, 96, 128)
    tile = (32, 32, 32)
    narrow = device_memory(shape, np.uint32, 26, tile, input_itemsize=1)
    wide = device_memory(shape, np.uint32, 26, tile, input_itemsize=8)
    assert wide[0] - narrow[0] >= 7 * int(np.prod(shape))
    if nvcomp.available():  # its tiles decoded, at their width
        more = nvcomp.decode_bytes(shape, tile, 8) - nvcomp.decode_bytes(shape, tile, 1)
        assert wide[0] - narrow[0] >= 7 * int(np.prod(shape)) + more


def test_device_memory_counts_the_encoder_only_where_it_can_run():
    from tilelabel.kernels.cuda import nvcomp
    from tilelabel.kernels.cuda.backend import device_memory

    shape, tile = (64, 96, 128), (32, 32, 32)
    plain = device_memory(shape, np.uint32, 26, tile, encode=False)
    encoding = device_memory(shape, np.uint32, 26, tile, encode=True)
    assert plain[3] == encoding[3] and isinstance(plain[3], str)  # the GPU's bus id
    # tiles, frames and nvCOMP's scratch, as nvCOMP sizes them; else nothing
    extra = encoding[0] - plain[0]
    if nvcomp.available():
        assert extra >= nvcomp.encode_bytes(shape, tile, 4) > 3 * 4 * int(np.prod(shape))
    assert (extra == 0) == (not nvcomp.available())
