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
    from tilelabel.kernels.gpu import device_id

    enc = get_backend("cuda").encoder
    for method in (m for m in vars(Encoder) if not m.startswith("_")):
        assert callable(getattr(enc, method)), method
    assert enc.device() == device_id()
    assert not enc.available("blosc") and not enc.ready("blosc")
