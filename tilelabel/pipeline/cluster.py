"""Getting a dask.distributed client: an existing one, a scheduler address, or a local cluster."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, LocalCluster

log = logging.getLogger("tilelabel")


def default_workers() -> int:
    return max(
        1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )


@contextmanager
def connect(
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    backend: str = "cpu",
    cluster: dict | None = None,
) -> Iterator[Client]:
    """Yield a client; clusters started here are closed on exit, others are left running.

    Order: an explicit ``client``; a ``scheduler`` address (or scheduler file path); the client
    already active in this process; otherwise a new local cluster: ``LocalCUDACluster`` with one
    worker per visible GPU for the ``cuda`` backend, else a ``LocalCluster`` of single-threaded
    worker processes (the kernels are sequential per chunk; processes avoid the GIL in the
    pipeline's numpy glue).

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
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as e:
            raise RuntimeError(
                "backend 'cuda' starts a dask_cuda.LocalCUDACluster, but dask-cuda is not "
                "installed: pip install 'tilelabel[gpu]' (or pass --scheduler ADDRESS)"
            ) from e
        from dask_cuda.utils import get_n_gpus

        # one worker per GPU in CUDA_VISIBLE_DEVICES (dask-cuda reads it), each with its share
        # of the cores (at most 8): the GPU labels a chunk in milliseconds, while reading,
        # decoding, encoding and writing its zarr chunks takes host threads
        gpus = workers or get_n_gpus()
        cluster = LocalCUDACluster(
            n_workers=workers,
            threads_per_worker=max(2, min(8, default_workers() // max(gpus, 1))),
            silence_logs=max(logging.getLogger("distributed").getEffectiveLevel(), logging.INFO),
        )
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
