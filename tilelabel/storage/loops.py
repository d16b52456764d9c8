"""Reading and writing local zarr stores on the calling thread, codecs in one pool per process.

zarr's synchronous API hands the reads and writes of every thread to one event-loop thread, which
also does each chunk's assembly copies and emptiness checks: a worker with several threads would
wait on it in turn. Here each thread runs zarr's coroutines on an event loop of its own, and every
loop hands its codec work to one process-wide pool (sized by
:mod:`tilelabel.settings`). Local stores only: fsspec's async filesystems are bound to their own
loop.

Chunks moved as stored bytes (:func:`get_chunks`, :func:`put_chunks`) skip the loop where the
store is local: each is one file (zarr's ``LocalStore`` keeps a key at that path under its root),
and the codec pool reads or writes a block's files in one job per thread, each over a run of
them (side by side, as a parallel file system wants). Through the loop, each file would be a
task and a pool job, whose bookkeeping holds the GIL longer than the read.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from tilelabel import settings
from tilelabel.storage.errors import check_run

_thread = threading.local()
#: the process's codec pool and its thread count, once made
_pool: list[tuple[ThreadPoolExecutor, int]] = []
_pool_lock = threading.Lock()


def _codec() -> tuple[ThreadPoolExecutor, int]:
    """The process's codec pool, of ``codec.threads`` threads, made on first use, and its size."""
    # every codec call of every thread comes through here: the lock is for the first only
    if not _pool:
        with _pool_lock:
            if not _pool:
                threads = settings.codec_threads()
                _pool.append((ThreadPoolExecutor(threads, "tilelabel-codec"), threads))
    return _pool[0]


class _SharedCodecPool(ThreadPoolExecutor):
    """The default executor of every thread's loop: it hands codec work to one process-wide
    pool, and ignores shutdown, which a loop's close (its thread ending) would otherwise send
    to the pool that every other thread's loop is using. It knows which of its jobs are still
    to finish (:meth:`settle`)."""

    def __init__(self):
        super().__init__(max_workers=1)  # never starts a thread of its own
        self._jobs: set[Future] = set()
        self._jobs_lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        job = _codec()[0].submit(fn, *args, **kwargs)
        with self._jobs_lock:
            self._jobs.add(job)
        job.add_done_callback(self._done)
        return job

    def _done(self, job: Future) -> None:
        with self._jobs_lock:
            self._jobs.discard(job)

    def settle(self) -> None:
        """Until every job handed over from this loop has ended (a file write cannot be called
        back once it runs)."""
        with self._jobs_lock:
            jobs = list(self._jobs)
        wait(jobs)

    def shutdown(self, wait=True, *, cancel_futures=False):
        pass


def here(url: str) -> bool:
    """Whether ``url``'s reads and writes run on this thread's loop: a local store, and no event
    loop already running in this thread (a notebook's)."""
    if "://" in url:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def run_here(coro):
    """Run a zarr coroutine on this thread's own event loop (see the module's docstring).

    Nothing of it outlives the call: where it fails (a chunk that cannot be written, a full
    disk), zarr's other reads and writes of the call are cancelled and what they handed to the
    codec pool is waited for, so that no write of a failed task lands later."""
    loop = getattr(_thread, "loop", None)
    if loop is None:
        loop = _thread.loop = asyncio.new_event_loop()
        _thread.pool = _SharedCodecPool()
        loop.set_default_executor(_thread.pool)
    try:
        return loop.run_until_complete(coro)
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        _thread.pool.settle()


async def read(url: str, selection: tuple) -> np.ndarray:
    from zarr.api.asynchronous import open_array

    arr = await open_array(store=url, mode="r")
    return np.asarray(await arr.getitem(selection))


async def write(url: str, selection: tuple, data: np.ndarray, run: str | None = None) -> None:
    """Write ``data`` where the array's attributes still name ``run`` (None: anywhere)."""
    from zarr.api.asynchronous import open_array

    arr = await open_array(store=url, mode="r+")
    check_run(arr, run)
    await arr.setitem(selection, data)


def _directory(store_path) -> Path | None:
    """Where ``store_path`` (a zarr ``StorePath``) keeps its keys as files: a ``LocalStore``'s
    root joined with the path; None for any other store."""
    from zarr.storage import LocalStore

    if not isinstance(store_path.store, LocalStore):
        return None
    return Path(store_path.store.root, store_path.path)


def _in_runs(fn, items: list) -> list:
    """``fn`` of each of ``items``, in order, in one codec-pool job per pool thread, each over a
    run of the items. Every job has ended when this returns or raises: no file is written
    after a failed call."""
    # the pool's own size, counted once: the setting reads the cgroup's files each time
    pool, threads = _codec()
    size = -(-len(items) // threads) or 1
    runs = [items[i : i + size] for i in range(0, len(items), size)]
    jobs = [pool.submit(lambda run: [fn(x) for x in run], run) for run in runs]
    wait(jobs)
    return [y for job in jobs for y in job.result()]


def _write_file(item: tuple[Path, Any]) -> None:
    """Write whole under a temporary name, then rename, as zarr's ``LocalStore`` does."""
    path, data = item
    partial = path.with_name(f"{path.name}.{uuid.uuid4().hex}.partial")
    try:
        with open(partial, "wb") as f:
            f.write(data)
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _read_file(path: Path) -> np.ndarray | None:
    try:
        return np.frombuffer(path.read_bytes(), np.uint8)
    except FileNotFoundError:
        return None


def put_chunks(store_path, encode_key, items) -> None:
    """Store each ``(chunk coordinates, bytes-like)`` of ``items`` under its chunk key, without
    copying the bytes (a copy here would hold the GIL). A store other than a local one is
    remote (an fsspec URL), whose calls run on zarr's own loop."""
    root = _directory(store_path)
    if root is None:
        from zarr.core.sync import sync

        return sync(_put_chunks(store_path, encode_key, items))
    files = [(root / encode_key(coords), data) for coords, data in items]
    for folder in {path.parent for path, _ in files}:
        folder.mkdir(parents=True, exist_ok=True)
    _in_runs(_write_file, files)


def get_chunks(store_path, encode_key, coords) -> list[np.ndarray | None]:
    """The stored bytes of the chunk at each of ``coords``, as uint8 arrays (None: not
    stored), read as :func:`put_chunks` writes them."""
    root = _directory(store_path)
    if root is None:
        from zarr.core.sync import sync

        return sync(_get_chunks(store_path, encode_key, coords))
    return _in_runs(_read_file, [root / encode_key(c) for c in coords])


async def _put_chunks(store_path, encode_key, items) -> None:
    from zarr.core.buffer import default_buffer_prototype

    make = default_buffer_prototype().buffer.from_bytes
    await asyncio.gather(
        *((store_path / encode_key(coords)).set(make(data)) for coords, data in items)
    )


async def _get_chunks(store_path, encode_key, coords) -> list[np.ndarray | None]:
    from zarr.core.buffer import default_buffer_prototype

    proto = default_buffer_prototype()
    found = await asyncio.gather(*((store_path / encode_key(c)).get(proto) for c in coords))
    return [None if b is None else b.as_numpy_array() for b in found]
