"""The GPU's input checksum is the CPU's number, for any size, type and layout."""

from __future__ import annotations

import numpy as np
import pytest

from tilelabel.kernels.backends import cuda_available, get_backend
from tilelabel.kernels.cpu.fingerprint import fingerprint

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
]


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((0,), np.uint8),
        ((13,), np.uint8),
        ((3, 7, 5), np.uint8),
        ((256, 256, 256), np.uint8),
        ((33, 65, 129), np.uint16),
        ((40, 40, 41), np.float32),
        ((64, 64, 64), np.uint64),
        ((7, 3), np.bool_),
    ],
)
def test_the_device_checksum_is_the_hosts(shape, dtype):
    import cupy as cp

    rng = np.random.default_rng(2)
    block = (rng.random(shape) * 1000).astype(dtype)
    be = get_backend("cuda")
    assert be.fingerprint(cp.asarray(block)) == fingerprint(block)
    assert be.fingerprint(block) == fingerprint(block)  # a host block, as read by zarr
    if block.ndim == 3:  # a view: copied to C order first
        view = cp.asarray(block)[:, ::2]
        assert be.fingerprint(view) == fingerprint(block[:, ::2])
