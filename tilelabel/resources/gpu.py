"""The ``cuda`` backend's resources: GPU memory, the GPU's compression, and the GPU cluster.

A volume that fits one GPU is labeled in this process, by as many threads as the GPU has room
for (:meth:`GPUResources.in_process`). Larger volumes get a local GPU cluster of one worker
process per GPU, as dask-cuda makes it, with a few threads (:func:`worker_threads`): the GPU
decodes each chunk's input, labels it and compresses its output, so the host's threads only
move bytes. Every worker thread may hold a chunk on the GPU at once; the run's plan is checked
against the GPUs' free memory with all of them counted (:mod:`.gpu_memory`). The GPU
compresses the output where its codec allows (:mod:`.encoding`).
"""

from __future__ import annotations

import functools
import os
import threading

from tilelabel.cores import usable_cores
from tilelabel.pipeline.plan import plan_for_run, plan_for_storage
from tilelabel.resources import gpu_memory
from tilelabel.resources.encoding import MIN_BATCH_TILES, GPUEncoder, encodes
from tilelabel.resources.fit import Fit, Request, Work
from tilelabel.storage import Created, raw_chunks, raw_codec

#: voxels per processing chunk aimed for when the run names none: per-chunk host work outweighs
#: finer overlap below this on a GPU
TARGET_VOXELS = 512**3

#: most worker threads a GPU gets by default: each may hold a chunk on the GPU, and past 8 they
#: add GPU memory faster than speed (``benchmarks/README.md``, "Where one worker's time goes")
THREADS_PER_GPU = 8

#: GPU memory each worker thread should have: a 512^3 chunk needs about 2 GiB, a worker's CUDA
#: context and kept labels some 1 GiB more
GPU_MEMORY_PER_WORKER = 4 << 30


def worker_threads(cores: int, slots: int | None) -> int:
    """Threads of the one worker of a GPU with ``cores`` cores of the node and room for
    ``slots`` worker threads (None: not known): a thread per core, at most
    :data:`THREADS_PER_GPU` and one per slot. Every worker thread may hold a chunk on the GPU,
    so threads beyond its room would only make the run give up its defaults
    (:mod:`.gpu_memory`)."""
    return max(1, min(cores, slots or cores, THREADS_PER_GPU))


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


def memory_slots(device: str) -> int | None:
    """How many worker threads of :data:`GPU_MEMORY_PER_WORKER` the device's free memory holds
    now (None where NVML cannot tell)."""
    free = free_memory(device)
    return None if free is None else slots_in(free)


def slots_in(free: int) -> int:
    """Worker threads of :data:`GPU_MEMORY_PER_WORKER` that ``free`` bytes hold (at least one)."""
    return max(1, free // GPU_MEMORY_PER_WORKER)


def first_gpu() -> str:
    """The GPU this process labels on: the first of ``CUDA_VISIBLE_DEVICES``, else GPU 0."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    return next((d for d in visible if d), "0")


def fits_one_gpu(work: Work, free: int) -> bool:
    """Whether ``free`` bytes of a GPU could hold ``work``'s whole volume twice over, input and
    uint32 labels: a volume that one process labels on one GPU sooner than a cluster of worker
    processes starts."""
    return 2 * work.voxels * (work.itemsize + 4) <= free


def _warm_encoder_soon(codec: str) -> None:
    """Load the GPU encoder in a background thread of this worker while the labeling pass
    runs, so that the first writes do not wait for the library (nothing where this process has
    it loaded already: each such thread makes and drops a stream and a codec of its own)."""
    from tilelabel.kernels.backends import get_backend

    encoder = get_backend("cuda").encoder
    if encoder.ready(codec):
        return
    threading.Thread(target=encoder.warm, args=(codec,), daemon=True, name="tilelabel-warm").start()


@functools.cache
def _warm_borders_soon() -> None:
    """Load the border merge's numba kernels in a background thread of this worker, once,
    while the labeling pass runs: where chunks meet, the first of them would otherwise wait for
    numba to load (and, on a fresh install, compile) them."""
    from tilelabel.kernels import cpu_ops

    threading.Thread(target=cpu_ops.warm, daemon=True, name="tilelabel-warm-borders").start()


class GPUResources:
    """The ``cuda`` backend's :class:`tilelabel.resources.Resources`."""

    backend = "cuda"

    def check_here(self) -> None:
        from tilelabel.kernels.backends import get_backend

        get_backend("cuda")  # a clear error where this process has no usable GPU

    def in_process(self, work: Work, *, workers: int | None = None) -> int | None:
        """A thread per core, at most :data:`THREADS_PER_GPU`, one per tile and one per
        :data:`GPU_MEMORY_PER_WORKER` of free memory, where the volume fits the first GPU
        (:func:`fits_one_gpu`) and no workers are asked for."""
        if workers is not None:
            return None
        free = free_memory(first_gpu())
        if free is None or not fits_one_gpu(work, free):
            return None
        return work.threads(worker_threads(usable_cores(), slots_in(free)))

    def local_cluster(self, work: Work, *, workers: int | None = None):
        """A local GPU cluster of one worker on each of ``workers`` GPUs (default: all;
        :func:`tilelabel.cluster.gpus.cuda_cluster`), at most one worker thread per tile."""
        from tilelabel.cluster.gpus import cuda_cluster

        return cuda_cluster(workers, most_threads=work.tiles)

    def fit(self, ex, request: Request) -> Fit:
        """The first run that fits the GPUs (:func:`.gpu_memory.fit`), the GPU compressing the
        output only where it (made like the input) has chunks the GPU can compress; where it
        does, every worker starts loading the encoder now."""
        r = request
        shape, storage, chunks = r.shape, r.storage, r.chunks
        threads = ex.threads()
        itemsize, tile = r.like.dtype.itemsize, tuple(r.like.chunks)[-len(shape) :]
        # each worker has a GPU
        ask = gpu_memory.asker(ex, threads, storage, r.connectivity, itemsize, tile)
        encode = encodes(r.gpu_encode, plan_for_storage(shape, storage, storage).nchunks)
        codec = raw_codec(r.like) if encode else None
        encode = codec is not None
        nthreads = sum(threads.values()) or 1

        def planned(encoding: bool, largest: int | None = None):
            # chunks the GPU compresses keep enough storage tiles to keep it busy
            min_tiles = MIN_BATCH_TILES if encoding else 1
            largest = largest or TARGET_VOXELS
            return plan_for_run(shape, storage, chunks, nthreads, largest, min_tiles)

        fit = gpu_memory.fit(
            ask=ask,
            planned=planned,
            connectivity=r.connectivity,
            threads=nthreads,
            encode=encode,
            keep_labels=r.keep_labels,
            keep_input=r.keep_input,
            may_drop_encoder=r.gpu_encode is None,
            may_shrink=chunks is None,
            per_worker=max(threads.values(), default=1),
        )
        if fit.encode:
            ex.each(_warm_encoder_soon, codec, lenient=True)  # a lost worker warms none
        if fit.plan.nchunks > 1:
            ex.each(_warm_borders_soon, lenient=True)
        return fit

    def encoder(self, fit: Fit, created: Created) -> GPUEncoder | None:
        if not fit.encode:
            return None
        layout = raw_chunks(created.array, len(created.index))
        return None if layout is None else GPUEncoder(layout)
