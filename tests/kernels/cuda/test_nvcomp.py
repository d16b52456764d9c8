"""zstd on the GPU (nvCOMP): every frame decodes with the CPU's zstd to the store's tile."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
from zarr.codecs import GzipCodec, ZstdCodec

from tilelabel.kernels.backends import cuda_available, get_backend
from tilelabel.kernels.cuda.tiles import tile_slabs


def _nvcomp() -> bool:
    from tilelabel.kernels.cuda.nvcomp import available

    return available()


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
    pytest.mark.skipif(not cuda_available() or not _nvcomp(), reason="needs nvidia-libnvcomp 6"),
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

    from tilelabel.synth import random_volume

    be = get_backend("cuda")
    enc = be.encoder
    assert enc.available("zstd") and not enc.available("blosc")
    img = random_volume(shape, 0.3, 1, seed=5)
    if shape[0] > tile[0]:
        img[: tile[0]] = 0  # a slab of empty tiles, left out
    labels, n = be.label(img, 3 ** len(shape) - 1, np.uint32)
    lut = np.random.default_rng(1).permutation(n + 1).astype(dtype)
    lut[0] = 0
    enc.warm("blosc")  # not an encoder here: nothing to load
    enc.warm("zstd")
    frames = enc.encode_tiles(labels, lut, tile, "zstd")
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
        "enc = get_backend('cuda').encoder\n"
        "print(enc.ready('zstd'))\n"
        "enc.warm('blosc')\n"
        "print(enc.ready('zstd'))\n"
        "enc.warm('zstd')\n"
        "print(enc.ready('zstd'), enc.ready('blosc'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True", "False"]


def test_compressing_keeps_no_device_memory():
    """What a batch takes on the device (nvCOMP's codec, scratch and frames) is given back once
    its frames are on the host, in threads that live on (a dask worker's): codecs kept per
    worker thread held about 2 GiB each after a 512^3 chunk, in every worker that had ever
    compressed one, turn or no turn."""
    from concurrent.futures import ThreadPoolExecutor

    import cupy as cp

    from tilelabel.kernels.cuda import nvcomp

    labels = cp.arange(192**3, dtype=cp.uint32).reshape((192,) * 3) // 5  # 27 MiB, 27 tiles
    pool = cp.get_default_memory_pool()

    def compress():
        return len(nvcomp.zstd_tiles(labels, (64, 64, 64)))

    # nvCOMP's kernels loaded (its first use), in a thread that ends with whatever it kept
    with ThreadPoolExecutor(1) as once:
        assert once.submit(compress).result() == 27
    pool.free_all_blocks()
    cp.cuda.Device().synchronize()
    before = cp.cuda.Device().mem_info[0]
    with ThreadPoolExecutor(2) as workers:
        for _ in range(2):
            assert list(workers.map(lambda _: compress(), range(2))) == [27, 27]
        pool.free_all_blocks()
        # measured while the threads live, and with no synchronization: a worker's next run
        # checks its memory without one; the scratch of a batch is some 9 times its 27 MiB
        assert cp.cuda.Device().mem_info[0] >= before - (16 << 20)


def test_coding_takes_no_more_than_counted():
    """What compressing and decoding a block take on the device, its scratch included (nvCOMP's
    scratch grows by megabytes a tile, so a block of small tiles takes most), stays within what
    a chunk is counted for (:func:`encode_bytes`, :func:`decode_bytes`)."""
    import cupy as cp

    from tilelabel.kernels.cuda import nvcomp

    pool = cp.get_default_memory_pool()
    for shape, tile in (((256, 256, 256), (32, 32, 32)), ((256, 256, 256), (128, 128, 128))):
        block = cp.arange(np.prod(shape), dtype=cp.uint32).reshape(shape) // 7
        for _ in range(2):  # the second time, with nvCOMP's kernels loaded
            pool.free_all_blocks()
            before = pool.total_bytes()
            frames = nvcomp.zstd_tiles(block, tile)
            assert pool.total_bytes() - before <= nvcomp.encode_bytes(shape, tile, 4)
            pool.free_all_blocks()
            before = pool.total_bytes()
            back = nvcomp.decode_block("zstd", frames, tile, shape, np.uint32)
            assert pool.total_bytes() - before <= block.nbytes + nvcomp.decode_bytes(shape, tile, 4)
            assert bool((back == block).all())
            del back


#: the compressions whose chunks the GPU decodes, at levels other than their defaults
COMPRESSORS = {
    (2, "zstd"): numcodecs.Zstd(level=9),
    (2, "gzip"): numcodecs.GZip(level=6),
    (2, "zlib"): numcodecs.Zlib(level=1),
    (2, "lz4"): numcodecs.LZ4(acceleration=3),
    (3, "zstd"): ZstdCodec(level=-3),
    (3, "gzip"): GzipCodec(level=9),
    (3, "zstd-in-shards"): ZstdCodec(level=3),
}


@pytest.mark.parametrize("zarr_format, codec", list(COMPRESSORS))
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_blocks_decode_on_the_gpu_as_zarr_reads_them(tmp_path, zarr_format, codec, dtype):
    """A block's stored chunks, decoded by nvCOMP, equal zarr's read of the block: whole and
    edge chunks, chunks never stored, each codec a device decodes at any level, chunks inside
    shards."""
    import cupy as cp

    from tests.conftest import write_zarr
    from tilelabel.storage import ZarrSource

    rng = np.random.default_rng(3)
    img = (rng.random((45, 37, 50)) * 5).astype(dtype)
    img[:16] = 0  # chunks zarr leaves unstored
    kw = {"compressors": COMPRESSORS[zarr_format, codec]}
    chunks = (16, 16, 24)
    if codec.endswith("-in-shards"):  # the same blocks, of whole shards of smaller chunks
        codec, chunks, kw["shards"] = codec.removesuffix("-in-shards"), (8, 8, 12), chunks
    url = write_zarr(tmp_path / "in.zarr", img, chunks, zarr_format=zarr_format, fill_value=0, **kw)
    decoder = get_backend("cuda").decoder
    source = ZarrSource(url)
    for block in [
        (slice(0, 32), slice(0, 32), slice(0, 48)),
        (slice(16, 45), slice(16, 37), slice(24, 50)),
    ]:
        raw = source.raw(block, decoder.available)
        assert raw is not None and raw.shape == img[block].shape and raw.layout.codec == codec
        got = decoder.decode_block(raw)
        assert isinstance(got, cp.ndarray) and got.dtype == dtype
        np.testing.assert_array_equal(cp.asnumpy(got), img[block])


@pytest.mark.parametrize(
    "dtype, tile", [(np.uint8, (3, 5, 7)), (np.uint16, (4, 4, 2)), (np.uint64, (8, 8))]
)
def test_nonzero_flags_equal_numpy(dtype, tile):
    # bytes read 4 at a time where a tile's size allows, one at a time otherwise
    import cupy as cp

    from tilelabel.kernels.cuda.nvcomp import _nonzero

    rng = np.random.default_rng(3)
    tiles = np.zeros((50, *tile), dtype)
    hit = rng.random(50) < 0.4
    for k in np.flatnonzero(hit):
        tiles[k].flat[rng.integers(tiles[k].size)] = 1  # one voxel: the last byte read counts
    got = cp.asnumpy(_nonzero(cp.asarray(tiles)))
    np.testing.assert_array_equal(got.astype(bool), hit)
