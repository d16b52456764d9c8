"""Batch clusters through dask-jobqueue: a ``cluster: {kind: slurm|pbs|lsf|sge|htcondor, ...}``
run config section, or ``kind: slurm-runner`` for scheduler and workers inside one allocation.

1. Jobs (``slurm``, ``pbs``, ``lsf``, ``sge``, ``htcondor``): the scheduler runs in the
   submitting process; ``scale`` jobs are submitted and the run starts once their workers have
   connected (or ``wait_timeout`` seconds have passed and at least one has). Each job runs one
   dask worker per core (CPU, single-threaded like the local cluster) or, with ``gpus: N``,
   :mod:`tilelabel.cluster.gpu_worker`, which starts one worker on each GPU the batch system
   gives the job (``CUDA_VISIBLE_DEVICES``), as a local GPU cluster does: a thread per core of
   the GPU's share of the job, at most 8 and one per 4 GiB of the GPU's free memory when the job
   starts. Only the GPU directive differs between the systems (:data:`GPU_REQUEST`).
2. A site's ``jobqueue.yaml`` (dask's config) is the base: keys the section leaves out come from
   there, and only where neither gives ``cores`` or ``memory`` do :data:`DEFAULTS` apply.
3. One allocation (``slurm-runner``): ``srun -n N tilelabel label ...`` runs the command in every
   task; dask-jobqueue's ``SLURMRunner`` makes task 0 the scheduler, task 1 the run and the
   others workers (:func:`serve_unless_client`, which the command calls, :func:`connect_runner`).

dask-jobqueue is an optional extra: ``pip install 'tilelabel[slurm]'``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dask
from distributed import Client

log = logging.getLogger("tilelabel")

#: the module GPU jobs run (``python -m ...``): a dask worker on each GPU
GPU_WORKER_COMMAND = "tilelabel.cluster.gpu_worker"
#: where neither the ``cluster:`` section nor the site's jobqueue config says
DEFAULTS = {"cores": 1, "memory": "4GiB", "scale": 1, "wait_timeout": 600.0}
#: spec keys handled here rather than passed on to the dask-jobqueue cluster
_OURS = ("kind", "gpus", "scale", "wait_timeout")
#: kind -> dask-jobqueue's cluster class and its config section (``jobqueue.<name>``)
BATCH_CLASSES = {
    "slurm": "SLURMCluster",
    "pbs": "PBSCluster",
    "lsf": "LSFCluster",
    "sge": "SGECluster",
    "htcondor": "HTCondorCluster",
}


def _pbs_gpus(gpus: int, kwargs: dict[str, Any]) -> None:
    # PBS Pro asks for GPUs inside the select statement; the default one is dask-jobqueue's own
    from dask_jobqueue.pbs import pbs_format_bytes_ceil

    spec = kwargs.get("resource_spec") or dask.config.get("jobqueue.pbs.resource-spec", None)
    if spec is None:
        memory = dask.utils.parse_bytes(kwargs["memory"])
        spec = f"select=1:ncpus={kwargs['cores']}:mem={pbs_format_bytes_ceil(memory)}"
    if "gpus=" not in spec:
        spec += f":ngpus={gpus}"
    kwargs["resource_spec"] = spec


def _directive(text: Callable[[int], str]) -> Callable[[int, dict[str, Any]], None]:
    def add(gpus: int, kwargs: dict[str, Any]) -> None:
        kwargs["job_extra_directives"] = [*kwargs["job_extra_directives"], text(gpus)]

    return add


def _htcondor_gpus(gpus: int, kwargs: dict[str, Any]) -> None:
    kwargs["job_extra_directives"] = {**kwargs["job_extra_directives"], "request_gpus": str(gpus)}


#: kind -> how a job asks for ``gpus`` GPUs (changes the cluster's keyword arguments in place)
GPU_REQUEST: dict[str, Callable[[int, dict[str, Any]], None]] = {
    "slurm": _directive(lambda n: f"--gres=gpu:{n}"),
    "pbs": _pbs_gpus,
    "lsf": _directive(lambda n: f'-gpu "num={n}"'),
    "sge": _directive(lambda n: f"-l gpu={n}"),
    "htcondor": _htcondor_gpus,
}


def _site(kind: str, key: str, default: Any = None) -> Any:
    """A key of the site's jobqueue config for ``kind`` (dask-jobqueue's names: dashes)."""
    return dask.config.get(f"jobqueue.{kind}.{key.replace('_', '-')}", default)


def batch_kwargs(spec: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of the dask-jobqueue cluster of a validated batch ``cluster:`` spec:
    the keys it gives, the site config's for the rest, and the GPU workers' command."""
    kind = spec["kind"]
    kwargs = {k: v for k, v in spec.items() if k not in _OURS}
    for key in ("cores", "memory"):
        if key not in kwargs and _site(kind, key) is None:
            kwargs[key] = DEFAULTS[key]
    cores = int(kwargs.get("cores") or _site(kind, "cores"))
    gpus = int(spec.get("gpus", 0))
    if gpus:
        # the site's directives and worker arguments stay; the GPUs' are added to them
        empty = {} if kind == "htcondor" else []
        kwargs.setdefault("job_extra_directives", _site(kind, "job_extra_directives") or empty)
        kwargs.setdefault("worker_extra_args", _site(kind, "worker_extra_args") or [])
        kwargs.setdefault("memory", _site(kind, "memory"))
        kwargs["worker_command"] = GPU_WORKER_COMMAND
        # jobqueue divides the job's cores and memory by its processes: one worker per GPU,
        # whose threads the worker command fits to its GPU
        kwargs["processes"] = gpus
        kwargs["cores"] = max(cores, gpus)
        GPU_REQUEST[kind](gpus, kwargs)
    elif "processes" not in kwargs and _site(kind, "processes") is None:
        # single-threaded worker processes, one per core (as LocalCluster does here)
        kwargs["processes"] = cores
    return kwargs


def batch_cluster(spec: dict[str, Any], **overrides: Any):
    """The dask-jobqueue cluster (no jobs submitted yet) of a batch ``cluster:`` spec."""
    kind = spec["kind"]
    try:
        import dask_jobqueue
    except ImportError as e:
        raise RuntimeError(
            f"cluster kind {kind!r} needs dask-jobqueue: pip install 'tilelabel[slurm]'"
        ) from e
    cls = getattr(dask_jobqueue, BATCH_CLASSES[kind])
    return cls(**{**batch_kwargs(spec), **overrides})


def job_script(spec: dict[str, Any]) -> str:
    """The batch script each job of this spec would run (for review before a run)."""
    with batch_cluster(spec, scheduler_options={"dashboard_address": ":0"}) as cluster:
        return cluster.job_script()


def workers_per_job(spec: dict[str, Any]) -> int:
    """Workers each job of ``spec`` starts (GPU jobs: one per GPU)."""
    kwargs = batch_kwargs(spec)
    return int(kwargs.get("processes") or _site(spec["kind"], "processes"))


def wait_for_workers(client: Client, want: int, timeout: float) -> int:
    """Wait until ``want`` workers have connected; return how many have. After ``timeout``
    seconds the run goes on with the workers there are, if any."""
    deadline = time.monotonic() + timeout
    while True:
        have = len(client.nthreads())
        if have >= want:
            return have
        if time.monotonic() > deadline:
            if not have:
                raise RuntimeError(
                    f"no dask worker connected within {timeout} s of submitting "
                    "the batch jobs (see the queue and the jobs' output files)"
                )
            log.warning("starting with %d of %d workers; more join as jobs start", have, want)
            return have
        time.sleep(0.5)


@contextmanager
def connect_batch(spec: dict[str, Any]) -> Iterator[Client]:
    """Submit ``scale`` jobs, wait for their workers, yield a client; cancel the jobs on exit."""
    spec = {"scale": DEFAULTS["scale"], "wait_timeout": DEFAULTS["wait_timeout"], **spec}
    jobs, per_job = int(spec["scale"]), workers_per_job(spec)
    with batch_cluster(spec) as cluster, Client(cluster) as c:
        log.debug("job script:\n%s", cluster.job_script())
        cluster.scale(jobs=jobs)
        log.info(
            "submitted %d %s job(s) for %d workers, dashboard at %s",
            jobs,
            spec["kind"],
            jobs * per_job,
            c.dashboard_link,
        )
        have = wait_for_workers(c, jobs * per_job, float(spec["wait_timeout"]))
        log.info("%d workers connected", have)
        yield c


# -- one allocation: SLURMRunner ------------------------------------------------------------------

#: the task of an ``srun`` that runs the run (SLURMRunner's client); task 0 is the scheduler
CLIENT_TASK = 1


def runner_class(client: bool = False) -> type:
    """dask-jobqueue's ``SLURMRunner``. Its module's import makes Ctrl-C exit the process
    wherever it lands, as the scheduler and workers it serves need; for the run's own task
    (``client``), Ctrl-C's handler is put back, so that it stops the run as anywhere else."""
    ctrl_c = signal.getsignal(signal.SIGINT)
    try:
        from dask_jobqueue.slurm import SLURMRunner
    except ImportError as e:
        raise RuntimeError(
            "cluster kind 'slurm-runner' needs dask-jobqueue: pip install 'tilelabel[slurm]'"
        ) from e
    if client and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, ctrl_c)
    return SLURMRunner


def _runner(spec: dict[str, Any], client: bool = False):
    SLURMRunner = runner_class(client)  # noqa: N806
    worker = {"nthreads": spec.get("threads_per_worker", 1)}
    if "local_directory" in spec:
        worker["local_directory"] = spec["local_directory"]
    kwargs = {"worker_options": worker, "scheduler_options": {"dashboard_address": ":0"}}
    if "scheduler_file" in spec:
        kwargs["scheduler_file"] = spec["scheduler_file"]
    return SLURMRunner(**kwargs)


def serves(cluster: dict[str, Any] | None) -> bool:
    """Whether this process is a task of a ``slurm-runner`` allocation other than the run's
    (:data:`CLIENT_TASK`): one that serves the run as its scheduler or a worker."""
    if cluster is None or cluster["kind"] != "slurm-runner":
        return False
    if "SLURM_PROCID" not in os.environ:
        raise RuntimeError(
            "cluster kind 'slurm-runner' runs inside a Slurm allocation, in every task of an "
            "srun (e.g. srun -n 4 tilelabel label ...); SLURM_PROCID is not set here"
        )
    return int(os.environ["SLURM_PROCID"]) != CLIENT_TASK


def serve_unless_client(cluster: dict[str, Any] | None) -> None:
    """In a ``slurm-runner`` allocation's tasks other than the run's: be its scheduler or one of
    its workers until the run ends, then exit the process; elsewhere, return at once.

    The ``tilelabel`` command's first step, before a run opens anything, so that only the run's
    task reads and writes; a Python script that every task of an ``srun`` runs calls it before
    :func:`tilelabel.label_zarr`."""
    if not serves(cluster):
        return
    with _runner(cluster):  # returns only when the scheduler shuts down
        pass
    sys.exit(0)


@contextmanager
def connect_runner(spec: dict[str, Any]) -> Iterator[Client]:
    """The run's task of a ``slurm-runner`` allocation: wait for the other tasks' workers,
    yield a client; the scheduler and workers shut down on exit."""
    with _runner(spec, client=True) as runner, Client(runner) as c:
        want = runner.n_workers
        timeout = float(spec.get("wait_timeout", DEFAULTS["wait_timeout"]))
        c.wait_for_workers(want, timeout=timeout)
        log.info("%d workers of this allocation connected", want)
        yield c
