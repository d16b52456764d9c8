"""Getting a dask.distributed client: an existing one, a scheduler address, or a local cluster."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from distributed import Client, LocalCluster

from tilelabel.cores import usable_cores

log = logging.getLogger("tilelabel")


def default_workers() -> int:
    """Single-threaded workers of a local CPU cluster: one per usable core."""
    return usable_cores()


def worker_threads(client: Client) -> dict[str, int]:
    """Threads of each worker of the client's cluster (one round trip to the scheduler)."""
    return {w: info["nthreads"] for w, info in client.scheduler_info()["workers"].items()}


def cluster_threads(client: Client | dict[str, int]) -> int:
    """Worker threads of the client's cluster (or of :func:`worker_threads`' answer), all
    workers together."""
    threads = worker_threads(client) if isinstance(client, Client) else client
    return sum(threads.values()) or 1


@contextmanager
def connect(
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    backend: str = "cpu",
    cluster: dict | None = None,
    workers_per_gpu: int | None = None,
) -> Iterator[Client]:
    """Yield a client; clusters started here are closed on exit, others are left running.

    Order: an explicit ``client``; a ``scheduler`` address (or scheduler file path); the client
    already active in this process; otherwise a new local cluster: for the ``cuda`` backend a
    ``LocalCUDACluster`` on ``workers`` GPUs (default: every visible one) with
    ``workers_per_gpu`` worker processes on each (default: see :func:`cuda_cluster`), else a
    ``LocalCluster`` of ``workers`` single-threaded worker processes (the kernels are sequential
    per chunk; processes avoid the GIL in the pipeline's numpy glue).

    ``cluster`` is a run config's ``cluster:`` section (see :data:`tilelabel.config.CLUSTER_KINDS`);
    it comes after ``client`` and ``scheduler`` and before the active client: ``scheduler``
    connects to ``address``; ``local`` and ``local-cuda`` start the local clusters below (with
    ``workers`` unless the argument is given); ``slurm`` submits dask-jobqueue jobs.
    """
    if client is not None:
        yield client
        return
    local_kind = None
    if cluster is not None and scheduler is None:
        kind = cluster["kind"]
        if kind == "scheduler":
            scheduler = cluster["address"]
        elif kind == "slurm":
            from tilelabel.pipeline.jobqueue import connect_slurm

            with connect_slurm(cluster) as c:
                yield c
            return
        else:
            local_kind, backend = kind, "cuda" if kind == "local-cuda" else "cpu"
            workers = workers or cluster.get("workers")
            workers_per_gpu = workers_per_gpu or cluster.get("workers_per_gpu")
    if scheduler is not None:
        kwargs = (
            {"scheduler_file": scheduler} if scheduler.endswith(".json") else {"address": scheduler}
        )
        with Client(**kwargs) as c:
            yield c
        return
    from distributed import default_client

    try:
        active = None if local_kind else default_client()
    except ValueError:
        active = None
    if active is not None:
        yield active
        return
    if backend == "cuda":
        cluster = cuda_cluster(workers, workers_per_gpu)
    else:
        cluster = LocalCluster(
            n_workers=workers or default_workers(),
            threads_per_worker=1,
            processes=True,
            silence_logs=max(logging.getLogger("distributed").getEffectiveLevel(), logging.INFO),
        )
    with cluster, Client(cluster) as c:
        log.info(
            "local dask cluster of %d workers, dashboard at %s",
            len(c.scheduler_info()["workers"]),
            c.dashboard_link,
        )
        yield c


def visible_gpus(env: Mapping[str, str]) -> list[str]:
    """The GPUs a process may use: ``CUDA_VISIBLE_DEVICES`` if set, else every GPU dask-cuda
    counts."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return [d.strip() for d in value.split(",") if d.strip()]
    try:
        from dask_cuda.utils import get_n_gpus
    except ImportError as e:
        raise RuntimeError(
            "CUDA_VISIBLE_DEVICES is not set and dask-cuda, which would count the GPUs, is not "
            "installed: pip install 'tilelabel[gpu]'"
        ) from e
    return [str(i) for i in range(get_n_gpus())]


def check_workers_per_gpu(workers_per_gpu: int | None) -> None:
    """Refuse a worker count per GPU below one (None: the default)."""
    if workers_per_gpu is not None and workers_per_gpu < 1:
        raise ValueError(f"workers_per_gpu must be >= 1, got {workers_per_gpu}")


#: most worker processes :func:`cuda_cluster` puts on one GPU by default, and GPU memory each
#: worker thread should have (a 512^3 chunk needs about 2 GiB, a worker's CUDA context and kept
#: labels some 1 GiB more; the GPU's one encoder 5.6 GiB of the rest). 16 rather than 8 on a
#: 16-core H100: at 2048^3 their warm runs were 12-13 % shorter (six each, 2026-11-24), though 8
#: were faster at 1024^3, where 16 workers share 8 chunks
MAX_WORKERS_PER_GPU = 16
GPU_MEMORY_PER_WORKER = 4 << 30


def cuda_cluster(
    gpus: int | None = None,
    workers_per_gpu: int | None = None,
    threads_per_worker: int | None = None,
    **kwargs,
):
    """A ``dask_cuda.LocalCUDACluster`` on the first ``gpus`` GPUs of ``CUDA_VISIBLE_DEVICES``
    (default: all), with ``workers_per_gpu`` worker processes on each.

    The GPU labels a chunk in milliseconds, while reading, decoding, encoding and writing its
    zarr chunks takes host threads. In one process per GPU those threads contend for one GIL and
    leave the GPU idle most of the time: on an H200 with 16 cores, 16 single-threaded workers
    labeled 2048^3 voxels 1.6 times as fast as one worker of 16 threads (benchmarks/RESULTS.md).
    So by default each GPU gets the worker threads of :func:`gpu_cluster_shape`, one per core
    of its share of the node where its free memory has room for them. Given
    ``workers_per_gpu``, each worker gets its share of the cores as threads (at most 8 with one
    worker per GPU). ``kwargs`` go to ``LocalCUDACluster``.
    """
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        raise RuntimeError(
            "backend 'cuda' starts a dask_cuda.LocalCUDACluster, but dask-cuda is not "
            "installed: pip install 'tilelabel[gpu]' (or pass --scheduler ADDRESS)"
        ) from e
    check_workers_per_gpu(workers_per_gpu)
    # an empty CUDA_VISIBLE_DEVICES falls back to dask-cuda's count, as it always has here
    visible = visible_gpus(os.environ) or visible_gpus({})
    if gpus is not None and gpus > len(visible):
        raise ValueError(f"{gpus} GPU workers asked for, but only {len(visible)} GPUs are visible")
    devices = visible[: gpus or len(visible)]
    cores = max(1, usable_cores() // len(devices))
    # every GPU gets as many workers: the one with the least room decides
    known = [s for s in map(gpu_memory_slots, devices) if s] if workers_per_gpu is None else []
    slots = min(known) if known else None
    workers_per_gpu, threads_per_worker = gpu_cluster_shape(
        cores, slots, workers_per_gpu, threads_per_worker
    )
    kwargs.setdefault(
        "silence_logs",
        max(logging.getLogger("distributed").getEffectiveLevel(), logging.INFO),
    )
    cls = LocalCUDACluster if workers_per_gpu == 1 else _shared_gpu_cluster_class()
    extra = {} if workers_per_gpu == 1 else {"workers_per_gpu": workers_per_gpu}
    return cls(
        CUDA_VISIBLE_DEVICES=",".join(devices),
        n_workers=len(devices) * workers_per_gpu,
        threads_per_worker=threads_per_worker,
        **extra,
        **kwargs,
    )


def gpu_cluster_shape(
    cores: int,
    slots: int | None,
    workers_per_gpu: int | None = None,
    threads_per_worker: int | None = None,
) -> tuple[int, int]:
    """(workers per GPU, threads per worker) of :func:`cuda_cluster` on a GPU with ``cores``
    cores of the node and room for ``slots`` worker threads (None: not known).

    By default a GPU gets one worker thread per core, at most one per slot: every worker thread
    may hold a chunk on the GPU, so threads beyond its room would only make the run give up its
    defaults (:mod:`tilelabel.pipeline.room`). With 22 GiB of an H100 free (1024^3, d 0.05 and
    0.2, warm runs, 2026-11-24), 5 workers of 3 threads labeled in chunks of 256x256x384 and
    compressed on the host, in 2.34 s and 2.71 s; 5 single-threaded workers kept the 512^3
    chunks and the GPU's compression, in 1.50 s and 1.72 s. Up to :data:`MAX_WORKERS_PER_GPU`
    single-threaded workers, and past that more threads each. Given ``workers_per_gpu``, each
    worker gets its share of the cores as threads (at most 8 with one worker per GPU)."""
    if workers_per_gpu is None:
        threads = min(cores, slots or cores)
        workers_per_gpu = min(MAX_WORKERS_PER_GPU, threads)
        return workers_per_gpu, threads_per_worker or max(1, threads // workers_per_gpu)
    if threads_per_worker is None:
        share = cores // workers_per_gpu
        threads_per_worker = max(2, min(8, share)) if workers_per_gpu == 1 else max(1, share)
    return workers_per_gpu, threads_per_worker


def gpu_memory_slots(device: str) -> int | None:
    """How many worker threads of GPU_MEMORY_PER_WORKER the device's free memory holds now
    (NVML, no CUDA context; None where NVML cannot tell). Free, not total: a GPU shared with
    other processes (a notebook's CuPy pool, another job) has only what they leave."""
    try:
        import pynvml
        from dask_cuda.utils import get_gpu_handle

        handle = get_gpu_handle(int(device) if device.isdigit() else device)
        free = pynvml.nvmlDeviceGetMemoryInfo(handle).free
    except Exception:  # NVML unusable here: the chunk-memory check in the run still applies
        return None
    return max(1, free // GPU_MEMORY_PER_WORKER)


def _shared_gpu_cluster_class():
    """LocalCUDACluster whose workers are (GPU, slot) pairs instead of one per GPU; defined on
    first use because dask-cuda is an optional dependency."""
    from dask_cuda import LocalCUDACluster

    class SharedGPUCluster(LocalCUDACluster):
        def __init__(self, *args, workers_per_gpu: int, **kwargs):
            self.workers_per_gpu = workers_per_gpu
            super().__init__(*args, **kwargs)

        def new_worker_spec(self):
            # dask-cuda names a worker by its GPU and builds its spec (CUDA_VISIBLE_DEVICES,
            # NVML index, plugins) from that; here each GPU has several names, and the spec
            # is dask-cuda's own, built with only that GPU in view
            devices = self.cuda_visible_devices
            taken = set(self.worker_spec)
            name, device = next(
                (f"gpu{d}-{k}", d)
                for k in range(self.workers_per_gpu)
                for d in devices
                if f"gpu{d}-{k}" not in taken
            )
            self.cuda_visible_devices = [device]
            try:
                ((_, spec),) = super().new_worker_spec().items()
            finally:
                self.cuda_visible_devices = devices
            return {name: spec}

    return SharedGPUCluster
