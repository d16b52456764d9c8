"""The ``cuda`` backend's resources: GPU memory, the GPU's compression, and the GPU cluster.

A volume that fits one GPU is labeled in this process, by as many threads as the GPU has room
for (:meth:`GPUResources.in_process`). Larger volumes get a local GPU cluster of one worker
process per GPU, as dask-cuda makes it, with a few threads (:func:`gpu_shape`,
:func:`worker_threads`): the GPU decodes each chunk's input, labels it and compresses its
output, so the host's threads only move bytes. Every worker thread may hold a chunk on the GPU
at once; the run's plan is checked against the GPUs' free memory with all of them counted
(:mod:`.gpu_memory`). The GPU compresses the output where its codec allows (:mod:`.encoding`).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping

from tilelabel.chunking import plan_for_run, plan_for_storage
from tilelabel.cores import usable_cores
from tilelabel.resources import gpu_memory
from tilelabel.resources.encoding import MIN_BATCH_TILES, GPUEncoder, encodes
from tilelabel.resources.plan import ClusterShape, PlanRequest, RunPlan, Workload
from tilelabel.storage import Created, raw_chunks, raw_codec

#: voxels per processing chunk aimed for when the run names none: per-chunk host work outweighs
#: finer overlap below this on a GPU
TARGET_VOXELS = 512**3

#: most worker threads a GPU gets by default: each may hold a chunk on the GPU, and past 8 they
#: add GPU memory faster than speed (``benchmarks/pipeline.py`` with ``--threads-per-worker``)
THREADS_PER_GPU = 8

#: GPU memory each worker thread should have: a 512^3 chunk needs about 2 GiB, a worker's CUDA
#: context and kept labels some 1 GiB more
GPU_MEMORY_PER_WORKER = 4 << 30


def worker_threads(cores: int, room: int | None) -> int:
    """Threads of the one worker of a GPU with ``cores`` cores of the node and room for
    ``room`` worker threads (None: not known): a thread per core, at most
    :data:`THREADS_PER_GPU` and ``room``. Every worker thread may hold a chunk on the GPU, so
    threads beyond its room would only make the run give up its defaults
    (:mod:`.gpu_memory`)."""
    return max(1, min(cores, room or cores, THREADS_PER_GPU))


def free_memory(device: str) -> int | None:
    """The free memory of ``device`` (an NVML index or UUID, as in ``CUDA_VISIBLE_DEVICES``)
    now, through NVML without a CUDA context; None where NVML cannot tell. Free, not total: a
    GPU shared with other processes (a notebook's CuPy pool, another job) has only what they
    leave."""
    try:
        import pynvml

        pynvml.nvmlInit()
        if device.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(device))
        else:
            handle = pynvml.nvmlDeviceGetHandleByUUID(device.encode())
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).free)
    except Exception:  # NVML unusable here: the run's own memory check still applies
        return None


def room_on(device: str) -> int | None:
    """How many worker threads of :data:`GPU_MEMORY_PER_WORKER` the device's free memory holds
    now (None where NVML cannot tell)."""
    free = free_memory(device)
    return None if free is None else room_in(free)


def room_in(free: int) -> int:
    """Worker threads of :data:`GPU_MEMORY_PER_WORKER` that ``free`` bytes hold (at least one)."""
    return max(1, free // GPU_MEMORY_PER_WORKER)


def visible_gpus(env: Mapping[str, str]) -> list[str]:
    """The GPUs a process may use: ``CUDA_VISIBLE_DEVICES`` if set, else every GPU NVML
    counts."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return [d.strip() for d in value.split(",") if d.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception as e:
        raise RuntimeError(
            "CUDA_VISIBLE_DEVICES is not set and NVML, which would count the GPUs, is not "
            f"usable here ({e}): pip install 'tilelabel[cuda13]' (or [cuda12])"
        ) from e


def gpu_shape(
    gpus: int | None = None,
    threads_per_worker: int | None = None,
    most_threads: int | None = None,
) -> ClusterShape:
    """A local GPU cluster of one worker on each of the first ``gpus`` GPUs of
    ``CUDA_VISIBLE_DEVICES`` (default: all), each of ``threads_per_worker`` threads (default:
    :func:`worker_threads` for the GPU's share of the cores and the room its free memory has,
    at most ``most_threads`` worker threads in all)."""
    # an empty CUDA_VISIBLE_DEVICES falls back to NVML's count
    visible = visible_gpus(os.environ) or visible_gpus({})
    if gpus is not None and gpus > len(visible):
        raise ValueError(f"{gpus} GPU workers asked for, but only {len(visible)} GPUs are visible")
    devices = visible[: gpus or len(visible)]
    if threads_per_worker is None:
        cores = max(1, usable_cores() // len(devices))
        if most_threads is not None:  # no more threads than the run has chunks for
            cores = min(cores, max(1, -(-most_threads // len(devices))))
        # every GPU's worker gets as many threads: the one with the least room decides
        known = [r for r in map(room_on, devices) if r]
        threads_per_worker = worker_threads(cores, min(known) if known else None)
    return ClusterShape(workers=len(devices), threads=threads_per_worker, gpus=tuple(devices))


def first_gpu() -> str:
    """The GPU this process labels on: the first of ``CUDA_VISIBLE_DEVICES``, else GPU 0."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    return next((d for d in visible if d), "0")


def fits_one_gpu(workload: Workload, free: int) -> bool:
    """Whether ``free`` bytes of a GPU could hold ``workload``'s whole volume twice over, input
    and uint32 labels: a volume that one process labels on one GPU sooner than a cluster of
    worker processes starts."""
    return 2 * workload.voxels * (workload.itemsize + 4) <= free


def warm_encoder_soon(codec: str) -> None:
    """Load the GPU encoder in a background thread of this worker while the labeling pass
    runs, so that the first writes do not wait for the library (nothing where this process has
    it loaded already: each such thread makes and drops a stream and a codec of its own)."""
    from tilelabel.kernels.backends import get_backend

    encoder = get_backend("cuda").encoder
    if encoder.ready(codec):
        return
    threading.Thread(target=encoder.warm, args=(codec,), daemon=True, name="tilelabel-warm").start()


@functools.cache
def warm_borders_soon() -> None:
    """Load the border merge's numba kernels in a background thread of this worker, once,
    while the labeling pass runs: where chunks meet, the first of them would otherwise wait for
    numba to load (and, on a fresh install, compile) them."""
    from tilelabel.kernels.cpu import ops as cpu_ops

    threading.Thread(target=cpu_ops.warm, daemon=True, name="tilelabel-warm-borders").start()


class GPUResources:
    """The ``cuda`` backend's :class:`tilelabel.resources.Resources`."""

    backend = "cuda"

    def check_here(self) -> None:
        from tilelabel.kernels.backends import get_backend

        get_backend("cuda")  # a clear error where this process has no usable GPU

    def in_process(self, workload: Workload, *, workers: int | None = None) -> int | None:
        """A thread per core, at most :data:`THREADS_PER_GPU`, one per tile and one per
        :data:`GPU_MEMORY_PER_WORKER` of free memory, where the volume fits the first GPU
        (:func:`fits_one_gpu`) and no workers are asked for."""
        if workers is not None:
            return None
        free = free_memory(first_gpu())
        if free is None or not fits_one_gpu(workload, free):
            return None
        return workload.threads(worker_threads(usable_cores(), room_in(free)))

    def cluster_shape(self, workload: Workload, *, workers: int | None = None) -> ClusterShape:
        """One worker on each of ``workers`` GPUs (default: all; :func:`gpu_shape`), at most one
        worker thread per tile."""
        return gpu_shape(workers, most_threads=workload.tiles)

    def fit(self, ex, request: PlanRequest) -> RunPlan:
        """The first run that fits the GPUs (:func:`.gpu_memory.first_that_fits`), the GPU
        compressing the output only where it (made like the input) has chunks the GPU can
        compress."""
        r = request
        shape, storage, chunks = r.shape, r.storage, r.chunks
        threads = ex.threads()
        itemsize, tile = r.like.dtype.itemsize, tuple(r.like.chunks)[-len(shape) :]
        # each worker has a GPU
        check = gpu_memory.gpu_check(ex, threads, storage, r.connectivity, itemsize, tile)
        encode = encodes(r.gpu_encode, plan_for_storage(shape, storage, storage).nchunks)
        codec = raw_codec(r.like) if encode else None
        nthreads = sum(threads.values()) or 1

        def chunks_for(encoding: bool, largest: int | None = None):
            # chunks the GPU compresses keep enough storage tiles to keep it busy
            min_tiles = MIN_BATCH_TILES if encoding else 1
            largest = largest or TARGET_VOXELS
            return plan_for_run(
                shape, storage, chunks, nthreads, largest, min_tiles, r.stored, r.fill
            )

        return gpu_memory.first_that_fits(
            check=check,
            chunks_for=chunks_for,
            connectivity=r.connectivity,
            threads=nthreads,
            codec=codec,
            keep_labels=r.keep_labels,
            keep_input=r.keep_input,
            may_drop_encoder=r.gpu_encode is None,
            may_shrink=chunks is None,
            per_worker=max(threads.values(), default=1),
        )

    def warm_ups(self, run_plan: RunPlan) -> list[Callable[[], None]]:
        """Where the GPU compresses the output, its encoder; where chunks meet, the border
        merge's kernels."""
        out: list[Callable[[], None]] = []
        if run_plan.codec is not None:
            out.append(functools.partial(warm_encoder_soon, run_plan.codec))
        if run_plan.chunks.nchunks > 1:
            out.append(warm_borders_soon)
        return out

    def encoder(self, run_plan: RunPlan, created: Created) -> GPUEncoder | None:
        if not run_plan.encode:
            return None
        layout = raw_chunks(created.array, len(created.index))
        return None if layout is None else GPUEncoder(layout)
