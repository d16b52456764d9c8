"""Batch clusters through dask-jobqueue: a ``cluster: {kind: slurm, ...}`` run config section.

Each Slurm job runs one dask worker per core (CPU, single-threaded like the local cluster) or,
with ``gpus: N``, :mod:`tilelabel.cluster.gpu_worker`, which starts ``workers_per_gpu``
workers on each GPU that Slurm gives the job through ``--gres=gpu:N``. By default that is one
per core of the GPU's share of the job, at most 16 and at most one per 4 GiB of the GPU's free
memory when the job starts, as on a local GPU cluster. The scheduler runs in the submitting
process; ``scale`` jobs are submitted and the run starts once their workers have connected (or
``wait_timeout`` seconds have passed and at least one has). dask-jobqueue is an optional extra:
``pip install 'tilelabel[slurm]'``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from distributed import Client

log = logging.getLogger("tilelabel")

#: the module GPU jobs run (``python -m ...``): several dask workers per GPU
GPU_WORKER_COMMAND = "tilelabel.cluster.gpu_worker"
DEFAULTS = {"cores": 1, "memory": "4GiB", "scale": 1, "wait_timeout": 600.0}
#: spec keys handled here rather than passed on to SLURMCluster
_OURS = ("kind", "gpus", "workers_per_gpu", "scale", "wait_timeout")


def slurm_kwargs(spec: dict[str, Any]) -> dict[str, Any]:
    """SLURMCluster keyword arguments for a validated ``cluster:`` spec of kind ``slurm``."""
    spec = {**DEFAULTS, **spec}
    kwargs = {k: v for k, v in spec.items() if k not in _OURS}
    gpus = int(spec.get("gpus", 0))
    extra = list(kwargs.get("job_extra_directives", []))
    if gpus:
        from tilelabel.resources.gpu import cluster_shape

        extra.append(f"--gres=gpu:{gpus}")
        fit = fits_memory(spec)
        per_gpu = spec.get("workers_per_gpu")
        if fit:  # a local GPU cluster's shape on the GPU's share of the cores; room: on the node
            per_gpu = cluster_shape(max(1, kwargs["cores"] // gpus), None)[0]
        kwargs["worker_command"] = GPU_WORKER_COMMAND
        kwargs["worker_extra_args"] = [
            *kwargs.get("worker_extra_args", []),
            "--workers-per-gpu",
            str(per_gpu),
            *(["--fit-memory"] if fit else []),
        ]
        # jobqueue divides the job's cores and memory by its processes: one per worker (the
        # most: a job whose GPUs have less room starts fewer, and each gets this share)
        kwargs["processes"] = gpus * per_gpu
        kwargs["cores"] = max(kwargs["cores"], gpus * per_gpu)
    else:
        # single-threaded worker processes, one per core (as LocalCluster does here)
        kwargs.setdefault("processes", kwargs["cores"])
    kwargs["job_extra_directives"] = extra
    return kwargs


def fits_memory(spec: dict[str, Any]) -> bool:
    """Whether ``spec``'s jobs size their workers by their GPUs' free memory when they start
    (GPU jobs without ``workers_per_gpu``): their worker count is then only the most."""
    return bool(int(spec.get("gpus", 0))) and spec.get("workers_per_gpu") is None


def slurm_cluster(spec: dict[str, Any], **overrides: Any):
    """A ``dask_jobqueue.SLURMCluster`` (no jobs submitted yet) for a ``cluster:`` spec."""
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as e:
        raise RuntimeError(
            "cluster kind 'slurm' needs dask-jobqueue: pip install 'tilelabel[slurm]'"
        ) from e
    return SLURMCluster(**{**slurm_kwargs(spec), **overrides})


def job_script(spec: dict[str, Any]) -> str:
    """The batch script each job of this spec would run (for review before a run)."""
    with slurm_cluster(spec, scheduler_options={"dashboard_address": ":0"}) as cluster:
        return cluster.job_script()


def workers_per_job(spec: dict[str, Any]) -> int:
    """Workers each job of ``spec`` starts (GPU jobs: the most, see :func:`wait_for_workers`)."""
    return int(slurm_kwargs(spec)["processes"])


def wait_for_workers(client: Client, jobs: int, per_job: int, timeout: float) -> int:
    """Wait until the workers of ``jobs`` jobs have connected; return how many have.

    A job is counted at ``per_job`` workers until one of its workers says, through its
    environment (:func:`tilelabel.cluster.gpu_worker.job_of_this_worker`), how many the job
    really started: a GPU job starts fewer where its GPUs' free memory has room for fewer.
    After ``timeout`` seconds the run goes on with the workers there are, if any."""
    from tilelabel.cluster.gpu_worker import job_of_this_worker

    started: dict[str, int] = {}  # job -> the workers it started
    asked: set[str] = set()
    deadline = time.monotonic() + timeout
    while True:
        workers = list(client.nthreads())
        new = [w for w in workers if w not in asked]
        if new:
            # a worker that left meanwhile answers with its error: asked again if it returns
            for w, answer in client.run(job_of_this_worker, workers=new, on_error="return").items():
                if isinstance(answer, Exception):
                    continue
                asked.add(w)
                job, n = answer
                if job is not None:
                    started[job] = n
        have, want = len(workers), sum(started.values()) + per_job * max(0, jobs - len(started))
        if have >= want:
            return have
        if time.monotonic() > deadline:
            if not have:
                raise RuntimeError(
                    f"no dask worker connected within {timeout} s of submitting "
                    "the Slurm jobs (see squeue and the jobs' output files)"
                )
            log.warning("starting with %d of %d workers; more join as jobs start", have, want)
            return have
        time.sleep(0.5)


@contextmanager
def connect_slurm(spec: dict[str, Any]) -> Iterator[Client]:
    """Submit ``scale`` jobs, wait for their workers, yield a client; cancel the jobs on exit."""
    spec = {**DEFAULTS, **spec}
    jobs, per_job = int(spec["scale"]), workers_per_job(spec)
    with slurm_cluster(spec) as cluster, Client(cluster) as c:
        log.debug("Slurm job script:\n%s", cluster.job_script())
        cluster.scale(jobs=jobs)
        log.info(
            "submitted %d Slurm job(s) for %s%d workers, dashboard at %s",
            jobs,
            "at most " if fits_memory(spec) else "",
            jobs * per_job,
            c.dashboard_link,
        )
        have = wait_for_workers(c, jobs, per_job, float(spec["wait_timeout"]))
        log.info("%d workers connected", have)
        yield c
