"""zarr arrays in and out: opened with clear errors, created safely, read and written by tasks."""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zarr

from tilelabel.storage import loops, shards
from tilelabel.storage.errors import CorruptChunk, check_run
from tilelabel.validate import check_input

log = logging.getLogger("tilelabel")


def normalize_url(url: str) -> str:
    """Local paths become absolute real paths; URLs are kept (minus a trailing slash)."""
    url = os.fspath(url)
    if "://" in url and not url.startswith("file://"):
        return url.rstrip("/")
    path = url[len("file://") :] if url.startswith("file://") else url
    return os.path.realpath(os.path.expanduser(path))


def open_input(url: str, storage_options: dict | None = None) -> zarr.Array:
    """Open a zarr array (v2 or v3) for reading, or raise a ValueError that says what is wrong."""
    target = normalize_url(url)
    if "://" not in target and not os.path.exists(target):
        raise ValueError(f"input {url} does not exist")
    try:
        node = zarr.open(target, mode="r", storage_options=storage_options)
    except FileNotFoundError as e:
        if "://" not in target:  # the path exists (checked above) but holds no zarr metadata
            raise ValueError(f"input {url} is not a zarr array (no zarr metadata there)") from e
        raise ValueError(f"input {url} does not exist") from e
    except Exception as e:
        raise ValueError(f"input {url} is not a zarr array ({type(e).__name__}: {e})") from e
    if isinstance(node, zarr.Group):
        arrays = sorted(name for name, _ in node.arrays())
        hint = f"; it holds the arrays {', '.join(arrays)}" if arrays else ""
        raise ValueError(
            f"input {url} is a zarr group, not an array: give the path of an array inside it{hint}"
        )
    check_input(tuple(node.shape), node.dtype, what=f"input {url}")
    return node


def storage_chunks(arr: zarr.Array) -> tuple[int, ...]:
    """The unit a task may write without racing another: the shard if sharded, else the chunk."""
    return tuple(arr.shards or arr.chunks)


def create_output(
    dst: str,
    like: zarr.Array,
    dtype: np.dtype,
    attributes: dict[str, Any],
    overwrite: bool,
    storage_options: dict | None = None,
    lead: int = 0,
) -> zarr.Array:
    """Create the label array with the input's shape, chunks, shards, codecs and zarr format
    (less ``lead`` leading axes: an OME-Zarr image's selected time point and channel)."""
    kwargs: dict[str, Any] = {}
    if like.shards:
        kwargs["shards"] = like.shards[lead:]
    return zarr.create_array(
        normalize_url(dst),
        shape=like.shape[lead:],
        chunks=like.chunks[lead:],
        dtype=dtype,
        compressors=like.compressors,
        fill_value=0,
        zarr_format=like.metadata.zarr_format,
        attributes=attributes,
        overwrite=overwrite,
        storage_options=storage_options,
        **kwargs,
    )


def fill_value(arr: zarr.Array) -> np.generic | None:
    """The value of ``arr``'s chunks that are not stored, in its dtype; None where it is 0
    (background, which no task needs to read) or unset (zarr v2's None: :func:`stored_chunks`
    lists nothing then, and every chunk is read as zarr reads it)."""
    if arr.metadata.fill_value is None:
        return None
    fill = np.asarray(arr.metadata.fill_value, dtype=arr.dtype)[()]
    return None if fill == 0 else fill


def stored_chunks(arr: zarr.Array, lead: tuple[int, ...] = ()) -> np.ndarray | None:
    """The indices of ``arr``'s stored chunks (shards, in a sharded array) over its axes past
    the ``lead`` ones (an OME-Zarr image's selected time point and channel: only chunks that
    hold them), one row each, in raster order: a chunk not stored is all the fill value
    (:func:`fill_value`). None where the store cannot list its keys, or the array has no fill
    value (zarr v2's None)."""
    from zarr.core.sync import sync

    if arr.metadata.fill_value is None:
        return None

    store, prefix = arr.store_path.store, arr.store_path.path
    prefix = f"{prefix}/" if prefix else ""

    async def keys() -> list[str]:
        return [k async for k in store.list_prefix(prefix)]

    try:
        listed = sync(keys())
    except Exception as e:  # a store without listing: every chunk is read
        log.debug("cannot list the chunks of %s: %s", arr.store_path, e)
        return None
    encode, ndim = arr.metadata.encode_chunk_key, len(arr.shape)
    found = []
    for key in listed:
        rel = key[len(prefix) :]
        parts = re.split(r"[./]", rel)
        parts = parts[1:] if parts and parts[0] == "c" else parts
        if len(parts) != ndim or not all(p.isdigit() for p in parts):
            continue
        coords = tuple(int(p) for p in parts)
        if encode(coords) == rel:
            found.append(coords)
    out = np.array(sorted(found), np.int64).reshape(-1, ndim)
    grid = [-(-int(n) // int(u)) for n, u in zip(arr.shape, storage_chunks(arr), strict=True)]
    out = out[np.all(out < np.array(grid, np.int64), axis=1)]  # not a resized array's leftovers
    if lead:
        unit = storage_chunks(arr)[: len(lead)]
        held = np.all(out[:, : len(lead)] == np.array(lead) // np.array(unit), axis=1)
        out = out[held, len(lead) :]
    return out


@dataclass(frozen=True)
class RawChunks:
    """How a backend may read or write an array's chunks itself: each chunk (``tile``) is one
    ``codec`` frame of its C-ordered little-endian bytes, edge chunks padded with zeros, and an
    all-zero chunk is not stored (zarr reads it as the fill value, 0). In a sharded array
    (``shard``: the shard's shape) the chunks of a shard are stored together, as ``sharding``
    lays them out (:mod:`.shards`)."""

    codec: str
    tile: tuple[int, ...]
    shard: tuple[int, ...] | None = None
    sharding: shards.ShardLayout | None = None

    @property
    def unit(self) -> tuple[int, ...]:
        """What one store key holds: the shard, else the chunk."""
        return self.shard or self.tile

    def per_shard(self) -> tuple[int, ...]:
        """Chunks per shard along each axis."""
        return tuple(s // t for s, t in zip(self.unit, self.tile, strict=True))


#: zstd levels a device encoder may stand in for: nvCOMP compresses about as tightly as zstd's
#: fast levels, so an array asking for more (an archive's level 19) is left to zarr's encoder
RAW_ZSTD_MAX_LEVEL = 3


#: the compressors whose chunks a device may decode, by class name (zarr v3's own, and
#: numcodecs' for zarr v2 and ``numcodecs.zarr3``), as :class:`RawChunks` names them
RAW_DECODED = {
    "ZstdCodec": "zstd",
    "Zstd": "zstd",
    "GzipCodec": "gzip",
    "GZip": "gzip",
    "Zlib": "zlib",
    "LZ4": "lz4",
}


def raw_codec(arr: zarr.Array, decoding: bool = False) -> str | None:
    """The device codec of ``arr``'s compression (of its chunks inside its shards, where the
    shards hold plain chunks: :func:`.shards.layout`), or None where no device codec stands in
    for it (another codec or several, zstd with checksums, a big-endian host). For
    writing, zstd alone, at most at level :data:`RAW_ZSTD_MAX_LEVEL`: an output made like
    ``arr`` (:func:`create_output`, an OME label image) takes just this from it. For
    ``decoding``, any of :data:`RAW_DECODED` at any level: every level decodes alike."""
    import sys

    if sys.byteorder != "little" or len(arr.compressors) != 1:
        return None
    if arr.shards and shards.layout(arr) is None:
        return None
    (comp,) = arr.compressors
    codec = RAW_DECODED.get(type(comp).__name__)
    # zarr v3's ZstdCodec and numcodecs' Zstd (zarr v2) both carry level and checksum
    if codec is None or getattr(comp, "checksum", False):
        return None
    if decoding:
        return codec
    if codec != "zstd" or int(comp.level) > RAW_ZSTD_MAX_LEVEL:
        return None
    return codec


def raw_chunks(arr: zarr.Array, lead: int = 0, decoding: bool = False) -> RawChunks | None:
    """The :class:`RawChunks` layout of ``arr``'s last axes, past its first ``lead`` (an OME
    label image's t/c axes, where each chunk holds one position: its bytes are then those of
    its spatial tile), or None when its chunks are anything else (more than one position
    along a lead axis, filtered, big-endian, a nonzero fill value, Fortran order, or a
    compression of no :func:`raw_codec`)."""
    if any(int(c) != 1 for c in (arr.shards or arr.chunks)[:lead]) or arr.filters:
        return None
    if np.dtype(arr.dtype).byteorder == ">" or arr.metadata.fill_value != 0:
        return None
    if arr.metadata.zarr_format == 3:
        serializer = arr.serializer
        if type(serializer).__name__ != "BytesCodec" or str(
            getattr(serializer.endian, "value", serializer.endian)
        ) not in ("little", "None"):
            return None
    elif getattr(arr, "order", "C") != "C":
        return None
    codec = raw_codec(arr, decoding)
    if codec is None:
        return None
    tile = tuple(int(c) for c in arr.chunks[lead:])
    if not arr.shards:
        return RawChunks(codec, tile)
    shard = tuple(int(s) for s in arr.shards[lead:])
    return RawChunks(codec, tile, shard, shards.layout(arr))


@dataclass(frozen=True)
class RawBlock:
    """A block of an array as its compressed storage chunks (layout ``layout``, see
    :class:`RawChunks`), for a device to decode: ``tiles`` maps each stored chunk's index within
    the block to its bytes (a uint8 array); chunks not stored are all zero. ``shape``: the
    block's."""

    layout: RawChunks
    dtype: np.dtype
    shape: tuple[int, ...]
    tiles: dict[tuple[int, ...], np.ndarray]


def _tile_origin(slices: tuple[slice, ...], tile: tuple[int, ...]) -> list[int] | None:
    """The chunk index of a block's first chunk, or None where it does not start on one."""
    first = []
    for s, t in zip(slices, tile, strict=True):
        if s.start % t:
            return None
        first.append(s.start // t)
    return first


@dataclass(frozen=True)
class ZarrSource:
    """Picklable reader of blocks of a zarr array.

    It opens the array in each task (a small metadata read) rather than caching it per process,
    so a worker never reads through stale metadata of an array that was since replaced.
    """

    url: str
    storage_options: dict | None = field(default=None, hash=False, compare=False)
    #: fixed leading indices (an OME-Zarr image's time point and channel): only they are read
    index: tuple[int, ...] = ()

    def __call__(self, slices: tuple[slice, ...]) -> np.ndarray:
        selection = self.index + tuple(slices)
        try:
            return self._read(selection)
        except (OSError, MemoryError):
            raise
        except Exception as e:  # a codec's error, which names no chunk
            raise self._which(selection, e) from e

    def _read(self, selection: tuple) -> np.ndarray:
        if loops.here(self.url):
            return loops.run_here(loops.read(self.url, selection))
        arr = zarr.open_array(self.url, mode="r", storage_options=self.storage_options)
        return np.asarray(arr[selection])

    def raw(self, slices: tuple[slice, ...], decodes: Callable[[str], bool]) -> RawBlock | None:
        """The block at ``slices`` as its compressed chunks, read as stored, where the array's
        chunks are single frames of a codec that ``decodes`` (:func:`raw_chunks`) and the
        block starts on a chunk; else None (read it through zarr: call this source)."""
        arr = zarr.open_array(self.url, mode="r", storage_options=self.storage_options)
        layout = raw_chunks(arr, len(self.index), decoding=True)
        if layout is None or not decodes(layout.codec):
            return None
        first = _tile_origin(slices, layout.unit)
        if first is None:
            return None
        shape = tuple(s.stop - s.start for s in slices)
        grid = [-(-n // t) for n, t in zip(shape, layout.unit, strict=True)]
        idxs = list(np.ndindex(*grid))
        coords = [
            self.index + tuple(f + i for f, i in zip(first, idx, strict=True)) for idx in idxs
        ]
        found = loops.get_chunks(arr.store_path, arr.metadata.encode_chunk_key, coords)
        stored = {idx: data for idx, data in zip(idxs, found, strict=True) if data is not None}
        if layout.shard is None:
            return RawBlock(layout, np.dtype(arr.dtype), shape, stored)
        tiles, per = {}, layout.per_shard()
        inside = [-(-n // t) for n, t in zip(shape, layout.tile, strict=True)]
        for at, data in stored.items():
            try:
                held = shards.chunks_in(data, int(np.prod(per)), layout.sharding)
            except ValueError as e:
                key = arr.metadata.encode_chunk_key(coords[idxs.index(at)])
                raise CorruptChunk(f"shard {key} of {self.url}: {e}") from e
            for k, frame in held:
                idx = tuple(
                    a * p + i for a, p, i in zip(at, per, np.unravel_index(k, per), strict=True)
                )
                if all(i < n for i, n in zip(idx, inside, strict=True)):  # (edge shards)
                    tiles[idx] = frame
        return RawBlock(layout, np.dtype(arr.dtype), shape, tiles)

    def _which(self, selection: tuple, error: Exception) -> Exception:
        """A :class:`CorruptChunk` naming the first stored chunk (shard) within ``selection``
        that cannot be read on its own; ``error`` where each can."""
        arr = zarr.open_array(self.url, mode="r", storage_options=self.storage_options)
        unit, shape = storage_chunks(arr), tuple(arr.shape)
        ranges = []
        for sel, u, n in zip(selection, unit, shape, strict=True):
            start, stop = sel.indices(n)[:2] if isinstance(sel, slice) else (sel, sel + 1)
            ranges.append(range(start // u, -(-stop // u)))
        for coords in itertools.product(*ranges):
            box = tuple(
                slice(c * u, min((c + 1) * u, n))
                for c, u, n in zip(coords, unit, shape, strict=True)
            )
            try:
                self._read(box)
            except Exception as e:
                key = arr.metadata.encode_chunk_key(coords)
                return CorruptChunk(
                    f"input {self.url}: stored chunk {coords} (key {key!r}) cannot be read "
                    f"({type(e).__name__}: {e})"
                )
        return error


@dataclass(frozen=True)
class ZarrTarget:
    """Picklable writer of blocks into a zarr array (opened per task: the array is new each run)."""

    url: str
    storage_options: dict | None = field(default=None, hash=False, compare=False)
    #: fixed leading indices (the size-1 t/c axes of an OME-Zarr label image)
    index: tuple[int, ...] = ()
    #: set when a backend may hand over encoded chunks (:meth:`write_chunks`)
    raw: RawChunks | None = None
    #: the run whose output it is: every write checks the array's attributes still name it
    run: str | None = None

    def __call__(self, slices: tuple[slice, ...], data: np.ndarray) -> None:
        selection = self.index + tuple(slices)
        if loops.here(self.url):
            return loops.run_here(loops.write(self.url, selection, data, self.run))
        arr = zarr.open_array(self.url, mode="r+", storage_options=self.storage_options)
        check_run(arr, self.run)
        arr[selection] = data

    def write_chunks(
        self, slices: tuple[slice, ...], tiles: dict[tuple[int, ...], memoryview]
    ) -> None:
        """Store a block's encoded chunks as they are (layout :attr:`raw`): ``tiles`` maps a
        chunk's index within the block at ``slices`` to its bytes. The block starts on a chunk
        boundary (a shard's, in a sharded array: the plan aligns blocks to what a store key
        holds); chunks not in ``tiles`` are all zero and stay unwritten, as zarr leaves them,
        and so do shards of none. Along the :attr:`index` axes each chunk holds one position
        (see :func:`raw_chunks`), the one the index names."""
        raw = self.raw
        if raw is None:
            raise ValueError(f"{self.url}: chunks of this array are written through zarr")
        first = _tile_origin(slices, raw.unit)
        if first is None:
            raise ValueError(f"block {slices} does not start on a chunk of {raw.unit}")
        arr = zarr.open_array(self.url, mode="r+", storage_options=self.storage_options)
        check_run(arr, self.run)
        if raw.shard is not None:
            tiles = _into_shards(tiles, raw)
        items = [
            (self.index + tuple(f + i for f, i in zip(first, idx, strict=True)), data)
            for idx, data in tiles.items()
        ]
        loops.put_chunks(arr.store_path, arr.metadata.encode_chunk_key, items)


def _into_shards(
    tiles: dict[tuple[int, ...], memoryview], raw: RawChunks
) -> dict[tuple[int, ...], bytes]:
    """The shards (by index within the block) that hold the chunks ``tiles`` (by index within
    the block), laid out as ``raw`` says."""
    per = raw.per_shard()
    held: dict[tuple[int, ...], dict[int, memoryview]] = {}
    for idx, data in tiles.items():
        at = tuple(i // p for i, p in zip(idx, per, strict=True))
        k = int(np.ravel_multi_index(tuple(i % p for i, p in zip(idx, per, strict=True)), per))
        held.setdefault(at, {})[k] = data
    n = int(np.prod(per))
    return {at: shards.assemble(frames, n, raw.sharding) for at, frames in held.items()}
