"""Local clusters of GPU workers: dask-cuda's ``LocalCUDACluster``, with several worker processes
per GPU where the run's resources ask for them (:func:`tilelabel.resources.gpu.cluster_shape`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from tilelabel.cluster.local import quiet_logs
from tilelabel.cores import usable_cores


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


def cuda_cluster(
    gpus: int | None = None,
    workers_per_gpu: int | None = None,
    threads_per_worker: int | None = None,
    most_threads: int | None = None,
    **kwargs,
):
    """A ``dask_cuda.LocalCUDACluster`` on the first ``gpus`` GPUs of ``CUDA_VISIBLE_DEVICES``
    (default: all), with ``workers_per_gpu`` worker processes on each (default, and threads per
    worker: :func:`tilelabel.resources.gpu.cluster_shape` for the GPU's share of the cores and
    the room its free memory has, at most ``most_threads`` worker threads in all by default).
    ``kwargs`` go to ``LocalCUDACluster``."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        raise RuntimeError(
            "backend 'cuda' starts a dask_cuda.LocalCUDACluster, but dask-cuda is not "
            "installed: pip install 'tilelabel[gpu]' (or pass --scheduler ADDRESS)"
        ) from e
    from tilelabel.resources.gpu import cluster_shape, memory_slots

    # an empty CUDA_VISIBLE_DEVICES falls back to dask-cuda's count
    visible = visible_gpus(os.environ) or visible_gpus({})
    if gpus is not None and gpus > len(visible):
        raise ValueError(f"{gpus} GPU workers asked for, but only {len(visible)} GPUs are visible")
    devices = visible[: gpus or len(visible)]
    cores = max(1, usable_cores() // len(devices))
    if most_threads is not None:  # no more workers than the run has chunks for
        cores = min(cores, max(1, -(-most_threads // len(devices))))
    # every GPU gets as many workers: the one with the least room decides
    known = [s for s in map(memory_slots, devices) if s] if workers_per_gpu is None else []
    workers_per_gpu, threads_per_worker = cluster_shape(
        cores, min(known) if known else None, workers_per_gpu, threads_per_worker
    )
    kwargs.setdefault("silence_logs", quiet_logs())
    cls = LocalCUDACluster if workers_per_gpu == 1 else _shared_gpu_cluster_class()
    extra = {} if workers_per_gpu == 1 else {"workers_per_gpu": workers_per_gpu}
    return cls(
        CUDA_VISIBLE_DEVICES=",".join(devices),
        n_workers=len(devices) * workers_per_gpu,
        threads_per_worker=threads_per_worker,
        **extra,
        **kwargs,
    )


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
