"""zarr input and output: opening with clear errors, picklable readers/writers, safe creation."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zarr

from tilelabel.cores import usable_cores
from tilelabel.validate import check_input


def normalize_url(url: str) -> str:
    """Local paths become absolute real paths; URLs are kept (minus a trailing slash)."""
    url = os.fspath(url)
    if "://" in url and not url.startswith("file://"):
        return url.rstrip("/")
    path = url[len("file://") :] if url.startswith("file://") else url
    return os.path.realpath(os.path.expanduser(path))


def _exists(url: str) -> bool:
    if "://" not in url:
        return os.path.exists(url)
    try:
        zarr.open(url, mode="r")
        return True
    except Exception:
        return False


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


def check_output(dst: str, src: str, overwrite: bool) -> None:
    """Refuse an output equal to the input, or existing without ``overwrite``, before any work."""
    if normalize_url(dst) == normalize_url(src):
        raise ValueError(f"output {dst} is the input; write the labels to another array")
    if _exists(normalize_url(dst)) and not overwrite:
        raise ValueError(
            f"output {dst} already exists; pass overwrite=True (--overwrite) to replace it"
        )


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


def remove(url: str, storage_options: dict | None = None) -> None:
    """Delete an output that did not complete, so that nothing half-written is left behind."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(normalize_url(url), **(storage_options or {}))
    if fs.exists(path):
        fs.rm(path, recursive=True)


@dataclass(frozen=True)
class RawChunks:
    """How a backend may write an array's chunks itself: each storage chunk (``tile``) is one
    ``codec`` frame of its C-ordered little-endian bytes, edge chunks padded with zeros, and an
    all-zero chunk is not stored (zarr reads it as the fill value, 0)."""

    codec: str
    tile: tuple[int, ...]


#: zstd levels a device encoder may stand in for: nvCOMP compresses about as tightly as zstd's
#: fast levels, so an array asking for more (an archive's level 19) is left to zarr's encoder
RAW_ZSTD_MAX_LEVEL = 3


def raw_codec(arr: zarr.Array) -> str | None:
    """The device codec of ``arr``'s compression ("zstd"), or None where no device encoder
    stands in for it (sharded, another codec or several, a zstd level above
    :data:`RAW_ZSTD_MAX_LEVEL` or with checksums, a big-endian host). An output made like
    ``arr`` (:func:`create_output`, an OME label image) takes just these from it."""
    import sys

    if sys.byteorder != "little" or arr.shards or len(arr.compressors) != 1:
        return None
    (comp,) = arr.compressors
    # zarr v3's ZstdCodec and numcodecs' Zstd (zarr v2) both carry level and checksum
    if type(comp).__name__ not in ("ZstdCodec", "Zstd"):
        return None
    if getattr(comp, "checksum", False) or int(comp.level) > RAW_ZSTD_MAX_LEVEL:
        return None
    return "zstd"


def raw_chunks(arr: zarr.Array, lead: int = 0) -> RawChunks | None:
    """The :class:`RawChunks` layout of ``arr``'s last axes, past its first ``lead`` (an OME
    label image's t/c axes, where each chunk holds one position: its bytes are then those of
    its spatial tile), or None when its chunks are anything else (more than one position
    along a lead axis, filtered, big-endian, a nonzero fill value, Fortran order, or a
    compression of no :func:`raw_codec`)."""
    if any(int(c) != 1 for c in arr.chunks[:lead]) or arr.filters:
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
    codec = raw_codec(arr)
    return None if codec is None else RawChunks(codec, tuple(int(c) for c in arr.chunks[lead:]))


_thread = threading.local()
_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()


def codec_threads() -> int:
    """Threads of a process's codec pool (decoding, encoding and file I/O of every task in it):
    ``TILELABEL_CODEC_THREADS`` if set, else one per core this process may run on (its CPU
    affinity: a Slurm job's cores, not the node's). Many worker processes on one node each start
    such a pool; the variable lets them share the cores instead of each taking all."""
    value = os.environ.get("TILELABEL_CODEC_THREADS", "")
    if value.strip():
        n = int(value)
        if n < 1:
            raise ValueError(f"TILELABEL_CODEC_THREADS must be >= 1, got {value!r}")
        return n
    return usable_cores()


def codec_nice() -> int:
    """How much lower than the worker's other threads a codec thread runs (``nice`` steps):
    ``TILELABEL_CODEC_NICE`` if set, else 10.

    A node's worker processes each start a pool of one codec thread per core, so in the writing
    pass the cores run many times as many codec threads as they have. At equal priority the
    few threads that keep the rest going, a worker's event loop (the merge's chain of small
    tasks waits on it) and the thread that drives its GPU, get only their share of a core
    among them. Lowered, the codec threads still take every core nobody else wants."""
    value = os.environ.get("TILELABEL_CODEC_NICE", "")
    n = int(value) if value.strip() else 10
    if not 0 <= n <= 39:
        raise ValueError(f"TILELABEL_CODEC_NICE must be in 0..39, got {value!r}")
    return n


def lower_priority(by: int) -> None:
    """Raise the calling thread's niceness by ``by`` (on Linux each thread has its own; an
    unprivileged process may always lower its own priority). Nothing where that is not so."""
    if by <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
    except OSError:
        pass


class _SharedCodecPool(ThreadPoolExecutor):
    """The default executor of every thread's loop: it hands codec work to one process-wide
    pool, and ignores shutdown, which a loop's close (its thread ending) would otherwise send
    to the pool that every other thread's loop is using."""

    def __init__(self):
        super().__init__(max_workers=1)  # never starts a thread of its own

    def submit(self, fn, /, *args, **kwargs):
        # every codec call of every thread comes through here: the lock is for the first only
        if not _pool:
            with _pool_lock:
                if not _pool:
                    _pool.append(
                        ThreadPoolExecutor(
                            codec_threads(),
                            "tilelabel-codec",
                            initializer=lower_priority,
                            initargs=(codec_nice(),),
                        )
                    )
        return _pool[0].submit(fn, *args, **kwargs)

    def shutdown(self, wait=True, *, cancel_futures=False):
        pass


def _own_loop_ok(url: str) -> bool:
    """A local store, and no event loop already running in this thread (a notebook's)."""
    if "://" in url:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def _run_here(coro):
    """Run a zarr coroutine on this thread's own event loop.

    zarr's synchronous API hands the reads and writes of every thread to one event-loop thread,
    and that thread does each chunk's assembly copies and emptiness checks itself: a worker
    with several threads (a GPU worker) then waits on it in turn. A loop per thread does that
    work in the thread that asked for it; codecs still run in a shared pool. Used for local
    stores only: fsspec's async filesystems are bound to their own loop.
    """
    loop = getattr(_thread, "loop", None)
    if loop is None:
        loop = _thread.loop = asyncio.new_event_loop()
        loop.set_default_executor(_SharedCodecPool())
    return loop.run_until_complete(coro)


async def _read(url: str, selection: tuple) -> np.ndarray:
    from zarr.api.asynchronous import open_array

    arr = await open_array(store=url, mode="r")
    return np.asarray(await arr.getitem(selection))


async def _write(url: str, selection: tuple, data: np.ndarray) -> None:
    from zarr.api.asynchronous import open_array

    arr = await open_array(store=url, mode="r+")
    await arr.setitem(selection, data)


async def _put_chunks(store_path, encode_key, items) -> None:
    """Store each ``(chunk coordinates, bytes)`` of ``items`` under its chunk key."""
    from zarr.core.buffer import default_buffer_prototype

    make = default_buffer_prototype().buffer.from_bytes
    await asyncio.gather(
        *((store_path / encode_key(coords)).set(make(bytes(data))) for coords, data in items)
    )


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
        if _own_loop_ok(self.url):
            return _run_here(_read(self.url, selection))
        arr = zarr.open_array(self.url, mode="r", storage_options=self.storage_options)
        return np.asarray(arr[selection])


@dataclass(frozen=True)
class ZarrTarget:
    """Picklable writer of blocks into a zarr array (opened per task: the array is new each run)."""

    url: str
    storage_options: dict | None = field(default=None, hash=False, compare=False)
    #: fixed leading indices (the size-1 t/c axes of an OME-Zarr label image)
    index: tuple[int, ...] = ()
    #: set when a backend may hand over encoded chunks (:meth:`write_chunks`)
    raw: RawChunks | None = None

    def __call__(self, slices: tuple[slice, ...], data: np.ndarray) -> None:
        selection = self.index + tuple(slices)
        if _own_loop_ok(self.url):
            return _run_here(_write(self.url, selection, data))
        arr = zarr.open_array(self.url, mode="r+", storage_options=self.storage_options)
        arr[selection] = data

    def write_chunks(
        self, slices: tuple[slice, ...], tiles: dict[tuple[int, ...], memoryview]
    ) -> None:
        """Store a block's encoded chunks as they are (layout :attr:`raw`): ``tiles`` maps a
        chunk's index within the block at ``slices`` to its bytes. The block starts on a chunk
        boundary (the plan aligns blocks to storage chunks); chunks not in ``tiles`` are all
        zero and stay unwritten, as zarr leaves them. Along the :attr:`index` axes each chunk
        holds one position (see :func:`raw_chunks`), the one the index names."""
        if self.raw is None:
            raise ValueError(f"{self.url}: chunks of this array are written through zarr")
        tile = self.raw.tile
        first = []
        for s, t in zip(slices, tile, strict=True):
            if s.start % t:
                raise ValueError(f"block {slices} does not start on a chunk of {tile}")
            first.append(s.start // t)
        arr = zarr.open_array(self.url, mode="r+", storage_options=self.storage_options)
        items = [
            (self.index + tuple(f + i for f, i in zip(first, idx, strict=True)), data)
            for idx, data in tiles.items()
        ]
        coro = _put_chunks(arr.store_path, arr.metadata.encode_chunk_key, items)
        if _own_loop_ok(self.url):
            return _run_here(coro)
        from zarr.core.sync import sync

        sync(coro)
