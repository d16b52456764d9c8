"""CPU kernels against scipy.ndimage.label: exact labels and counts, for every registered kernel."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import ndimage

from tests.cases import families
from tilelabel.connectivity import CONNECTIVITIES, structure
from tilelabel.kernels.cpu import algorithms as cpu
from tilelabel.kernels.cpu import block as cpu_block
from tilelabel.kernels.registry import DEFAULTS, algorithms, get_kernel
from tilelabel.synth import random_volume

DTYPES = (np.uint32, np.uint64)

KERNELS = [
    (ndim, conn, alg)
    for ndim, conns in CONNECTIVITIES.items()
    for conn in conns
    for alg in algorithms("cpu", ndim, conn)
]


def kernel_id(k):
    return f"{k[0]}d-c{k[1]}-{k[2]}"


def check(ndim: int, conn: int, alg: str, image: np.ndarray, dtype=np.uint32) -> None:
    expected, n_expected = ndimage.label(image, structure(ndim, conn))
    before = image.copy()
    labels, n = get_kernel("cpu", ndim, conn, alg)(image, np.dtype(dtype))
    np.testing.assert_array_equal(image, before)  # the input is left alone
    assert isinstance(n, int)
    assert n == n_expected
    assert labels.dtype == dtype
    assert labels.shape == image.shape
    np.testing.assert_array_equal(labels, expected)


def test_every_kernel_is_registered():
    expected = {(2, 8): {"buf", "bke", "uf", "seg"}, (3, 26): {"buf", "bke", "uf", "seg"}}
    for ndim, conns in CONNECTIVITIES.items():
        for conn in conns:
            want = expected.get((ndim, conn), {"uf", "seg"})
            assert set(algorithms("cpu", ndim, conn)) == want


@pytest.mark.parametrize("key", [k for k in DEFAULTS if k[0] == "cpu"], ids=str)
def test_defaults_resolve(key):
    _, ndim, conn = key
    kernel = get_kernel("cpu", ndim, conn)
    assert kernel is get_kernel("cpu", ndim, conn, DEFAULTS[key])
    image = random_volume((9,) * ndim, 0.4, 1, seed=3)
    check(ndim, conn, DEFAULTS[key], image)


CASES = {ndim: list(families(ndim)) for ndim in (2, 3)}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("key", KERNELS, ids=kernel_id)
def test_case_families(key, dtype):
    ndim, conn, alg = key
    for name, image in CASES[ndim]:
        try:
            check(ndim, conn, alg, image, dtype)
        except AssertionError as e:
            raise AssertionError(f"case {name!r} (shape {image.shape}): {e}") from None


@pytest.mark.parametrize("key", KERNELS, ids=kernel_id)
def test_larger_random(key):
    ndim, conn, alg = key
    shape = (96, 80, 70) if ndim == 3 else (301, 257)
    for density, granularity in ((0.1, 1), (0.3, 1), (0.5, 1), (0.6, 3)):
        image = random_volume(shape, density, granularity, seed=11)
        check(ndim, conn, alg, image)


def small_images(ndim: int):
    shapes = st.tuples(*[st.integers(1, 9)] * ndim)
    return shapes.flatmap(lambda s: arrays(np.uint8, s, elements=st.integers(0, 1)))


@pytest.mark.parametrize("key", KERNELS, ids=kernel_id)
def test_hypothesis_small(key):
    ndim, conn, alg = key

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(image=small_images(ndim), wide=st.booleans())
    def run(image, wide):
        check(ndim, conn, alg, image, np.uint64 if wide else np.uint32)

    run()


@pytest.mark.parametrize("key", KERNELS, ids=kernel_id)
def test_hypothesis_random_volumes(key):
    ndim, conn, alg = key

    @settings(max_examples=25, deadline=None)
    @given(
        shape=st.tuples(*[st.integers(1, 24)] * ndim),
        density=st.floats(0.0, 1.0),
        granularity=st.integers(1, 3),
        seed=st.integers(0, 2**16),
    )
    def run(shape, density, granularity, seed):
        check(ndim, conn, alg, random_volume(shape, density, granularity, seed))

    run()


@pytest.mark.parametrize("alg", ["buf", "bke"])
def test_root_block_is_not_first_voxel(alg):
    # B's block (0, 0, 0) precedes A's block (0, 1, 1), but A's voxel (z=0) precedes B's (z=1)
    # in raster order: scipy numbers A first, so numbering by root block would be wrong.
    image = np.zeros((2, 4, 4), np.uint8)
    image[1, 0, 0] = 1
    image[0, 2, 2] = 1
    check(3, 26, alg, image)
    image2 = np.zeros((4, 4), np.uint8)
    image2[1, 0] = 1
    image2[0, 2] = 1
    check(2, 8, alg, image2)


@pytest.mark.parametrize("alg", ["buf", "bke"])
def test_blocks_across_words(alg):
    # The block scan finds the foreground blocks of a block row 64 at a time: rows of more
    # than 64 blocks, even and odd, and a first plane (no plane below) of a thick volume.
    for shape in ((5, 6, 259), (4, 3, 130), (3, 2, 128)):
        for density, granularity in ((0.2, 1), (0.6, 1), (0.3, 2)):
            check(3, 26, alg, random_volume(shape, density, granularity, seed=7))


@pytest.mark.parametrize("key", KERNELS, ids=kernel_id)
def test_uint32_via_wide_forest(monkeypatch, key):
    # Chunks too large for a uint32 forest are labeled in uint64 and narrowed; force that path.
    ndim, conn, alg = key
    monkeypatch.setattr(cpu, "UINT32_FOREST_LIMIT", 10)
    check(ndim, conn, alg, random_volume((13,) * ndim, 0.4, 1, seed=5), np.uint32)


def test_input_conversion_and_errors():
    kernel = get_kernel("cpu", 3, 26, "bke")
    image = random_volume((10, 11, 12), 0.4, 1, seed=1)
    expected, n = ndimage.label(image, structure(3, 26))
    strided = np.zeros((10, 11, 24), np.uint8)
    strided[:, :, ::2] = image
    variants = (image.astype(bool), image * 7, np.asfortranarray(image), strided[:, :, ::2])
    for variant in variants:
        labels, m = kernel(variant, np.uint32)
        assert m == n
        np.testing.assert_array_equal(labels, expected)
    with pytest.raises(ValueError, match="uint32 or uint64"):
        kernel(image, np.int32)
    with pytest.raises(ValueError, match="3D"):
        kernel(image[0], np.uint32)
    labels, m = kernel(np.zeros((0, 4, 4), np.uint8), np.uint64)
    assert m == 0 and labels.shape == (0, 4, 4) and labels.dtype == np.uint64


def test_connection_table_matches_distances():
    # The table is built from the paper's bitsets; check it against plain Chebyshev distances.
    voxels = cpu_block._voxels()
    for m, (d, nb) in itertools.product(range(256), enumerate(cpu_block.FORWARD_3D)):
        bits = 0
        for k, q in enumerate(voxels):
            qpos = [2 * o + c for o, c in zip(nb, q, strict=True)]
            if any(
                (m >> j) & 1 and max(abs(a - b) for a, b in zip(p, qpos, strict=True)) <= 1
                for j, p in enumerate(voxels)
            ):
                bits |= 1 << k
        assert cpu_block.T3[m, d] == bits, (m, d)


@pytest.mark.parametrize("conn", [4, 8])
def test_seg_runs_across_words(conn):
    """Runs that end, start and continue at the 64-voxel word boundaries of cpu_runs' masks, in
    rows of whole words and not."""
    for nx in (66, 127, 128, 130, 192):
        image = np.zeros((6, nx), np.uint8)
        image[0, 60:70] = 1  # one run across the first boundary
        image[1, 63] = image[1, 64] = 1  # a run of two voxels, one in each word
        image[2, 62] = image[2, 65] = 1  # x - 1 / x + 1 pairs across the boundary
        image[3, 64:] = 1
        image[4, :64] = 1
        image[5, ::2] = 1
        check(2, conn, "seg", image)
        check(2, conn, "seg", 1 - image)


@pytest.mark.parametrize("conn", [6, 18, 26])
def test_seg_rows_inside_the_row_below(conn):
    """Rows whose voxels all lie on voxels of the row below skip the pairs that the run below
    implies: a run touching such a row only diagonally at a run's end (18: not beside the run
    below), and repeated planes, whose rows all lie on the plane before."""
    image = np.zeros((2, 3, 8), np.uint8)
    image[0, 1, 3:5] = 1  # the run below
    image[1, 1, 3:5] = 1  # a row inside it
    image[1, 0, 2] = 1  # touches (1, 1, 3) in the plane; (0, 1, 3) only at 26
    image[1, 0, 5] = 1  # and at the other end
    image[1, 2, 2] = 1  # a later row: not walked by (1, 1)
    check(3, conn, "seg", image)
    image[1, 0, 3] = 1  # above the row, nothing below it (6: joined through (1, 1, 3) only)
    check(3, conn, "seg", image)
    for seed in range(3):
        planes = random_volume((6, 40, 150), 0.3, 1, seed=seed)
        image = np.repeat(planes, 2, axis=0)
        image[1::2] &= random_volume((6, 40, 150), 0.8, 1, seed=seed + 9)  # inside, not equal
        check(3, conn, "seg", image)


def test_one_specialisation_per_label_dtype():
    # Shapes and connectivities are runtime arguments: labeling many shapes must not compile a
    # new specialisation of any kernel function for each (only one per label dtype).
    from tilelabel.kernels.cpu import pixel as cpu_pixel
    from tilelabel.kernels.cpu import runs as cpu_runs

    for ndim, conn, alg in KERNELS:
        for shape in [(5,) * ndim, (1,) * (ndim - 1) + (7,), tuple(range(3, 3 + ndim))]:
            for dtype in DTYPES:
                get_kernel("cpu", ndim, conn, alg)(random_volume(shape, 0.5, 1, seed=2), dtype)
    # the scans: one for BUF and one for BKE per label dtype
    assert 1 <= len(cpu_block._scan.signatures) <= 2 * len(DTYPES), cpu_block._scan.signatures
    dispatchers = [
        cpu_block.masks,
        cpu_block.bke_reduce,
        cpu_block.flatten,
        cpu_block.final_labeling,
        cpu_pixel.uf_scan,
        cpu_pixel.uf_flatten,
        cpu_runs.unite,
        cpu_runs.write_labels,
    ]
    for fn in dispatchers:
        assert 1 <= len(fn.signatures) <= len(DTYPES), (fn.py_func.__name__, fn.signatures)
