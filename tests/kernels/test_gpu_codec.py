"""zstd on the GPU (nvCOMP): every frame decodes with the CPU's zstd to the store's tile."""

from __future__ import annotations

import numpy as np
import pytest

from tilelabel.kernels.backends import cuda_available, get_backend
from tilelabel.kernels.tiles import tile_slabs


def _nvcomp() -> bool:
    from tilelabel.kernels.gpu_codec import available

    return available()


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
    pytest.mark.skipif(not cuda_available() or not _nvcomp(), reason="needs nvidia-nvcomp"),
]


@pytest.mark.parametrize(
    "shape, tile, dtype",
    [
        ((64, 48, 40), (16, 16, 16), np.uint32),  # partial tiles on the last axis
        ((128, 128, 128), (64, 64, 64), np.uint32),  # 1 MiB tiles
        ((256, 256, 64), (256, 256, 64), np.uint64),  # the block is one 32 MiB tile
        ((300, 260), (64, 64), np.uint32),
    ],
)
def test_frames_decode_on_the_cpu(shape, tile, dtype):
    import cupy as cp
    import numcodecs

    from tilelabel.synth import random_volume

    be = get_backend("cuda")
    assert be.can_encode("zstd") and not be.can_encode("blosc")
    img = random_volume(shape, 0.3, 1, seed=5)
    if shape[0] > tile[0]:
        img[: tile[0]] = 0  # a slab of empty tiles, left out
    labels, n = be.label(img, 3 ** len(shape) - 1, np.uint32)
    lut = np.random.default_rng(1).permutation(n + 1).astype(dtype)
    lut[0] = 0
    be.warm_encoder("blosc")  # not an encoder here: nothing to load
    be.warm_encoder("zstd")
    frames = be.encode_tiles(labels, lut, tile, "zstd")
    want = {}
    for indices, tiles, nonzero in tile_slabs(lut[cp.asnumpy(labels)], tile, np):
        want.update((idx, tiles[k]) for k, idx in enumerate(indices) if nonzero[k])
    assert frames.keys() == want.keys() and want
    zstd = numcodecs.Zstd()
    for idx, frame in frames.items():
        got = np.frombuffer(zstd.decode(bytes(frame)), dtype=dtype)
        np.testing.assert_array_equal(got.reshape(tile), want[idx])


def test_the_encoder_is_ready_once_warmed():
    # a process of its own: WARM is process-wide, and this one's earlier tests may have set it
    import subprocess
    import sys

    code = (
        "from tilelabel.kernels.backends import get_backend\n"
        "be = get_backend('cuda')\n"
        "print(be.encoder_ready('zstd'))\n"
        "be.warm_encoder('blosc')\n"
        "print(be.encoder_ready('zstd'))\n"
        "be.warm_encoder('zstd')\n"
        "print(be.encoder_ready('zstd'), be.encoder_ready('blosc'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True", "False"]
