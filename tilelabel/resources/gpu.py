"""The ``cuda`` backend's resources: GPU memory, encoder turns, and workers per GPU.

A GPU labels a chunk in milliseconds while reading, decoding, encoding and writing its zarr
chunks takes host threads; in one process per GPU those threads share one GIL and leave the GPU
idle most of the time. So a local GPU cluster gets several single-threaded worker processes per
GPU (:func:`cluster_shape`), every one of which may hold a chunk on the GPU at once; the run's
plan is checked against the GPUs' free memory with all of them counted (:mod:`.gpu_memory`),
and a few writes at a time may compress their chunks on the GPU (:mod:`.turns`).
"""

from __future__ import annotations

import threading

from tilelabel.cluster.local import cluster_threads, worker_threads
from tilelabel.pipeline.plan import plan_for_run, plan_for_storage
from tilelabel.resources import gpu_memory
from tilelabel.resources.fit import Fit, Request
from tilelabel.resources.turns import MIN_BATCH_TILES, TurnEncoder, turns
from tilelabel.storage import Created, raw_chunks, raw_codec

#: voxels per processing chunk aimed for when the run names none: per-chunk host work outweighs
#: finer overlap below this on a GPU
TARGET_VOXELS = 512**3

#: most worker processes a local cluster puts on one GPU by default
MAX_WORKERS_PER_GPU = 16

#: GPU memory each worker thread should have: a 512^3 chunk needs about 2 GiB, a worker's CUDA
#: context and kept labels some 1 GiB more
GPU_MEMORY_PER_WORKER = 4 << 30


def cluster_shape(
    cores: int,
    slots: int | None,
    workers_per_gpu: int | None = None,
    threads_per_worker: int | None = None,
) -> tuple[int, int]:
    """(workers per GPU, threads per worker) on a GPU with ``cores`` cores of the node and room
    for ``slots`` worker threads (None: not known).

    By default one worker thread per core, at most one per slot: every worker thread may hold a
    chunk on the GPU, so threads beyond its room would only make the run give up its defaults
    (:mod:`.gpu_memory`). Up to :data:`MAX_WORKERS_PER_GPU` single-threaded workers, and past
    that more threads each. Given ``workers_per_gpu``, each worker gets its share of the cores
    as threads (at least 2, at most 8, with one worker per GPU)."""
    if workers_per_gpu is None:
        threads = min(cores, slots or cores)
        workers_per_gpu = min(MAX_WORKERS_PER_GPU, threads)
        return workers_per_gpu, threads_per_worker or max(1, threads // workers_per_gpu)
    if threads_per_worker is None:
        share = cores // workers_per_gpu
        threads_per_worker = max(2, min(8, share)) if workers_per_gpu == 1 else max(1, share)
    return workers_per_gpu, threads_per_worker


def memory_slots(device: str) -> int | None:
    """How many worker threads of :data:`GPU_MEMORY_PER_WORKER` the device's free memory holds
    now (NVML, no CUDA context; None where NVML cannot tell). Free, not total: a GPU shared with
    other processes (a notebook's CuPy pool, another job) has only what they leave."""
    try:
        import pynvml
        from dask_cuda.utils import get_gpu_handle

        handle = get_gpu_handle(int(device) if device.isdigit() else device)
        free = pynvml.nvmlDeviceGetMemoryInfo(handle).free
    except Exception:  # NVML unusable here: the run's own memory check still applies
        return None
    return max(1, free // GPU_MEMORY_PER_WORKER)


def _warm_encoder_soon(codec: str) -> None:
    """Load the GPU encoder in a background thread of this worker while the labeling pass
    runs, so that no write holds a turn while the library loads (nothing where this process
    has it loaded already: each such thread makes and drops a stream and a codec of its own)."""
    from tilelabel.kernels.backends import get_backend

    encoder = get_backend("cuda").encoder
    if encoder.ready(codec):
        return
    threading.Thread(target=encoder.warm, args=(codec,), daemon=True, name="tilelabel-warm").start()


class GPUResources:
    """The ``cuda`` backend's :class:`tilelabel.resources.Resources`."""

    backend = "cuda"

    def check_here(self) -> None:
        from tilelabel.kernels.backends import get_backend

        get_backend("cuda")  # a clear error where this process has no usable GPU

    def local_cluster(self, *, workers: int | None = None, workers_per_gpu: int | None = None):
        from tilelabel.cluster.gpus import cuda_cluster

        return cuda_cluster(workers, workers_per_gpu)

    def fit(self, client, request: Request) -> Fit:
        """The first run that fits the GPUs (:func:`.gpu_memory.fit`), its encoder turns only
        where the output (made like the input) has chunks the GPU can compress; where it has
        turns, every worker starts loading the encoder now."""
        r = request
        shape, storage, chunks = r.shape, r.storage, r.chunks
        limit = turns(r.gpu_encode, plan_for_storage(shape, storage, storage).nchunks)
        codec = raw_codec(r.like) if limit != 0 else None
        limit = limit if codec is not None else 0
        threads = worker_threads(client)
        nthreads = cluster_threads(threads)

        def planned(encoding: bool, largest: int | None = None):
            # chunks the GPU compresses keep enough storage tiles to keep it busy
            min_tiles = MIN_BATCH_TILES if encoding else 1
            largest = largest or TARGET_VOXELS
            return plan_for_run(shape, storage, chunks, nthreads, largest, min_tiles)

        fit = gpu_memory.fit(
            ask=gpu_memory.asker(client, threads, storage, r.connectivity),
            planned=planned,
            connectivity=r.connectivity,
            threads=nthreads,
            turns=limit,
            keep_labels=r.keep_labels,
            keep_input=r.keep_input,
            may_drop_encoder=r.gpu_encode is None,
            may_shrink=chunks is None,
        )
        if fit.turns != 0:
            client.run(_warm_encoder_soon, codec, on_error="ignore")  # a lost worker warms none
        return fit

    def encoder(self, fit: Fit, created: Created) -> TurnEncoder | None:
        if fit.turns == 0:
            return None
        layout = raw_chunks(created.array, len(created.index))
        return None if layout is None else TurnEncoder(fit.turns, layout)
