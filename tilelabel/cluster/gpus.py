"""Local clusters of GPU workers: dask-cuda's ``LocalCUDACluster``, one worker per GPU with a
few threads each (:func:`tilelabel.resources.gpu.worker_threads`)."""

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
    threads_per_worker: int | None = None,
    most_threads: int | None = None,
    **kwargs,
):
    """A ``dask_cuda.LocalCUDACluster`` of one worker on each of the first ``gpus`` GPUs of
    ``CUDA_VISIBLE_DEVICES`` (default: all), each of ``threads_per_worker`` threads (default:
    :func:`tilelabel.resources.gpu.worker_threads` for the GPU's share of the cores and the
    room its free memory has, at most ``most_threads`` worker threads in all). ``kwargs`` go
    to ``LocalCUDACluster``."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        raise RuntimeError(
            "backend 'cuda' starts a dask_cuda.LocalCUDACluster, but dask-cuda is not "
            "installed: pip install 'tilelabel[gpu]' (or pass --scheduler ADDRESS)"
        ) from e
    from tilelabel.resources.gpu import memory_slots, worker_threads

    # an empty CUDA_VISIBLE_DEVICES falls back to dask-cuda's count
    visible = visible_gpus(os.environ) or visible_gpus({})
    if gpus is not None and gpus > len(visible):
        raise ValueError(f"{gpus} GPU workers asked for, but only {len(visible)} GPUs are visible")
    devices = visible[: gpus or len(visible)]
    if threads_per_worker is None:
        cores = max(1, usable_cores() // len(devices))
        if most_threads is not None:  # no more threads than the run has chunks for
            cores = min(cores, max(1, -(-most_threads // len(devices))))
        # every GPU's worker gets as many threads: the one with the least room decides
        known = [s for s in map(memory_slots, devices) if s]
        threads_per_worker = worker_threads(cores, min(known) if known else None)
    kwargs.setdefault("silence_logs", quiet_logs())
    return LocalCUDACluster(
        CUDA_VISIBLE_DEVICES=",".join(devices),
        n_workers=len(devices),
        threads_per_worker=threads_per_worker,
        **kwargs,
    )
