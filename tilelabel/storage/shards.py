"""The zarr v3 sharding codec's layout, for chunks a device reads or writes as stored bytes.

A shard holds the encoded chunks of a block of chunks, one after another in any order, and an
index of ``(offset, size)`` per chunk (uint64, little-endian, the chunks in C order; both
``2**64 - 1`` for a chunk not stored) at the shard's end or start, with its crc32c after it where
the array's index codecs say so. Here: the index of a stored shard, and a shard made of frames.
Everything else a sharding codec may hold (nested shards, transposes, several compressors) is
left to zarr: :func:`layout` says None.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: an index entry's offset and size for a chunk not stored
EMPTY = np.uint64(2**64 - 1)


@dataclass(frozen=True)
class ShardLayout:
    """Where a shard's index is, and whether a crc32c follows it."""

    index_first: bool = False
    checksum: bool = True

    def index_bytes(self, chunks: int) -> int:
        return 16 * chunks + (4 if self.checksum else 0)


def layout(arr) -> ShardLayout | None:
    """The :class:`ShardLayout` of a sharded zarr v3 array whose shards hold plain chunks: the
    sharding codec alone on the array, little-endian bytes and one compressor inside it, its
    index as little-endian bytes (and a crc32c). None otherwise."""
    codecs = arr.metadata.codecs if arr.metadata.zarr_format == 3 else ()
    if len(codecs) != 1 or type(codecs[0]).__name__ != "ShardingCodec":
        return None
    sharding = codecs[0]
    names = [type(c).__name__ for c in sharding.codecs]
    if names[:1] != ["BytesCodec"] or len(names) != 2:
        return None
    index = [type(c).__name__ for c in sharding.index_codecs]
    if index not in (["BytesCodec"], ["BytesCodec", "Crc32cCodec"]):
        return None
    if any(
        _endian(c) not in ("little", "None") for c in (sharding.codecs[0], sharding.index_codecs[0])
    ):
        return None
    where = str(getattr(sharding.index_location, "value", sharding.index_location))
    return ShardLayout(index_first=where == "start", checksum=len(index) == 2)


def _endian(codec) -> str:
    return str(getattr(codec.endian, "value", codec.endian))


def chunks_in(data: np.ndarray, chunks: int, shard: ShardLayout) -> list[tuple[int, np.ndarray]]:
    """Each stored chunk of the shard ``data`` (uint8, as stored) as ``(its position in C order
    among the shard's ``chunks``, its bytes)``, views of ``data``. A ValueError where the index
    does not fit the shard or its crc32c does not match."""
    n = shard.index_bytes(chunks)
    if data.size < n:
        raise ValueError(f"a shard of {data.size} bytes is shorter than its index ({n} bytes)")
    raw = data[:n] if shard.index_first else data[data.size - n :]
    if shard.checksum:
        import google_crc32c

        stored = int.from_bytes(raw[-4:].tobytes(), "little")
        if google_crc32c.value(raw[:-4].tobytes()) != stored:
            raise ValueError("a shard's index does not match its crc32c")
    index = raw[: 16 * chunks].view("<u8").reshape(chunks, 2)
    found = []
    for k in np.flatnonzero(index[:, 0] != EMPTY).tolist():
        offset, size = int(index[k, 0]), int(index[k, 1])
        if offset + size > data.size:
            raise ValueError(f"chunk {k} of a shard lies past its {data.size} bytes")
        found.append((k, data[offset : offset + size]))
    return found


def assemble(frames: dict[int, memoryview], chunks: int, shard: ShardLayout) -> bytes:
    """The shard that holds ``frames`` (each chunk's bytes by its position in C order among the
    shard's ``chunks``; the others not stored), laid out as ``shard`` says."""
    index = np.full((chunks, 2), EMPTY, "<u8")
    offset = shard.index_bytes(chunks) if shard.index_first else 0
    order = sorted(frames)
    for k in order:
        size = len(frames[k])
        index[k] = (offset, size)
        offset += size
    head = index.tobytes()
    if shard.checksum:
        import google_crc32c

        head += int(google_crc32c.value(head)).to_bytes(4, "little")
    parts = [frames[k] for k in order]
    return b"".join([head, *parts] if shard.index_first else [*parts, head])
