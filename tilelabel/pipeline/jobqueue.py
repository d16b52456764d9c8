"""Batch clusters through dask-jobqueue: a ``cluster: {kind: slurm, ...}`` run config section.

Each Slurm job runs one dask worker per core (CPU, single-threaded like the local cluster) or,
with ``gpus: N``, :mod:`tilelabel.pipeline.gpu_worker`, which starts ``workers_per_gpu``
workers on each GPU that Slurm gives the job through ``--gres=gpu:N`` (by default one per core
of the GPU's share of the job, at most 16, as on a local GPU cluster). The scheduler runs in the
submitting process; ``scale`` jobs are submitted and the run starts once their workers have
connected (or ``wait_timeout`` seconds have passed and at least one has). dask-jobqueue is an
optional extra: ``pip install 'tilelabel[slurm]'``.
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
GPU_WORKER_COMMAND = "tilelabel.pipeline.gpu_worker"
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
        from tilelabel.pipeline.cluster import MAX_WORKERS_PER_GPU

        extra.append(f"--gres=gpu:{gpus}")
        per_gpu = spec.get("workers_per_gpu")
        if per_gpu is None:  # single-threaded workers on the GPU's share of the cores
            per_gpu = min(MAX_WORKERS_PER_GPU, max(1, kwargs["cores"] // gpus))
        kwargs["worker_command"] = GPU_WORKER_COMMAND
        kwargs["worker_extra_args"] = [
            *kwargs.get("worker_extra_args", []),
            "--workers-per-gpu",
            str(per_gpu),
        ]
        # jobqueue divides the job's cores and memory by its processes: one per worker
        kwargs["processes"] = gpus * per_gpu
        kwargs["cores"] = max(kwargs["cores"], gpus * per_gpu)
    else:
        # single-threaded worker processes, one per core (as LocalCluster does here)
        kwargs.setdefault("processes", kwargs["cores"])
    kwargs["job_extra_directives"] = extra
    return kwargs


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
    return int(slurm_kwargs(spec)["processes"])


@contextmanager
def connect_slurm(spec: dict[str, Any]) -> Iterator[Client]:
    """Submit ``scale`` jobs, wait for their workers, yield a client; cancel the jobs on exit."""
    spec = {**DEFAULTS, **spec}
    want = int(spec["scale"]) * workers_per_job(spec)
    with slurm_cluster(spec) as cluster, Client(cluster) as c:
        log.debug("Slurm job script:\n%s", cluster.job_script())
        cluster.scale(jobs=int(spec["scale"]))
        log.info(
            "submitted %d Slurm job(s) for %d workers, dashboard at %s",
            spec["scale"],
            want,
            c.dashboard_link,
        )
        deadline = time.monotonic() + float(spec["wait_timeout"])
        while True:
            have = len(c.scheduler_info(n_workers=-1)["workers"])
            if have >= want:
                break
            if time.monotonic() > deadline:
                if have == 0:
                    raise RuntimeError(
                        f"no dask worker connected within {spec['wait_timeout']} s of submitting "
                        "the Slurm jobs (see squeue and the jobs' output files)"
                    )
                log.warning("starting with %d of %d workers; more join as jobs start", have, want)
                break
            time.sleep(0.5)
        log.info("%d workers connected", have)
        yield c
