"""The zarr v3 sharding layout, read and written as stored bytes."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from tilelabel.storage import shards


@pytest.mark.parametrize("index_first", [False, True])
@pytest.mark.parametrize("checksum", [True, False])
def test_a_shard_gives_back_the_frames_it_was_made_of(index_first, checksum):
    layout = shards.ShardLayout(index_first=index_first, checksum=checksum)
    rng = np.random.default_rng(1)
    frames = {k: memoryview(rng.bytes(int(rng.integers(1, 50)))) for k in (0, 3, 4, 7)}
    data = np.frombuffer(shards.assemble(frames, 8, layout), np.uint8)
    assert data.size == sum(len(f) for f in frames.values()) + layout.index_bytes(8)
    found = shards.chunks_in(data, 8, layout)
    assert [k for k, _ in found] == [0, 3, 4, 7]  # the chunks not stored are left out
    for k, frame in found:
        assert frame.tobytes() == bytes(frames[k])


def test_a_shard_zarr_wrote_is_read_and_one_made_here_reads_in_zarr(tmp_path):
    """Both ways against zarr's own sharding codec (its default layout: index at the end, with
    a crc32c): zarr's shard parsed here holds zarr's chunks, and a shard made here of zarr's
    frames reads back through zarr."""
    import numcodecs

    arr = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=(8, 12), chunks=(4, 4), shards=(8, 12), dtype="u2"
    )
    img = np.arange(96, dtype=np.uint16).reshape(8, 12)
    img[4:, 4:8] = 0  # a chunk zarr leaves out
    arr[...] = img
    layout = shards.layout(arr)
    assert layout == shards.ShardLayout(index_first=False, checksum=True)
    stored = (tmp_path / "a.zarr" / "c" / "0" / "0").read_bytes()
    found = dict(shards.chunks_in(np.frombuffer(stored, np.uint8), 6, layout))
    assert sorted(found) == [0, 1, 2, 3, 5]
    zstd = numcodecs.Zstd()
    for k, frame in found.items():
        r, c = divmod(k, 3)
        tile = np.frombuffer(zstd.decode(frame), np.uint16).reshape(4, 4)
        np.testing.assert_array_equal(tile, img[4 * r : 4 * r + 4, 4 * c : 4 * c + 4])
    made = shards.assemble({k: memoryview(f.tobytes()) for k, f in found.items()}, 6, layout)
    (tmp_path / "a.zarr" / "c" / "0" / "0").write_bytes(made)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"))[...], img)


@pytest.mark.filterwarnings("ignore:Combining a `sharding_indexed` codec")
def test_shards_of_other_codecs_are_left_to_zarr(tmp_path):
    from zarr.codecs import BloscCodec, BytesCodec, ShardingCodec, TransposeCodec, ZstdCodec

    def make(name, codecs):
        return zarr.create(
            shape=(8, 8),
            chunks=(8, 8),
            dtype="u2",
            store=str(tmp_path / name),
            zarr_format=3,
            codecs=codecs,
        )

    inner = [BytesCodec(), ZstdCodec()]
    assert shards.layout(make("plain", [ShardingCodec(chunk_shape=(4, 4), codecs=inner)]))
    nested = ShardingCodec(chunk_shape=(4, 4), codecs=[ShardingCodec(chunk_shape=(2, 2))])
    two = ShardingCodec(chunk_shape=(4, 4), codecs=[BytesCodec(), ZstdCodec(), BloscCodec()])
    moved = [TransposeCodec(order=(1, 0)), ShardingCodec(chunk_shape=(4, 4), codecs=inner)]
    for name, codecs in (("nested", [nested]), ("two", [two]), ("moved", moved)):
        assert shards.layout(make(name, codecs)) is None, name
    assert shards.layout(zarr.create_array(str(tmp_path / "u"), shape=(8,), dtype="u1")) is None


def test_a_shard_too_short_or_pointing_past_its_end_is_refused():
    layout = shards.ShardLayout(checksum=False)
    with pytest.raises(ValueError, match="shorter than its index"):
        shards.chunks_in(np.zeros(10, np.uint8), 2, layout)
    data = bytearray(shards.assemble({0: memoryview(b"abcd")}, 2, layout))
    start = len(data) - layout.index_bytes(2)  # the index, at the end
    data[start : start + 8] = (100).to_bytes(8, "little")  # chunk 0 starts past the shard
    with pytest.raises(ValueError, match="past its"):
        shards.chunks_in(np.frombuffer(bytes(data), np.uint8), 2, layout)
