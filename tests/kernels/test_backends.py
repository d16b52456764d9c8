"""What every backend offers the pipeline beyond labeling: the foreground it labels, packed to
bits and back (the writing pass labels kept bits again), and an encoder where it has one."""

from __future__ import annotations

import numpy as np
import pytest

from tilelabel.kernels.backends import cuda_available, get_backend

BACKENDS = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable via CuPy"),
        ],
    ),
]


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0, 5), (1,), (3, 5), (7, 9, 11), (2, 8, 8)])
@pytest.mark.parametrize("dtype", [np.uint8, np.bool_, np.uint16, np.float32])
def test_pack_and_unpack_give_the_foreground_back(backend, shape, dtype):
    be = get_backend(backend)
    rng = np.random.default_rng(sum(shape))
    block = (rng.integers(0, 4, shape) * rng.integers(0, 2, shape)).astype(dtype)
    fg = be.foreground(block)
    assert np.array_equal(_host(fg) != 0, block != 0)
    packed = be.pack(fg)
    count = int(np.prod(shape))
    # numpy's bit order: bits made on the device unpack on the host too
    assert packed.nbytes == (count + 7) // 8
    np.testing.assert_array_equal(_host(packed), np.packbits((block != 0).reshape(-1)))
    back = be.unpack(packed, shape)
    assert back.dtype == np.uint8 and tuple(back.shape) == shape
    np.testing.assert_array_equal(_host(back), (block != 0).astype(np.uint8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_labels_of_unpacked_bits_are_the_labels_of_the_block(backend):
    be = get_backend(backend)
    rng = np.random.default_rng(3)
    block = (rng.random((20, 21, 22)) < 0.4).astype(np.uint8) * 9  # any nonzero byte
    a, na = be.label(block, 26, np.uint32)
    b, nb = be.label(be.unpack(be.pack(be.foreground(block)), block.shape), 26, np.uint32)
    assert na == nb
    np.testing.assert_array_equal(_host(a), _host(b))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conn", [6, 26])
def test_label_first_gives_the_labels_and_each_ones_first_voxel(backend, conn):
    from scipy import ndimage

    be = get_backend(backend)
    rng = np.random.default_rng(conn)
    block = (rng.random((17, 19, 23)) < 0.3).astype(np.uint8)
    labels, n, first = be.label_first(block, conn, np.uint32)
    ref, rn = ndimage.label(block, ndimage.generate_binary_structure(3, 1 if conn == 6 else 3))
    assert n == rn > 1
    np.testing.assert_array_equal(_host(labels), ref)
    flat = ref.ravel()
    want = np.array([np.flatnonzero(flat == k)[0] for k in range(1, n + 1)])
    assert isinstance(first, np.ndarray) and first.dtype == np.int64
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(be.first_indices(labels, n), want)


def test_the_cpu_backend_leaves_encoding_to_zarr():
    assert get_backend("cpu").encoder is None


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable via CuPy")
def test_the_cuda_backend_has_an_encoder():
    from tilelabel.kernels.backends import Encoder

    enc = get_backend("cuda").encoder
    for method in (m for m in vars(Encoder) if not m.startswith("_")):
        assert callable(getattr(enc, method)), method
    assert not enc.available("blosc") and not enc.ready("blosc")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("shape", "conn", "algorithm"),
    [((33, 70), 4, None), ((33, 70), 4, "ha4"), ((33, 70), 8, None), ((9, 10, 11), 26, None)],
)
def test_label_stats_pass_gives_the_labels_their_statistics_and_first_voxels(
    backend, shape, conn, algorithm
):
    """One pass (HA4's analysis for ``ha4`` on CUDA) or two: the same labels, rows and keys."""
    from scipy import ndimage

    from tilelabel.connectivity import structure
    from tilelabel.kernels.cpu.stats import label_stats

    if backend == "cpu" and algorithm is not None:
        algorithm = None  # the CPU kernels have no ha4
    be = get_backend(backend)
    block = (np.random.default_rng(conn).random(shape) < 0.45).astype(np.uint8)
    ref, rn = ndimage.label(block, structure(len(shape), conn))
    offset = (5, 7, 11)[-len(shape) :]
    for moments in (False, True):
        labels, n, stats, first = be.label_stats_pass(
            block, conn, np.uint32, algorithm, offset, None, moments
        )
        assert n == rn
        np.testing.assert_array_equal(_host(labels), ref)
        want = label_stats(ref.astype(np.uint32), rn, offset, None, moments)
        assert set(stats) == set(want)
        for k, v in want.items():
            np.testing.assert_array_equal(stats[k], v, err_msg=k)
        flat = ref.ravel()
        keys = [np.flatnonzero(flat == k)[0] for k in range(1, n + 1)]
        np.testing.assert_array_equal(first, np.array(keys, np.int64))


def test_the_cuda_registry_lists_the_papers_algorithms():
    """BE, OLE and HA4 are registered for their papers' connectivities (no GPU needed to ask)."""
    from tilelabel.kernels.cuda.ccl import OTHERS, spec
    from tilelabel.kernels.cuda.ha4 import serves_stats
    from tilelabel.kernels.registry import algorithms

    assert {"ole", "ha4"} <= set(algorithms("cuda", 2, 4))
    assert {"be", "ole"} <= set(algorithms("cuda", 2, 8))
    assert "be" in algorithms("cuda", 3, 26)
    for conn in (6, 18):
        assert not {"be", "ole", "ha4"} & set(algorithms("cuda", 3, conn))
    assert spec("be").u32_voxels == 2**31 - 1 and spec("ole") is OTHERS["ole"]
    assert serves_stats(2, 4, "ha4", None, False)
    assert not serves_stats(2, 4, None, None, False)
    assert not serves_stats(2, 4, "ha4", None, True) and not serves_stats(2, 8, "ha4", None, False)
