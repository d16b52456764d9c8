"""zarr reader and writer of the pipeline's tasks: per-thread event loops for local stores."""

from __future__ import annotations

import asyncio
import gc
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from tilelabel.storage.arrays import ZarrSource, ZarrTarget


def _blocks(shape, size):
    return [
        (slice(z, z + size), slice(y, y + size), slice(0, shape[2]))
        for z in range(0, shape[0], size)
        for y in range(0, shape[1], size)
    ]


def test_threads_that_come_and_go_read_and_write(tmp_path):
    """Each round's threads end and their loops are collected; later rounds still work (a
    closing loop must not shut down the codec pool the other loops share)."""
    rng = np.random.default_rng(0)
    data = rng.integers(0, 1000, (64, 64, 48), dtype=np.uint32)
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    zarr.create_array(src, shape=data.shape, chunks=(16, 16, 16), dtype=data.dtype)[:] = data
    zarr.create_array(dst, shape=data.shape, chunks=(16, 16, 16), dtype=np.uint64)
    source, target = ZarrSource(src), ZarrTarget(dst)
    blocks = _blocks(data.shape, 32)

    def copy_twice(sl):
        target(sl, source(sl).astype(np.uint64) * 2)

    for _ in range(3):
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(copy_twice, blocks))
        gc.collect()
    np.testing.assert_array_equal(zarr.open_array(dst)[...], data.astype(np.uint64) * 2)


def test_inside_a_running_event_loop(tmp_path):
    """Called from a thread whose event loop is running (a notebook's), it uses zarr's own."""
    data = np.arange(4096, dtype=np.uint16).reshape(16, 16, 16)
    src, dst = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    zarr.create_array(src, shape=data.shape, chunks=(8, 8, 8), dtype=data.dtype)[:] = data
    zarr.create_array(dst, shape=data.shape, chunks=(8, 8, 8), dtype=data.dtype)
    sl = (slice(0, 8), slice(8, 16), slice(None))

    async def inside():
        ZarrTarget(dst)(sl, ZarrSource(src)(sl))

    asyncio.run(inside())
    out = zarr.open_array(dst)[...]
    np.testing.assert_array_equal(out[sl], data[sl])
    assert not out[:8, :8].any()


@pytest.mark.parametrize(
    "kwargs, raw",
    [
        ({}, True),  # zarr v3's default: bytes + zstd level 0
        ({"zarr_format": 2}, True),  # zarr v2's default in zarr 3: Zstd level 0
        ({"compressors": zarr.codecs.ZstdCodec(level=3)}, True),
        ({"compressors": zarr.codecs.ZstdCodec(level=9)}, False),
        ({"compressors": zarr.codecs.ZstdCodec(level=1, checksum=True)}, False),
        ({"compressors": zarr.codecs.BloscCodec()}, False),
        ({"compressors": None}, False),
        ({"shards": (16, 16)}, True),  # chunks inside zarr's default shards
        ({"shards": (16, 16), "compressors": zarr.codecs.BloscCodec()}, False),
        ({"fill_value": 7}, False),
        ({"serializer": zarr.codecs.BytesCodec(endian="big")}, False),
    ],
)
def test_raw_chunks_only_for_plain_zstd(tmp_path, kwargs, raw):
    from tilelabel.storage import shards
    from tilelabel.storage.arrays import RawChunks, raw_chunks

    kwargs = {"fill_value": 0, **kwargs}
    arr = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=(32, 32), chunks=(8, 16), dtype="u4", **kwargs
    )
    if not raw:
        assert raw_chunks(arr) is None
    elif arr.shards:
        layout = shards.ShardLayout(index_first=False, checksum=True)
        assert raw_chunks(arr) == RawChunks("zstd", (8, 16), (16, 16), layout)
    else:
        assert raw_chunks(arr) == RawChunks("zstd", (8, 16))


def test_raw_codec_is_the_compression_alone(tmp_path):
    """What an output made like an input takes from it: an input whose own chunks no device
    writes (no fill value, a filter) still has a device codec for its output's."""
    import numcodecs

    from tilelabel.storage.arrays import raw_chunks, raw_codec

    kwargs = dict(shape=(32, 32), chunks=(8, 16), dtype="u1", zarr_format=2)
    zstd = numcodecs.Zstd(level=1)
    for name, extra in (
        ("nofill", {"fill_value": None}),
        ("delta", {"filters": [numcodecs.Delta("u1")]}),
    ):
        arr = zarr.create_array(str(tmp_path / f"{name}.zarr"), compressors=zstd, **kwargs, **extra)
        assert raw_codec(arr) == "zstd" and raw_chunks(arr) is None
    blosc = zarr.create_array(
        str(tmp_path / "blosc.zarr"), compressors=numcodecs.Blosc(), fill_value=0, **kwargs
    )
    assert raw_codec(blosc) is None


@pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr version 3")
def test_raw_codec_names_what_a_device_decodes_and_writes(tmp_path):
    """Inputs in zstd, gzip, zlib or LZ4 (zarr v2's numcodecs; v3's own, and numcodecs' LZ4) are
    read as stored for a device to decode, in shards or not; only fast zstd is written by one.
    Blosc and zstd with checksums are left to zarr."""
    import numcodecs
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec
    from zarr.codecs.numcodecs import LZ4

    from tilelabel.storage.arrays import raw_codec

    cases = [  # (format, compressor, decoded, written)
        (2, numcodecs.Zstd(level=1), "zstd", "zstd"),
        (2, numcodecs.Zstd(level=19), "zstd", None),
        (2, numcodecs.Zstd(level=1, checksum=True), None, None),
        (2, numcodecs.GZip(), "gzip", None),
        (2, numcodecs.Zlib(), "zlib", None),
        (2, numcodecs.LZ4(), "lz4", None),
        (2, numcodecs.Blosc(), None, None),
        (3, ZstdCodec(), "zstd", "zstd"),
        (3, GzipCodec(), "gzip", None),
        (3, LZ4(), "lz4", None),
        (3, BloscCodec(), None, None),
    ]
    for k, (fmt, comp, decoded, written) in enumerate(cases):
        arr = zarr.create_array(
            str(tmp_path / f"{k}.zarr"), shape=(8,), dtype="u1", zarr_format=fmt, compressors=comp
        )
        assert (raw_codec(arr, decoding=True), raw_codec(arr)) == (decoded, written), comp
    sharded = zarr.create_array(
        str(tmp_path / "s.zarr"), shape=(8,), chunks=(2,), shards=(4,), dtype="u1"
    )
    assert raw_codec(sharded, decoding=True) == raw_codec(sharded) == "zstd"


def _frames(data: np.ndarray, tile, zstd=None) -> dict[tuple[int, ...], memoryview]:
    """``data``'s non-zero tiles in zstd (numcodecs' ``zstd``, default level), keyed by their
    index, as a device encoder hands them."""
    import numcodecs

    from tilelabel.kernels.cuda.tiles import tile_slabs

    zstd, frames = zstd or numcodecs.Zstd(), {}
    for indices, tiles, nonzero in tile_slabs(data, tile, np):
        frames.update(
            (idx, memoryview(zstd.encode(tiles[k]))) for k, idx in enumerate(indices) if nonzero[k]
        )
    return frames


@pytest.mark.parametrize("lead", [0, 2])
@pytest.mark.parametrize("zarr_format", [2, 3, "shards"])
def test_write_chunks_reads_back_through_zarr(tmp_path, zarr_format, lead):
    """Blocks handed over as encoded tiles (numcodecs' zstd standing in for a device encoder)
    read back through zarr as the blocks, edge chunks and all; all-zero chunks stay unstored,
    and so do shards of them (in a sharded array the tiles go into shards with their index).
    With ``lead`` axes of one position per chunk in front (an OME label image's t/c), the
    tiles go to the position the target's index names."""
    import numcodecs

    from tilelabel.storage import shards
    from tilelabel.storage.arrays import RawChunks, raw_chunks

    sharded = zarr_format == "shards"
    zarr_format = 3 if sharded else zarr_format
    rng = np.random.default_rng(zarr_format)
    data = rng.integers(0, 1 << 20, (40, 37, 29), dtype=np.uint32)
    data[:16] = 0  # whole chunks (shards) of zeros
    # inside a group, as an OME label image or a user's hierarchy puts it
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=zarr_format)
    zstd = numcodecs.Zstd(level=0)
    codec = zstd if zarr_format == 2 else zarr.codecs.ZstdCodec(level=0)
    index = (1, 0)[:lead]
    kw = {"shards": (1,) * lead + (16, 18, 30)} if sharded else {}
    arr = group.create_array(
        "labels/x",
        shape=(2, 1)[:lead] + data.shape,
        chunks=(1,) * lead + (8, 9, 10),
        dtype="u4",
        compressors=codec,
        **kw,
    )
    raw = raw_chunks(arr, lead)
    if sharded:
        layout = shards.ShardLayout(index_first=False, checksum=True)
        assert raw == RawChunks("zstd", (8, 9, 10), (16, 18, 30), layout)
    else:
        assert raw == RawChunks("zstd", (8, 9, 10))
    if lead:  # chunks of more than one position along a lead axis: through zarr
        more = group.create_array("y", shape=(2, 4, 4), chunks=(2, 4, 4), dtype="u4")
        assert raw_chunks(more, 1) is None
    target = ZarrTarget(str(tmp_path / "g.zarr" / "labels" / "x"), index=index, raw=raw)
    for z0 in range(0, 40, 16):
        for y0 in range(0, 37, 18):
            slices = (slice(z0, z0 + 16), slice(y0, y0 + 18), slice(0, 29))
            target.write_chunks(slices, _frames(data[slices], raw.tile, zstd))
    out = zarr.open_array(target.url)[...]
    np.testing.assert_array_equal(out[index], data)
    if lead:  # the other time point is left unwritten
        assert not out[0].any()
    root = tmp_path / "g.zarr" / "labels" / "x"
    stored = [
        os.path.relpath(os.path.join(d, f), root).removeprefix("c/").replace("/", ".")
        for d, _, files in os.walk(root)
        for f in files
        if not f.startswith(".") and f != "zarr.json"
    ]
    # zarr's own chunk (shard) keys, and none of the all-zero first two chunk rows (shard row)
    assert {tuple(map(int, k.split(".")[:lead])) for k in stored} == {index}
    if sharded:
        assert {int(k.split(".")[lead]) for k in stored} == {1, 2}
        assert len(stored) == 2 * 3 * 1
    else:
        assert {int(k.split(".")[lead]) for k in stored} == {2, 3, 4}
        assert len(stored) == 3 * 5 * 3
    with pytest.raises(ValueError, match="does not start on a chunk"):
        target.write_chunks((slice(4, 12), slice(0, 9), slice(0, 10)), {})
    with pytest.raises(ValueError, match="written through zarr"):
        ZarrTarget(target.url).write_chunks(slices, {})


def _sharded(path, img, index_codecs, index_location):
    """``img`` in a zarr v3 array of 16x16x32 shards of 8x8x16 zstd chunks, its shard index
    where and as given."""
    from zarr.codecs import BytesCodec, ShardingCodec, ZstdCodec

    sharding = ShardingCodec(
        chunk_shape=(8, 8, 16),
        codecs=[BytesCodec(), ZstdCodec(level=5)],
        index_codecs=index_codecs,
        index_location=index_location,
    )
    arr = zarr.create(
        shape=img.shape,
        chunks=(16, 16, 32),
        dtype=img.dtype,
        store=str(path),
        fill_value=0,
        zarr_format=3,
        codecs=[sharding],
    )
    arr[...] = img
    return str(path)


def test_a_shard_whose_index_fails_its_checksum_names_it(tmp_path):
    from zarr.codecs import BytesCodec, Crc32cCodec

    from tilelabel.storage.errors import CorruptChunk

    img = np.ones((16, 16, 32), np.uint8)
    url = _sharded(tmp_path / "a.zarr", img, [BytesCodec(), Crc32cCodec()], "end")
    path = tmp_path / "a.zarr" / "c" / "0" / "0" / "0"
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # inside the index
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptChunk, match=r"shard c/0/0/0 of .*crc32c"):
        ZarrSource(url).raw((slice(0, 16), slice(0, 16), slice(0, 32)), bool)


@pytest.mark.parametrize("layout", ["v2", "v3", "shards", "shards-first-unchecked"])
def test_raw_blocks_hold_the_stored_frames_of_their_chunks(tmp_path, layout):
    """A source hands over a block's stored chunks as they are (any zstd level), keyed by their
    index in the block, unstored chunks left out, those inside shards as well (the index at
    either end, with a crc32c or not); blocks off the chunk (shard) grid, and arrays whose
    chunks are no single frame, are read through zarr instead (None)."""
    import numcodecs
    from zarr.codecs import BytesCodec, Crc32cCodec

    from tests.conftest import write_zarr

    img = (np.random.default_rng(1).random((37, 29, 40)) < 0.3).astype(np.uint16)
    img[:16] = 0
    img[16:32, 16:, 32:] = 0  # a shard of chunks not stored, inside stored shards
    if layout.startswith("shards"):
        first = layout == "shards-first-unchecked"
        index = [BytesCodec()] if first else [BytesCodec(), Crc32cCodec()]
        url = _sharded(tmp_path / "a.zarr", img, index, "start" if first else "end")
    else:
        zarr_format = 2 if layout == "v2" else 3
        kw = {"compressors": numcodecs.Zstd(level=9)} if zarr_format == 2 else {}
        url = write_zarr(
            tmp_path / "a.zarr", img, (8, 8, 16), zarr_format=zarr_format, fill_value=0, **kw
        )
    source = ZarrSource(url)
    zstd = numcodecs.Zstd()
    for block in [
        (slice(0, 16), slice(0, 16), slice(0, 32)),
        (slice(16, 37), slice(16, 29), slice(0, 40)),
    ]:
        raw = source.raw(block, lambda codec: codec == "zstd")
        assert raw.layout.tile == (8, 8, 16) and raw.dtype == img.dtype
        out = np.zeros(raw.shape, raw.dtype)
        for idx, frame in raw.tiles.items():
            tile = np.frombuffer(zstd.decode(frame), raw.dtype).reshape(raw.layout.tile)
            where = tuple(
                slice(i * t, min((i + 1) * t, n))
                for i, t, n in zip(idx, raw.layout.tile, raw.shape, strict=True)
            )
            out[where] = tile[tuple(slice(0, w.stop - w.start) for w in where)]
        np.testing.assert_array_equal(out, img[block])
    assert source.raw(block, lambda codec: False) is None  # the device decodes no zstd
    assert source.raw((slice(1, 9), slice(0, 8), slice(0, 16)), lambda codec: True) is None
    if layout.startswith("shards"):  # a block on the chunk grid but not the shard grid
        assert source.raw((slice(8, 16), slice(0, 16), slice(0, 32)), bool) is None
    blosc = zarr.create_array(
        str(tmp_path / "b.zarr"),
        shape=(8, 8),
        chunks=(4, 4),
        dtype="u1",
        compressors=zarr.codecs.BloscCodec(),
        zarr_format=3,
    )
    blosc[...] = 1
    assert ZarrSource(str(tmp_path / "b.zarr")).raw((slice(0, 4), slice(0, 4)), bool) is None


def test_stored_chunks_of_a_store_not_on_disk_go_through_zarr():
    """A store other than a local directory (memory://) takes and gives a block's stored chunks
    through zarr's own store calls, as those of a local one are taken and given as files."""
    import fsspec

    from tilelabel.storage.arrays import raw_chunks

    url = "memory://tilelabel-raw-chunks/a.zarr"
    try:
        data = np.random.default_rng(2).integers(0, 9, (16, 12), dtype=np.uint32)
        arr = zarr.create_array(url, shape=data.shape, chunks=(8, 6), dtype="u4", fill_value=0)
        block = (slice(0, 16), slice(0, 12))
        frames = _frames(data, (8, 6))
        ZarrTarget(url, raw=raw_chunks(arr)).write_chunks(block, frames)
        np.testing.assert_array_equal(zarr.open_array(url)[...], data)
        raw = ZarrSource(url).raw(block, lambda codec: codec == "zstd")
        assert {k: bytes(v) for k, v in raw.tiles.items()} == {
            k: bytes(v) for k, v in frames.items()
        }
    finally:
        fsspec.filesystem("memory").rm("/tilelabel-raw-chunks", recursive=True)


def test_a_chunk_that_cannot_be_written_leaves_no_partial_file(tmp_path):
    """A chunk file is written whole under a temporary name and then renamed, as zarr writes
    it: where the rename fails (here a folder holds the chunk's place) the error comes out once
    the block's other writes have ended, and no partial file stays behind."""
    from tilelabel.storage.arrays import raw_chunks

    url = str(tmp_path / "a.zarr")
    arr = zarr.create_array(url, shape=(16, 12), chunks=(8, 6), dtype="u4", fill_value=0)
    (tmp_path / "a.zarr" / "c" / "1" / "1" / "taken").mkdir(parents=True)
    data = np.ones((16, 12), np.uint32)
    with pytest.raises(OSError):
        ZarrTarget(url, raw=raw_chunks(arr)).write_chunks(
            (slice(0, 16), slice(0, 12)), _frames(data, (8, 6))
        )
    assert not [p for p in (tmp_path / "a.zarr").rglob("*") if ".partial" in p.name]
    # every other chunk is written: no write is left running when the error comes out
    out = zarr.open_array(url)[...]
    assert out[:8].all() and out[8:, :6].all() and not out[8:, 6:].any()


def test_stored_chunks_are_listed_from_the_store_not_the_grid(tmp_path):
    """The chunks a store holds, as grid indices in raster order, for zarr v2 and v3, sharded
    arrays (their shards), an OME-Zarr plane (only the chunks of the selected leading index);
    with another fill value too, which :func:`fill_value` gives (None where it is 0)."""
    from tilelabel.storage.arrays import fill_value, stored_chunks

    v3 = zarr.create_array(str(tmp_path / "v3.zarr"), shape=(40, 40), chunks=(10, 10), dtype="u1")
    v3[10:20, 30:40] = 1
    v3[0:10, 0:5] = 2
    np.testing.assert_array_equal(stored_chunks(v3), [[0, 0], [1, 3]])
    v2 = zarr.create_array(
        str(tmp_path / "v2.zarr"), shape=(40, 40), chunks=(10, 10), dtype="u1", zarr_format=2
    )
    v2[30:40, 10:20] = 1
    np.testing.assert_array_equal(stored_chunks(v2), [[3, 1]])
    sh = zarr.create_array(
        str(tmp_path / "sh.zarr"), shape=(40, 40), chunks=(10, 10), shards=(20, 20), dtype="u1"
    )
    sh[25, 5] = 1
    np.testing.assert_array_equal(stored_chunks(sh), [[1, 0]])
    tc = zarr.create_array(
        str(tmp_path / "tc.zarr"), shape=(3, 40, 40), chunks=(1, 10, 10), dtype="u1"
    )
    tc[2, 5, 35] = 1
    tc[0, 15, 5] = 1
    np.testing.assert_array_equal(stored_chunks(tc, (2,)), [[0, 3]])
    assert stored_chunks(tc, (1,)).shape == (0, 2)
    filled = zarr.create_array(
        str(tmp_path / "f.zarr"), shape=(40, 40), chunks=(10, 10), dtype="u1", fill_value=1
    )
    filled[35, 15] = 0
    np.testing.assert_array_equal(stored_chunks(filled), [[3, 1]])
    assert fill_value(filled) == 1 and fill_value(filled).dtype == np.uint8
    assert fill_value(v3) is None
    unset = zarr.create_array(
        str(tmp_path / "n.zarr"), shape=(4,), chunks=(2,), dtype="u1", zarr_format=2,
        fill_value=None,
    )  # fmt: skip
    assert stored_chunks(unset) is None and fill_value(unset) is None
