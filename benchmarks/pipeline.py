"""zarr -> zarr on one node: tilelabel (GPU and CPU), dask-image, and a plain zarr copy (I/O floor).

Same volume, storage chunks and codec for every method; input and output zarr on local disk.
Each method runs on a fresh cluster of its own kind, so that the peak memory per worker it
reports (host RSS high-water mark of each worker process; for GPU workers also CuPy's pool
high-water mark) belongs to that run alone. Each row also has the run's CPU seconds (user and
kernel, all workers and their threads) and minor page faults, taken as the run ends.

- ``copy``: read the uint8 chunks, write uint32 chunks with the same codec, through the same
  zarr reader and writer and processing chunks as tilelabel (CPU cluster of one single-threaded
  worker per core) -- what any zarr-to-zarr job of this shape must pay;
- ``copy-gpu``: the same copy on the GPU cluster (its worker and thread count, GPU processing
  chunks), the fair floor for the GPU pipeline;
- ``copy-dask`` / ``copy-dask-gpu``: the copy as a dask user writes it
  (``from_zarr().astype().store()``, zarr's synchronous API) on the CPU / GPU cluster;
- ``tilelabel-gpu``: ``label_zarr(backend="cuda")`` on a LocalCUDACluster (``--gpus`` workers);
- ``tilelabel-cpu``: ``label_zarr(backend="cpu")`` on the CPU cluster;
- ``tilelabel-gpu-keep`` / ``tilelabel-cpu-keep``: the same with ``keep_labels=--keep-labels``
  (chunk labels kept on the workers between the passes; tilelabel's default keeps one chunk's
  per worker);
- ``tilelabel-gpu-nokeep`` / ``tilelabel-cpu-nokeep``: the same with ``keep_labels=0`` (no
  labels kept: the writing pass labels every chunk's kept bits again);
- ``tilelabel-gpu-reread`` / ``tilelabel-cpu-reread``: the same with ``keep_labels=0`` and
  ``keep_input=False`` (the writing pass reads, decodes and labels every chunk again);
- ``tilelabel-gpu-gpuencode`` / ``tilelabel-gpu-hostencode``: ``tilelabel-gpu`` with
  ``gpu_encode=True`` / ``False`` (nvCOMP compresses every output chunk on the GPU / zarr all
  of them on the host; ``tilelabel-gpu``: tilelabel's default);
- any GPU method ``@WxT`` (``tilelabel-gpu@1x4``): that method with W workers of T threads on
  each GPU instead of one of ``--threads-per-worker``, so that one input serves several shapes
  (W > 1: a ``LocalCluster`` whose W worker processes share the GPU);
- any GPU method ``+plain``: on ``dask_cuda.LocalCUDACluster()`` with dask-cuda's defaults
  (one worker per GPU, one thread), as a notebook makes it; ``+dask-cuda-worker``: behind a
  ``dask scheduler`` with one ``dask cuda worker --nthreads T`` (T: ``--threads-per-worker``,
  default 8), both started as processes of their own, as on an existing cluster;
- ``dask-image``: ``dask_image.ndmeasure.label`` with the same structure, stored with ``to_zarr``.

    python benchmarks/pipeline.py --sizes 1024 2048 --densities 0.05 0.2 --out DIR

Strong scaling as on a cluster of GPU nodes, where every GPU brings its own cores: with
``--threads-per-gpu T`` each GPU run (and its copy) is held to the first ``gpus * T`` cores of
the node (CPU affinity, which the worker processes inherit and tilelabel's thread pools count):

    python benchmarks/pipeline.py --sizes 2048 --densities 0.2 --methods copy-gpu tilelabel-gpu \
        --gpus 1 2 --threads-per-gpu 16

With ``--worker-memory 2GiB`` the workers of tilelabel's clusters spill beyond 60 % of it,
which bounds their memory whatever the volume (the merge's state grows with it):

    python benchmarks/pipeline.py --sizes 4096 --densities 0.05 --no-digest \
        --methods tilelabel-gpu --worker-memory 2GiB

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``pipeline_<machine>_<sizes>_d<densities>``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dask.array as da  # noqa: E402
import zarr  # noqa: E402
from distributed import Client, LocalCluster, get_task_stream  # noqa: E402
from report import default_name, device_tag, record  # noqa: E402

import tilelabel  # noqa: E402
from tilelabel.chunking import plan_for_run, plan_for_storage  # noqa: E402
from tilelabel.cluster.local import cuda_cluster  # noqa: E402
from tilelabel.cores import usable_cores  # noqa: E402
from tilelabel.kernels.backends import cuda_available  # noqa: E402
from tilelabel.resources.gpu import TARGET_VOXELS as GPU_TARGET  # noqa: E402
from tilelabel.resources.host import TARGET_VOXELS as CPU_TARGET  # noqa: E402
from tilelabel.storage.arrays import ZarrSource, ZarrTarget, storage_chunks  # noqa: E402
from tilelabel.synth import write_random_zarr  # noqa: E402
from tilelabel.validate import byte_count  # noqa: E402


def start_peaks(gpu: bool, dask_worker=None) -> None:
    """Sample one worker process's high-water marks every 5 ms: resident host memory, and with a
    GPU the bytes in use in CuPy's pool. (getrusage's maxrss is no good here: a worker process
    can start with its parent's.) The state lives on the worker object, which outlives the
    by-value copies of this function that client.run sends."""
    import psutil

    proc = psutil.Process()
    pool = None
    if gpu:
        import cupy as cp

        pool = cp.get_default_memory_pool()
    # trace: per whole second since the epoch, [the second's highest RSS, results held then]
    state = {"rss": 0, "gpu": 0, "stop": False, "rss_at": 0.0, "rss_held": {}, "trace": {}}

    def loop():
        while not state["stop"]:
            rss = proc.memory_info().rss
            second = state["trace"].setdefault(int(time.time()), [0, 0])
            if rss > second[0]:  # a new peak of this second, and perhaps of the run
                held = held_results(dask_worker)
                second[:] = rss, sum(held.values())
                if rss > state["rss"]:
                    # when, and how much of it was results dask held (the merge's summaries,
                    # the specs), by task kind: the rest is the running tasks' buffers and what
                    # the allocator keeps
                    state.update(rss=rss, rss_at=time.time(), rss_held=held)
            if pool is not None:
                state["gpu"] = max(state["gpu"], pool.used_bytes())
            time.sleep(0.005)

    dask_worker.tilelabel_peaks = state
    state["gc"] = gc_pauses()
    state["usage"] = _usage()
    threading.Thread(target=loop, daemon=True).start()


def held_results(dask_worker) -> dict[str, int]:
    """Bytes of the results a worker holds in memory, per task kind (its own and those it
    fetched for its tasks), largest first."""
    held = Counter()
    try:
        for ts in list(dask_worker.state.tasks.values()):
            if ts.state == "memory":
                held[task_kind(ts.key)] += ts.nbytes or 0
    except RuntimeError:  # the worker's event loop changed the tasks while we read them
        return {}
    return dict(held.most_common())


def stop_peaks(dask_worker=None) -> dict:
    """The worker's peaks since :func:`start_peaks`: host RSS (``rss``), when it came
    (``rss_at``, seconds since the epoch) and the results dask held then (``rss_held``), GPU
    pool bytes (``gpu``), each second's RSS peak (``trace``), its garbage collections
    (``gc``), and its :func:`_usage` since then (``usage``, taken as the run ends, before its
    digest)."""
    state = dask_worker.tilelabel_peaks
    state["stop"] = True
    usage = {k: v - state["usage"][k] for k, v in _usage().items()}
    keep = ("rss", "rss_at", "rss_held", "gpu", "trace")
    return {**{k: state[k] for k in keep}, "gc": state["gc"].stop(), "usage": usage}


def _usage() -> dict[str, float]:
    """This process's CPU seconds in user and kernel mode and its page faults that needed no
    disk, all threads together. Kernel time with many such faults is the cost of mapping
    fresh memory: each newly touched page of a large array faults and is zeroed first."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": ru.ru_utime, "system_s": ru.ru_stime, "minor_faults": ru.ru_minflt}


class gc_pauses:  # noqa: N801 (used like a function)
    """Record this process's garbage collections of 5 ms or more, from now until ``stop()``:
    ``[start (seconds since the epoch), seconds, generation, objects collected, CPU seconds of
    the collecting thread, its name, frozen objects (full collections only)]`` each. The
    scheduler of a local cluster lives in the client's process, so a collection there holds up
    every worker. CPU seconds well below the seconds mean the collection waited (a finalizer
    on a lock, or a thread without a core), not that it traversed a large heap.

    Nothing here lists the collector's objects (``gc.get_objects``): a list of them holds any
    tuple another thread is still building from a generator, whose last step then fails with
    ``SystemError: bad argument to internal function`` (CPython gh-101855)."""

    def __init__(self):
        self.pauses: list[list] = []
        self._start = None
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase, info):
        if phase == "start":
            heap = None
            if info["generation"] == 2:
                heap = gc.get_freeze_count()
            self._start = (time.perf_counter(), time.thread_time(), heap)
        elif self._start is not None:
            t, cpu, heap = self._start
            took = time.perf_counter() - t
            if took >= 0.005:
                self.pauses.append(
                    [
                        time.time() - took,
                        round(took, 4),
                        info["generation"],
                        info["collected"],
                        round(time.thread_time() - cpu, 4),
                        threading.current_thread().name,
                        heap,
                    ]
                )
            self._start = None

    def stop(self) -> list[list]:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        return self.pauses


def cpu_cluster(workers: int, memory: int | None = None) -> LocalCluster:
    """``workers`` single-threaded processes; ``memory``: each one's limit (0 or None: none)."""
    return LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        memory_limit=memory or 0,
    )


@contextlib.contextmanager
def pinned(cores: int | None):
    """Hold this process, every thread of it and so every process it starts meanwhile, to the
    first ``cores`` of the cores it may use (None: leave it be). Worker processes inherit the
    affinity, and tilelabel sizes their pools by it (tilelabel.cores), so a run on fewer GPUs
    gets only those GPUs' share of the node's host."""
    if cores is None:
        yield
        return
    mine = sorted(os.sched_getaffinity(0))
    if cores > len(mine):
        raise ValueError(f"{cores} cores asked for, this process may use {len(mine)}")

    def every_thread(mask):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(tid), mask)

    every_thread(mine[:cores])
    try:
        yield
    finally:
        every_thread(mine)


def gpu_cluster(
    gpus: int, per_worker: int | None = None, kind: str = "", memory: int | None = None
):
    """A GPU cluster on ``gpus`` GPUs, one worker on each: tilelabel's (``per_worker`` task
    threads, None: tilelabel's default for the cores the caller holds the run to, see
    :func:`pinned`; ``memory``: each worker's memory limit, 0 for none, None: tilelabel's), a
    plain ``LocalCUDACluster()`` (``kind`` ``plain``), or a scheduler and ``dask cuda worker``
    processes (``dask-cuda-worker``)."""
    if kind == "plain":
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(
            CUDA_VISIBLE_DEVICES=",".join(map(str, range(gpus))), dashboard_address=None
        )
    if kind == "dask-cuda-worker":
        return CudaWorkerProcesses(gpus, per_worker or 8)
    limit = {} if memory is None else {"memory_limit": memory}  # None: tilelabel's default
    return cuda_cluster(gpus, threads_per_worker=per_worker, dashboard_address=None, **limit)


def shared_gpu_cluster(gpus: int, workers: int, per_worker: int | None, memory: int | None = None):
    """A ``LocalCluster`` of ``workers`` processes of ``per_worker`` threads on each of the
    first ``gpus`` GPUs (each process sees only its GPU): the shape dask-cuda does not make;
    ``memory``: each worker's limit (0 or None: none)."""
    if gpus != 1:
        raise ValueError("workers sharing a GPU are measured on one GPU")
    with environment("CUDA_VISIBLE_DEVICES=0"):  # the worker processes inherit it
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=per_worker or max(1, usable_cores() // workers),
            memory_limit=memory or 0,
            dashboard_address=None,
        )


class CudaWorkerProcesses:
    """``dask scheduler`` and ``dask cuda worker --nthreads T`` as processes of their own, as on
    a cluster a user started; used as a cluster (a context manager that a Client takes)."""

    def __init__(self, gpus: int, threads: int):
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="dask-cuda-worker-")
        self.file = os.path.join(self.dir, "scheduler.json")
        py = sys.executable
        self.procs = [
            subprocess.Popen(
                [
                    py,
                    "-m",
                    "distributed.cli.dask_scheduler",
                    "--scheduler-file",
                    self.file,
                    "--no-dashboard",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ]
        deadline = time.monotonic() + 60
        while not os.path.exists(self.file) and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = "from dask_cuda.cli import worker; worker()"
        self.procs.append(
            subprocess.Popen(
                [
                    py,
                    "-c",
                    worker,
                    "--scheduler-file",
                    self.file,
                    "--nthreads",
                    str(threads),
                    "--no-dashboard",
                    "--memory-limit",
                    "0",
                ],
                env={**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus)))},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    @property
    def scheduler_address(self) -> str:
        return json.loads(Path(self.file).read_text())["address"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def task_kind(key) -> str:
    """``summary`` for ``("tilelabel-summary-<token>", ...)``, ``_copy_chunk`` for
    ``"_copy_chunk-<hash>"``."""
    key = key[0] if isinstance(key, tuple) else str(key)
    return key.split("-")[1] if key.startswith("tilelabel-") else key.split("-")[0]


def task_summary(stream: list[dict], t0: float) -> dict[str, dict]:
    """Per task kind (``tilelabel-<kind>-...``): count, seconds computing (all workers
    together), seconds transferring its inputs, and when the first started and the last ended
    (seconds after ``t0``, the method's start): where the critical path's time went."""
    out: dict[str, dict] = {}
    for t in stream:
        row = out.setdefault(
            task_kind(t["key"]), {"n": 0, "compute": 0.0, "transfer": 0.0, "start": 1e9, "end": 0}
        )
        for ss in t["startstops"]:
            if ss["action"] == "compute":
                row["n"] += 1
            if ss["action"] in ("compute", "transfer"):
                row[ss["action"]] += ss["stop"] - ss["start"]
            row["start"] = min(row["start"], ss["start"] - t0)
            row["end"] = max(row["end"], ss["stop"] - t0)
    return {k: {f: round(v, 3) for f, v in r.items()} for k, r in out.items()}


def task_records(stream: list[dict], t0: float, workers: list[str]) -> list[list]:
    """Every task of the run as ``[kind, worker number, start, stop, seconds transferring its
    inputs]`` (seconds after ``t0``), for timelines and per-worker analysis."""
    out = []
    for t in stream:
        steps = t["startstops"]
        moved = round(sum(s["stop"] - s["start"] for s in steps if s["action"] == "transfer"), 4)
        worker = workers.index(t["worker"]) if t["worker"] in workers else -1
        for ss in steps:
            if ss["action"] == "compute":
                start, stop = round(ss["start"] - t0, 4), round(ss["stop"] - t0, 4)
                out.append([task_kind(t["key"]), worker, start, stop, moved])
    return out


def create_like(src: str, dst: str, dtype: str = "uint32") -> zarr.Array:
    z = zarr.open_array(src)
    return zarr.create_array(
        dst, shape=z.shape, chunks=z.chunks, dtype=dtype, compressors=z.compressors, overwrite=True
    )


def _copy_chunk(source: ZarrSource, target: ZarrTarget, slices) -> None:
    target(slices, source(slices).astype(np.uint32))


def zarr_copy(src: str, dst: str, client: Client, backend: str, chunks) -> None:
    """Read uint8, write uint32: tilelabel's reads and writes (its zarr I/O path, its processing
    chunks for ``backend``) with no labeling in between."""
    z = zarr.open_array(src)
    create_like(src, dst)
    target = GPU_TARGET if backend == "cuda" else CPU_TARGET
    plan = plan_for_run(z.shape, storage_chunks(z), chunks, sum(client.nthreads().values()), target)
    slices = [plan.slices(i) for i in plan.indices()]
    n = len(slices)
    futures = client.map(_copy_chunk, [ZarrSource(src)] * n, [ZarrTarget(dst)] * n, slices)
    client.gather(futures)


def _block_parts(
    source: ZarrSource, block: tuple[slice, ...], tile: tuple[int, ...]
) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Each storage chunk (``tile``) of ``block``, with its offset in the block. Where the
    array's chunks are single zstd frames of ``tile``, numcodecs decodes each in this thread
    (numcodecs and hashlib let go of the GIL, where zarr's reads take turns on its event loop),
    and nothing copies it into a block; else zarr reads the block in one piece."""
    import itertools

    import numcodecs

    shape = tuple(s.stop - s.start for s in block)
    offsets = list(itertools.product(*(range(0, n, t) for n, t in zip(shape, tile, strict=True))))
    raw = source.raw(block, lambda codec: codec == "zstd")
    if raw is None or raw.layout.tile != tuple(tile):
        labels = source(block)
        return [
            (o, labels[tuple(slice(s, s + t) for s, t in zip(o, tile, strict=True))])
            for o in offsets
        ]
    zstd, parts = numcodecs.Zstd(), []
    for o in offsets:
        inside = tuple(slice(0, min(t, n - s)) for s, t, n in zip(o, tile, shape, strict=True))
        frame = raw.tiles.get(tuple(s // t for s, t in zip(o, tile, strict=True)))
        if frame is None:  # a chunk not stored is all zero
            part = np.zeros([c.stop for c in inside], raw.dtype)
        else:
            part = np.frombuffer(zstd.decode(frame), raw.dtype).reshape(tile)[inside]
        parts.append((o, part))
    return parts


def _block_digests(
    source: ZarrSource, block: tuple[slice, ...], tile: tuple[int, ...]
) -> list[tuple[tuple[int, ...], bytes]]:
    """The digest of each storage chunk (``tile``) of ``block``, with the chunk's global
    position: one task for a block of chunks costs less than one per chunk."""
    import hashlib

    parts = _block_parts(source, block, tile)
    # the values, not their bytes in memory: uint32 and uint64 outputs of one labeling agree
    limit = np.iinfo(np.uint32).max
    if parts[0][1].dtype.itemsize > 4 and all(p.size == 0 or p.max() <= limit for _, p in parts):
        parts = [(o, p.astype(np.uint32)) for o, p in parts]
    out = []
    for offset, part in parts:
        part = part.astype(part.dtype.newbyteorder("<"), copy=False)
        position = tuple((b.start + o) // t for b, o, t in zip(block, offset, tile, strict=True))
        out.append((position, hashlib.blake2b(np.ascontiguousarray(part)).digest()))
    return out


def output_digest(path: str, chunks_per_task: int = 4) -> str:
    """A digest of the labels in ``path``: the digest of the digests of its storage chunks, in
    raster order. The same for every chunking, worker count and backend that writes the same
    labels, so the rows of one volume (and the same volume in another session) can be compared
    without holding two outputs at once. Taken in this process, a thread per core, each thread
    reading up to ``chunks_per_task`` storage chunks per axis: the same cost whatever the
    cluster's shape."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    z = zarr.open_array(path, mode="r")
    tile = storage_chunks(z)
    plan = plan_for_storage(z.shape, tile, tuple(t * chunks_per_task for t in tile))
    source = ZarrSource(path)
    with ThreadPoolExecutor(usable_cores()) as pool:
        parts = list(
            pool.map(lambda i: _block_digests(source, plan.slices(i), tile), plan.indices())
        )
    ordered = sorted(p for part in parts for p in part)  # raster order of the storage chunks
    return hashlib.blake2b(b"".join(d for _, d in ordered), digest_size=16).hexdigest()


def run_name(r: dict) -> str:
    return f"{r['method']} gpus={r.get('gpus', 0)} env={r.get('env')} run={r.get('repeat', 0)}"


def disagreements(rows: list[dict]) -> list[str]:
    """What the rows of one volume disagree on: the component count of any method that reports
    one, and the labels' digest of tilelabel's methods (dask-image numbers its components in
    another order, so only its count is compared)."""
    found = []
    for field in ("components", "digest"):
        seen = {run_name(r): r[field] for r in rows if r.get(field) is not None}
        if len(set(seen.values())) > 1:
            found.append(f"{field}: {seen}")
    return found


def dask_copy(src: str, dst: str, client: Client) -> None:
    """The same copy written the dask way: ``from_zarr(...).astype(...).store(...)``, one task
    per storage chunk, through zarr's synchronous API."""
    out = create_like(src, dst)
    arr = da.from_zarr(src)
    client.compute(arr.astype(np.uint32).store(out, lock=False, compute=False)).result()


def dask_image_label(src: str, dst: str, client: Client) -> int:
    from dask_image import ndmeasure

    z = zarr.open_array(src)
    labels, n = ndmeasure.label(da.from_zarr(src), structure=np.ones((3,) * z.ndim, bool))
    out = zarr.create_array(
        dst,
        shape=z.shape,
        chunks=z.chunks,
        dtype=labels.dtype,
        compressors=z.compressors,
        overwrite=True,
    )
    _, count = client.compute([labels.store(out, lock=False, compute=False), n], sync=True)
    return int(count)


def in_subprocess(method: str, src: str, dst: str, args) -> list[dict]:
    """Run one method in a child process killed after ``--time-limit`` seconds: dask-image can
    spend longer than any limit building its graph, before a single task runs."""
    cmd = [
        sys.executable,
        __file__,
        "--child",
        method,
        src,
        dst,
        "--cpu-workers",
        str(args.cpu_workers),
    ]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=args.time_limit, start_new_session=True
        )
    except subprocess.TimeoutExpired as e:
        raise TimeoutError from e
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("["):  # the child's rows (see main)
            return json.loads(line)
    raise RuntimeError(f"child failed: {done.stderr[-300:]}")


#: the variants' suffixes after a method's base name (see the module docstring)
SUFFIXES = re.compile(r"(-keep|-nokeep|-reread|-hostencode|-gpuencode)+$")


def keep_labels_option(method: str, budget: int) -> int | None:
    """``keep_labels`` for a tilelabel method: ``budget`` (``-keep``), 0 (``-nokeep``, and
    ``-reread``, which reads every chunk again), else None, tilelabel's default."""
    if method.endswith("-keep"):
        return budget
    if method.endswith(("-nokeep", "-reread")):
        return 0
    return None


def is_gpu(method: str) -> bool:
    return SUFFIXES.sub("", method.partition("@")[0].partition("+")[0]).endswith("-gpu")


def gpu_encode_option(method: str) -> bool | None:
    """``label_zarr``'s gpu_encode for a method name (see the module docstring)."""
    if method.endswith("-hostencode"):
        return False
    return True if method.endswith("-gpuencode") else None


def stored_bytes(path: str) -> int:
    """Bytes of every file under ``path``: what the method left on disk."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def cluster_shape(method: str) -> tuple[str, str, int, int | None]:
    """A method name without its ``+KIND`` and ``@WxT`` suffixes, KIND ("" where absent), W (1
    where absent) and T (None where absent)."""
    name, _, shape = method.partition("@")
    name, _, kind = name.partition("+")
    if kind not in ("", "plain", "dask-cuda-worker"):
        raise ValueError(f"{method}: expected +plain or +dask-cuda-worker")
    if not shape:
        return name, kind, 1, None
    found = re.fullmatch(r"(\d+)x(\d+)", shape)
    if found is None or int(found[1]) < 1 or (kind and found[1] != "1"):
        raise ValueError(f"{method}: expected METHOD@WxT (W workers on each GPU, T threads)")
    return name, kind, int(found[1]), int(found[2])


def run_method(method: str, src: str, dst: str, args, gpus: int = 1) -> list[dict]:
    """One row per run of ``method`` (``--repeat`` runs, one after the other on one fresh
    cluster: the first pays the workers' first use, the later ones show a warm cluster)."""
    method, kind, shared, per_worker = cluster_shape(method)
    gpu = is_gpu(method)
    cores = gpus * args.threads_per_gpu if gpu and args.threads_per_gpu else None
    with pinned(cores):
        rows = _run_method(method, src, dst, args, gpu, gpus, kind, per_worker, shared)
    return [r | {"cores": cores} for r in rows]


def _run_method(method, src, dst, args, gpu, gpus, kind, per_worker, shared) -> list[dict]:
    per_worker = per_worker or args.threads_per_worker
    memory = args.worker_memory
    if gpu and shared > 1:
        cluster = shared_gpu_cluster(gpus, shared, per_worker, memory)
    elif gpu:
        cluster = gpu_cluster(gpus, per_worker, kind, memory)
    else:
        cluster = cpu_cluster(args.cpu_workers, memory)
    rows = []
    address = cluster.scheduler_address if isinstance(cluster, CudaWorkerProcesses) else cluster
    with cluster, Client(address, set_as_default=False) as client:
        client.wait_for_workers((gpus or 1) * shared, timeout=300)
        for repeat in range(args.repeat):
            try:
                rows.append(_timed_run(method, src, dst, args, gpu, client) | {"repeat": repeat})
            except Exception as e:
                # a run refused for GPU memory: who held it (kept in the failed row)
                e.gpu_holders = gpu_holders(client) if gpu else None
                raise
    return rows


def gpu_holders(client: Client) -> list[str]:
    """Every process holding GPU memory now, as nvidia-smi lists them ("PID MiB whose"):
    this cluster's workers, this process, or another."""
    try:
        held = gpu_processes()
    except (OSError, subprocess.SubprocessError) as e:
        return [f"nvidia-smi failed: {e}"]
    workers = set(client.run(os.getpid).values())
    out = []
    for pid, mib in held.items():
        whose = "worker" if pid in workers else "this" if pid == os.getpid() else "other"
        out.append(f"{pid} {mib} MiB {whose}")
    return out


def gpu_processes() -> dict[int, int]:
    """MiB of GPU memory each process holds, as nvidia-smi lists them."""
    listing = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    rows = (line.split(",") for line in listing.strip().splitlines())
    return {int(pid): int(mib) for pid, mib in rows}


def _timed_run(method, src, dst, args, gpu, client) -> dict:
    phases = {}
    client.run(start_peaks, gpu)
    here = gc_pauses()
    stream = get_task_stream(client)
    # no run waits on the input's or an earlier run's writes still going to disk
    os.sync()
    stream.__enter__()
    t0, t0_wall = time.perf_counter(), time.time()
    if method.startswith("copy-dask"):
        n = dask_copy(src, dst, client)
    elif method.startswith("copy"):
        n = zarr_copy(src, dst, client, "cuda" if gpu else "cpu", args.chunks)
    elif method == "dask-image":
        n = dask_image_label(src, dst, client)
    else:
        res = tilelabel.label_zarr(
            src,
            dst,
            backend="cuda" if method.startswith("tilelabel-gpu") else "cpu",
            client=client,
            chunks=args.chunks,
            overwrite=True,
            return_result=True,
            keep_labels=keep_labels_option(method, args.keep_labels),
            keep_input=not method.endswith("-reread"),
            gpu_encode=gpu_encode_option(method),
        )
        n, phases = res.components, res.phases
    seconds = time.perf_counter() - t0
    stream.__exit__(None, None, None)
    client_gc = here.stop()
    # the peaks of the run alone: until 2026-11-24 (tenth session) they included the digest's
    # reads below
    peaks = client.run(stop_peaks).values()
    usage = Counter()
    for p in peaks:
        usage.update(p["usage"])
    # outside the timed run: every tilelabel output is checked against the others
    t_digest = time.perf_counter()
    digest = output_digest(dst) if method.startswith("tilelabel") and args.digest else None
    t_digest = time.perf_counter() - t_digest
    info = client.scheduler_info()["workers"]
    workers_gc = [p for peak in peaks for p in peak["gc"]]
    peaks = sorted(peaks, key=lambda p: p["rss"], reverse=True)
    row = {
        "seconds": seconds,
        "components": n,
        "digest": digest,
        "digest_seconds": round(t_digest, 2),
        "peak_rss_per_worker": max(p["rss"] for p in peaks),
        "peak_gpu_per_worker": max(p["gpu"] for p in peaks),
        # every worker's host peak: [bytes, seconds into the run, bytes of the results dask
        # held then, those bytes by task kind], largest first
        "rss_peaks": [
            [p["rss"], round(p["rss_at"] - t0_wall, 2), sum(p["rss_held"].values()), p["rss_held"]]
            for p in peaks
        ],
        # the same workers' RSS over the run: [whole second into it, that second's highest
        # RSS, results held then], to tell a peak that rises chunk after chunk from the
        # highest of many like ones
        "rss_traces": [
            [[int(t - t0_wall), *v] for t, v in sorted(p["trace"].items())] for p in peaks
        ],
        # CPU seconds (user, kernel) and minor page faults of the run, all workers together
        "worker_usage": {k: round(v, 2) for k, v in usage.items()},
        "workers": len(info),
        "threads_per_worker": max(w["nthreads"] for w in info.values()),
        "phases": phases,
        "tasks": task_summary(stream.data, t0_wall),
        "output_bytes": stored_bytes(dst),
        # the high-water mark of this process (client and the local cluster's scheduler) so
        # far, the inputs' writing and earlier runs included: bytes
        "client_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10,
        # collections of 5 ms or more during the run, as gc_pauses records them but starting
        # in seconds after t0; the client's process is also the local cluster's scheduler's
        "gc_pauses": {
            where: [[round(p[0] - t0_wall, 3), *p[1:]] for p in pauses if p[0] >= t0_wall]
            for where, pauses in (("client", client_gc), ("workers", workers_gc))
        },
    }
    if args.save_stream:
        row["stream"] = task_records(stream.data, t0_wall, list(info))
    return row


@contextlib.contextmanager
def environment(setting: str):
    """``os.environ`` with ``setting`` (``NAME=VALUE[,NAME=VALUE]``; '' changes nothing) for
    the block, and all of it as it was after: a nanny started in the block writes dask's
    pre-spawn environment (MALLOC_TRIM_THRESHOLD_, ...) into this process, which every later
    run's workers would inherit whatever their cluster's settings."""
    before = dict(os.environ)
    os.environ.update(kv.split("=", 1) for kv in setting.split(",") if kv)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


def warm_up(work: Path, methods: list[str], storage_chunk: int) -> None:
    """Compile (and cache on disk) every numba and CUDA kernel the timed runs use, so that no
    run pays for compilation: numba's cache lives beside the sources, CuPy's in ~/.cupy.
    The GPU's warm-up compresses a whole GPU chunk of the runs' own storage tiles: after one on
    a single 32^3 or 128^3 tile, the first timed run's writes of 512^3 chunks (64 tiles of 128^3)
    still took 3-4 s longer on a fresh H100 (2026-11-24)."""
    src = str(work / "warm.zarr")
    side = 4 * storage_chunk  # a 512^3 chunk with the default 128^3 tiles, as the runs' own
    write_random_zarr(src, (side,) * 3, (storage_chunk,) * 3, 0.3, 1, seed=0, overwrite=True)
    backends = ["cpu"] + (["cuda"] if any(m.startswith("tilelabel-gpu") for m in methods) else [])
    # a worker process of its own: kernels compiled here would stay in this process, the timed
    # runs' scheduler's, and every full collection there would traverse them (340-360k objects
    # against 220-235k on an H100, 0.20-0.26 s against 0.10-0.17 s)
    with (
        environment(""),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as lc,
    ):
        with Client(lc, set_as_default=False) as c:
            for backend in backends:
                # gpu_encode=True: a machine's first GPU compression fills nvCOMP's cache on
                # disk, which no run measured here should pay
                tilelabel.label_zarr(
                    src,
                    str(work / "warm-out.zarr"),
                    backend=backend,
                    client=c,
                    overwrite=True,
                    gpu_encode=backend == "cuda",
                    chunks=(side,) * 3,
                )
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(work / "warm-out.zarr", ignore_errors=True)


def hold_gpu_memory(gib: float | None) -> list:
    """Arrays taking all but ``gib`` GiB of each GPU's free memory (none where ``gib`` is None),
    for as long as the caller keeps them: the GPU methods then run as on a smaller GPU."""
    if gib is None:
        return []
    import cupy as cp

    held = []
    for d in range(cp.cuda.runtime.getDeviceCount()):
        with cp.cuda.Device(d):
            free = cp.cuda.runtime.memGetInfo()[0]
            take = free - int(gib * 2**30)
            if take <= 0:
                raise SystemExit(
                    f"GPU {d} has only {free / 2**30:.1f} GiB free, not more than {gib}"
                )
            held.append(cp.empty(take, dtype=cp.uint8))
            print(f"# GPU {d}: holding {take / 2**30:.1f} GiB, {gib} GiB left free", flush=True)
    return held


def table(rows: list[dict], repeat: int, wrong: list[str]) -> str:
    """The Markdown table of the rows: one line per run, its ratios to the copies and dask-image
    of the same volume, environment and round, the disagreements after it."""
    header = [
        *("size", "density", "method", "workers", "s", "GVox/s", "vs copy (same cluster)"),
        *("vs fastest copy", "vs dask-image", "peak host/worker GiB", "peak GPU/worker GiB"),
        *("output MiB", "worker CPU s (of it kernel)", "CPU s / GVox"),
    ]

    def line(*cells) -> str:
        """A table row of ``cells``, empty cells after them up to the header's width."""
        return "| " + " | ".join(map(str, cells + ("",) * (len(header) - len(cells)))) + " |"

    lines = [
        line(*header),
        "|" + "---|" * len(header),
    ]
    for r in rows:
        if "timeout" in r:
            same = {
                x["method"]: x["seconds"]
                for x in rows
                if x["size"] == r["size"] and x["density"] == r["density"] and "seconds" in x
            }
            bound = ", ".join(
                f"{m} > {r['timeout'] / t:.0f}x faster"
                for m, t in same.items()
                if m.startswith("tilelabel")
            )  # (with several GPU counts, the last one's time)
            where = (f"{r['size']}³", r["density"], r["method"], "")
            lines.append(line(*where, f"> {r['timeout']:.0f} (stopped)", "", "", "", bound))
            continue
        if "seconds" not in r:
            where = (f"{r['size']}³", r["density"], r["method"], "")
            lines.append(line(*where, f"failed: {r['error'][:80]}"))
            continue
        same = [
            x
            for x in rows
            if x["size"] == r["size"] and x["density"] == r["density"] and "seconds" in x
        ]
        # the same env and the same run on its cluster (--repeat)
        same = [
            x
            for x in same
            if x.get("env") == r.get("env") and x.get("repeat", 0) == r.get("repeat", 0)
        ]
        ref = {(x["method"], x.get("gpus", 0)): x["seconds"] for x in same}
        gpus = r.get("gpus", 0)
        copy_ref = ref.get(("copy-gpu", gpus) if gpus else ("copy", 0))
        vs_copy = f"{copy_ref / r['seconds']:.2f}x" if copy_ref else ""
        copies = [x["seconds"] for x in same if x["method"] in ("copy", "copy-gpu")]
        vs_best = f"{min(copies) / r['seconds']:.2f}x" if copies else ""
        di = ref.get(("dask-image", 0))
        vs_di = f"{di / r['seconds']:.1f}x" if di else ""
        name = r["method"] + (f" ({gpus} GPU{'s' if gpus > 1 else ''})" if gpus else "")
        if r.get("cores"):
            name += f" [{r['cores']} cores]"
        if r.get("env"):
            name += f" [{r['env']}]"
        if repeat > 1:
            name += f" run {r.get('repeat', 0) + 1}"
        use = r.get("worker_usage")
        cpu_s = use["user_s"] + use["system_s"] if use else None
        cpu = f"{cpu_s:.1f} ({use['system_s']:.1f})" if use else ""
        # host CPU seconds per 10^9 voxels: what a node's cores must supply per GPU's work
        per_gvox = f"{cpu_s / (r['voxels'] / 1e9):.1f}" if use and r.get("voxels") else ""
        lines.append(
            line(
                *(f"{r['size']}³", r["density"], name, r["workers"], f"{r['seconds']:.2f}"),
                *(f"{r['gvox_s']:.3f}", vs_copy, vs_best, vs_di),
                f"{r['peak_rss_per_worker'] / 2**30:.2f}",
                f"{r['peak_gpu_per_worker'] / 2**30:.2f}",
                *(f"{r['output_bytes'] / 2**20:.0f}", cpu, per_gvox),
            )
        )
    if wrong:
        lines += ["", "**Outputs disagree:**", *(f"- {w}" for w in wrong)]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--densities", type=float, nargs="+", default=[0.05, 0.2])
    p.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="methods to run (default: copy copy-gpu tilelabel-gpu tilelabel-cpu dask-image, "
        "without the GPU ones where CuPy sees no GPU)",
    )
    p.add_argument(
        "--dask-image-max",
        type=int,
        default=1024,
        help="largest size dask-image is run at (it gathers a global LUT)",
    )
    p.add_argument("--cpu-max", type=int, default=2048, help="largest size tilelabel-cpu runs at")
    p.add_argument("--storage-chunk", type=int, default=128)
    p.add_argument(
        "--chunks",
        type=lambda s: tuple(int(v) for v in s.split(",")),
        default=None,
        help="tilelabel processing chunks (default: tilelabel's own plan)",
    )
    p.add_argument(
        "--gpus", type=int, nargs="+", default=[1], help="GPU counts to run the GPU methods with"
    )
    p.add_argument(
        "--threads-per-gpu",
        type=int,
        default=None,
        help="host threads per GPU (zarr decoding and encoding), shared by its workers; each "
        "GPU run is held to the first GPUs x T cores of the node (default: tilelabel's cluster "
        "default on every core)",
    )
    p.add_argument(
        "--threads-per-worker",
        type=int,
        default=None,
        help="task threads of each GPU worker (default: its share of the GPU's threads)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=300.0,
        help="seconds after which dask-image is stopped (reported as a lower bound)",
    )
    p.add_argument("--cpu-workers", type=int, default=usable_cores())
    p.add_argument(
        "--env",
        nargs="+",
        default=[""],
        metavar="NAME=VALUE[,NAME=VALUE]",
        help="environment settings to run every method under, a run of each per setting ('': "
        "as started), which the runs' worker processes inherit; e.g. "
        "DASK_TILELABEL__CODEC__THREADS=2",
    )
    p.add_argument(
        "--keep-labels",
        type=byte_count,
        default=8 << 30,
        help="keep_labels of the *-keep methods (bytes per worker; sizes like 8GB)",
    )
    p.add_argument(
        "--worker-memory",
        type=byte_count,
        default=None,
        help="memory limit of each worker of the clusters (sizes like 2GiB; 0: none; default: "
        "tilelabel's own for its GPU cluster, dask-cuda's share of the host's memory; none for "
        "the others)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each method, one after the other on the same fresh cluster (the first "
        "pays the workers' first use: imports, CUDA kernels, pinned memory, nvCOMP)",
    )
    p.add_argument(
        "--keep-inputs",
        action="store_true",
        help="leave each input volume in --workdir and reuse one a run with this flag left "
        "there (the same size, density and storage chunk): on a large volume, writing the "
        "input takes longer than labeling it",
    )
    p.add_argument(
        "--no-digest",
        dest="digest",
        action="store_false",
        help="skip the digest of each tilelabel output (it decodes and hashes the whole "
        "output; without it, rows of one volume are not checked against each other)",
    )
    p.add_argument(
        "--save-stream",
        action="store_true",
        help="keep every task's kind, worker, start and stop in the JSON rows (`stream`)",
    )
    p.add_argument(
        "--gpu-free",
        type=float,
        default=None,
        metavar="GIB",
        help="leave only GIB GiB free on each GPU while the methods run, as on a smaller GPU "
        "(this process holds the rest; the workers' CUDA contexts come out of what is left)",
    )
    p.add_argument("--workdir", default=os.environ.get("TMPDIR", "/tmp") + "/tilelabel-bench")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    p.add_argument("--child", nargs=3, metavar=("METHOD", "SRC", "DST"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(run_method(*args.child, args)), flush=True)
        return

    gpu = cuda_available()
    device = "cpu only"
    if gpu:
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(0)
        device = f"{props['name'].decode()} x{cp.cuda.runtime.getDeviceCount()}"
    if args.methods is None:
        args.methods = [
            m
            for m in ["copy", "copy-gpu", "tilelabel-gpu", "tilelabel-cpu", "dask-image"]
            if gpu or not is_gpu(m)
        ]
    elif not gpu and any(map(is_gpu, args.methods)):
        p.error(
            f"GPU methods ({', '.join(filter(is_gpu, args.methods))}) need a GPU, and CuPy "
            "finds none; leave them out of --methods"
        )
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    wrong: list[str] = []  # rows of one volume that disagree (see disagreements)
    warm_up(work, args.methods, args.storage_chunk)
    held = hold_gpu_memory(args.gpu_free)
    for size in args.sizes:
        for density in args.densities:
            shape = (size,) * 3
            src = str(work / f"in-{size}-{density}-{args.storage_chunk}.zarr")
            made = Path(src + ".complete")  # written once the input's last chunk is
            if args.keep_inputs and made.exists():
                print(f"# {size}^3 d={density}: input of an earlier run reused", flush=True)
            else:
                made.unlink(missing_ok=True)
                t0 = time.perf_counter()
                write_random_zarr(
                    src, shape, (args.storage_chunk,) * 3, density, 1, seed=size, overwrite=True
                )
                made.touch()
                print(
                    f"# {size}^3 d={density}: input written in {time.perf_counter() - t0:.1f} s",
                    flush=True,
                )
            runs = [
                (m, g, env)
                for env in args.env
                for m in args.methods
                for g in (args.gpus if is_gpu(m) else [0])
            ]
            for method, gpus, env in runs:
                if method == "dask-image" and size > args.dask_image_max:
                    continue
                if method.startswith("tilelabel-cpu") and size > args.cpu_max:
                    continue
                dst = str(work / f"out-{method}.zarr")
                try:
                    # the run's worker processes (and a dask-image child) inherit it
                    with environment(env):
                        if method == "dask-image":
                            done = in_subprocess(method, src, dst, args)
                        else:
                            done = run_method(method, src, dst, args, gpus)
                except TimeoutError:
                    done = [{"timeout": args.time_limit}]
                except Exception as e:  # record and go on: one method failing is a result too
                    done = [
                        {
                            "error": f"{type(e).__name__}: {e}"[:300],
                            "traceback": traceback.format_exc()[-2000:],
                        }
                    ]
                    if getattr(e, "gpu_holders", None):
                        done[0]["gpu_holders"] = e.gpu_holders
                        print(f"# GPU memory held then: {e.gpu_holders}", flush=True)
                for r in done:
                    r.update(
                        method=method,
                        size=size,
                        density=density,
                        voxels=size**3,
                        gpus=gpus,
                        env=env or None,
                    )
                    if "seconds" in r:
                        r["gvox_s"] = size**3 / r["seconds"] / 1e9
                    rows.append(r)
                    print(json.dumps({k: v for k, v in r.items() if k != "stream"}), flush=True)
                shutil.rmtree(dst, ignore_errors=True)
            if not args.keep_inputs:
                made.unlink(missing_ok=True)
                shutil.rmtree(src, ignore_errors=True)
            volume = [r for r in rows if r["size"] == size and r["density"] == density]
            for problem in disagreements(volume):
                wrong.append(f"{size}^3 d={density}: {problem}")
                print(f"# DISAGREEMENT at {size}^3 d={density}: {problem}", flush=True)

    meta = {
        "date": datetime.date.today().isoformat(),
        "device": device,
        "host": platform.node(),
        "cpus": usable_cores(),
        "gpus": args.gpus,
        "threads_per_gpu": args.threads_per_gpu,
        "threads_per_worker": args.threads_per_worker,
        "env": args.env,
        "worker_memory": args.worker_memory,
        "storage_chunk": args.storage_chunk,
        "codec": "zarr default (zstd)",
        "disagreements": wrong,
        "gpu_free_gib": args.gpu_free,
    }
    del held
    head = (
        f"Device: {device}; {usable_cores()} CPU cores; date {meta['date']}; storage chunks "
        f"{args.storage_chunk}^3, zarr v3 default codec; input and output on local disk"
        + (f"; {args.gpu_free} GiB left free per GPU" if args.gpu_free is not None else "")
        + "."
    )
    try:
        md = table(rows, args.repeat, wrong)
    except Exception:  # the rows are saved whatever the table makes of them
        traceback.print_exc()
        md = "(no table: see the rows)"
    print(head + "\n\n" + md)
    notes = (
        f"Storage chunks {args.storage_chunk}³, zarr v3 default codec (zstd); input and output on "
        "local disk"
        + (f"; {args.gpu_free} GiB left free per GPU" if args.gpu_free is not None else "")
        + ". Each method on a fresh cluster of its own; peaks per worker process (host RSS, and "
        "CuPy's pool on GPU workers); CPU seconds of all workers and their threads."
    )
    name = args.name or default_name(
        "pipeline", device_tag(), args.sizes, "d" + "-".join(map(str, args.densities))
    )
    record(
        out_dir,
        name,
        title="One cluster: zarr to zarr beside a zarr copy and dask-image",
        rows=rows,
        markdown=md,
        args=args,
        machine=meta,
        notes=notes,
    )
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()
