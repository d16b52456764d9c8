"""Getting a dask.distributed client: an existing one, a scheduler address, a ``cluster:``
section, or a local cluster started for the run (one that needs a cluster: see
:mod:`tilelabel.pipeline.executors`)."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from distributed import Client, LocalCluster

from tilelabel.cluster.kinds import BATCH_KINDS
from tilelabel.cores import usable_cores

log = logging.getLogger("tilelabel")


def quiet_logs() -> int:
    """The level below which a local cluster's workers log nothing: distributed's own, at least
    INFO (its per-worker start-up lines)."""
    return max(logging.getLogger("distributed").getEffectiveLevel(), logging.INFO)


def cpu_cluster(workers: int | None = None) -> LocalCluster:
    """A ``LocalCluster`` of ``workers`` single-threaded worker processes (default: one per
    usable core): the CPU kernels are sequential per chunk, and processes keep the pipeline's
    numpy glue from sharing one GIL."""
    return LocalCluster(
        n_workers=workers or usable_cores(),
        threads_per_worker=1,
        processes=True,
        silence_logs=quiet_logs(),
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


def _local_kind(kind: str) -> Callable[..., Any]:
    """The ``local`` / ``local-cuda`` kind's cluster factory (its backend's, see resources)."""
    from tilelabel.resources import for_backend

    return for_backend("cuda" if kind == "local-cuda" else "cpu").local_cluster


@contextmanager
def connect(
    *,
    client: Client | None = None,
    scheduler: str | None = None,
    cluster: dict[str, Any] | None = None,
    local: Callable[..., Any],
    work: Any,
    workers: int | None = None,
) -> Iterator[Client]:
    """Yield a client; clusters started here are closed on exit, others are left running.

    Order: ``client``; a ``scheduler`` address (or scheduler file path); a ``cluster:`` section
    (:mod:`.kinds`: ``scheduler`` connects to its address, ``local`` and ``local-cuda`` start
    those clusters, ``slurm``, ``pbs``, ``lsf``, ``sge`` and ``htcondor`` submit dask-jobqueue
    jobs, ``slurm-runner`` joins the tasks of its allocation); else ``local(work, workers=...)``,
    the run's backend's own local cluster for its :class:`~tilelabel.resources.Work`.
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
        local = _local_kind(kind)
        workers = workers or cluster.get("workers")
    closed_before()
    started = local(work, workers=workers)
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
