"""Local clusters: a ``LocalCluster`` of CPU worker processes or dask-cuda's
``LocalCUDACluster`` of one worker per GPU, of the shape the run's backend's resources advise
(:meth:`tilelabel.resources.Resources.cluster_shape`), closed in the background once the run
is done."""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Any

from distributed import LocalCluster

from tilelabel.resources import ClusterShape, Workload, for_backend
from tilelabel.resources.gpu import gpu_shape

log = logging.getLogger("tilelabel")


def quiet_logs() -> int:
    """The level below which a local cluster's workers log nothing: distributed's own, at least
    INFO (its per-worker start-up lines)."""
    return max(logging.getLogger("distributed").getEffectiveLevel(), logging.INFO)


def cpu_cluster(shape: ClusterShape, **kwargs) -> LocalCluster:
    """A ``LocalCluster`` of ``shape``'s worker processes (``kwargs`` go to it)."""
    kwargs.setdefault("silence_logs", quiet_logs())
    return LocalCluster(
        n_workers=shape.workers, threads_per_worker=shape.threads, processes=True, **kwargs
    )


def local_cluster(backend: str, workload: Workload, workers: int | None = None) -> Any:
    """The local cluster of ``backend`` for ``workload`` (``workers``: its processes, or with
    ``cuda`` its GPUs), of the shape the backend's resources advise; its workers leave SIGINT
    to this process (:mod:`.interrupts`)."""
    shape = for_backend(backend).cluster_shape(workload, workers=workers)
    make = gpu_cluster if shape.gpus else cpu_cluster
    return make(shape, preload=["tilelabel.cluster.interrupts"])


def cuda_cluster(
    gpus: int | None = None,
    threads_per_worker: int | None = None,
    most_threads: int | None = None,
    **kwargs,
):
    """A ``dask_cuda.LocalCUDACluster`` of one worker on each of the first ``gpus`` GPUs of
    ``CUDA_VISIBLE_DEVICES`` (default: all), each of ``threads_per_worker`` threads (default:
    :func:`tilelabel.resources.gpu.gpu_shape`'s for the GPU's share of the cores and the room
    its free memory has, at most ``most_threads`` worker threads in all). ``kwargs`` go to
    ``LocalCUDACluster``."""
    return gpu_cluster(gpu_shape(gpus, threads_per_worker, most_threads), **kwargs)


def gpu_cluster(shape: ClusterShape, **kwargs):
    """The ``LocalCUDACluster`` of ``shape``: a worker on each of its GPUs."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        raise RuntimeError(
            "backend 'cuda' starts a dask_cuda.LocalCUDACluster, but dask-cuda is not "
            "installed: pip install 'tilelabel[gpu]' (or pass --scheduler ADDRESS)"
        ) from e
    kwargs.setdefault("silence_logs", quiet_logs())
    return LocalCUDACluster(
        CUDA_VISIBLE_DEVICES=",".join(shape.gpus),
        n_workers=shape.workers,
        threads_per_worker=shape.threads,
        **kwargs,
    )


#: clusters of finished runs still closing (:func:`close_soon`)
_closing: list[threading.Thread] = []


def close_soon(cluster: Any) -> None:
    """Close ``cluster`` in the background: a run returns once its output is complete, not once
    its workers have stopped. A process that exits normally waits for the close first; the
    ``tilelabel`` command exits at once, and its workers end with it (each worker process
    watches its parent)."""
    if not _closing:
        atexit.register(closed_before)  # runs before distributed's own exit handler
    thread = threading.Thread(target=cluster.close, name="tilelabel-close", daemon=True)
    thread.start()
    _closing.append(thread)


def closed_before() -> None:
    """Wait until the clusters of earlier runs have closed: a new cluster must not find their
    workers holding memory (a GPU's free memory sizes its workers)."""
    while _closing:
        _closing.pop().join()
