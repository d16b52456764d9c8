"""Getting a dask.distributed client for a run: an existing one, a scheduler address, a
``cluster:`` section (:mod:`.kinds`), or a local cluster started for it (:mod:`.local`; a run
that needs a cluster: see :mod:`tilelabel.workflow.executors`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from distributed import Client

from tilelabel.cluster.kinds import BATCH_KINDS
from tilelabel.cluster.local import close_soon, closed_before, local_cluster
from tilelabel.resources import Workload

log = logging.getLogger("tilelabel")


@contextmanager
def connect(
    *,
    client: Client | None = None,
    scheduler: str | None = None,
    cluster: dict[str, Any] | None = None,
    backend: str = "cpu",
    workload: Workload,
    workers: int | None = None,
) -> Iterator[Client]:
    """Yield a client; clusters started here are closed on exit, others are left running.

    Order: ``client``; a ``scheduler`` address (or scheduler file path); a ``cluster:`` section
    (:mod:`.kinds`: ``scheduler`` connects to its address, ``local`` and ``local-cuda`` start
    those clusters, ``slurm``, ``pbs``, ``lsf``, ``sge`` and ``htcondor`` submit dask-jobqueue
    jobs, ``slurm-runner`` joins the tasks of its allocation); else the local cluster of the
    run's ``backend`` for its :class:`~tilelabel.resources.Workload` (:func:`local_cluster`).
    ``workers`` overrides a local kind's own (with ``cuda``: the GPUs, a worker on each). A
    local cluster started here is closed in the background once the run is done
    (:func:`close_soon`). The client already active in this process is the caller's to pass.
    """
    if client is not None:
        yield client
        return
    kind = cluster["kind"] if cluster is not None and scheduler is None else None
    if kind in BATCH_KINDS or kind == "slurm-runner":
        from tilelabel.cluster import jobqueue

        how = jobqueue.connect_runner if kind == "slurm-runner" else jobqueue.connect_batch
        with how(cluster) as c:
            yield c
        return
    if kind == "scheduler":
        scheduler = cluster["address"]
    if scheduler is not None:
        key = "scheduler_file" if scheduler.endswith(".json") else "address"
        with Client(**{key: scheduler}) as c:
            yield c
        return
    if kind is not None:  # local or local-cuda
        backend = "cuda" if kind == "local-cuda" else "cpu"
        workers = workers or cluster.get("workers")
    closed_before()
    started = local_cluster(backend, workload, workers)
    try:
        with Client(started) as c:
            log.info(
                "local dask cluster of %d workers, dashboard at %s",
                len(c.nthreads()),
                c.dashboard_link,
            )
            yield c
    finally:
        close_soon(started)
