"""Several dask workers on each GPU of a batch job: the worker command of Slurm GPU jobs.

``python -m tilelabel.cluster.gpu_worker [SCHEDULER] --workers-per-gpu K [--fit-memory]
[dask worker options]``
starts, for each GPU the job was given (``CUDA_VISIBLE_DEVICES``, which Slurm sets for
``--gres=gpu:N``), one ``dask worker --nworkers K`` that sees only that GPU, and waits for them.
The other options (``--name``, ``--nthreads``, ``--memory-limit``, ``--death-timeout``, ...)
are those of ``dask worker`` and apply to every worker; the workers on the job's ``d``-th GPU
are named ``NAME-gpu{d}-{k}``. A signal to this process (Slurm's at the end of a job) goes to every
``dask worker`` it started.

``dask cuda worker`` starts one worker per GPU, as a local GPU cluster does
(:func:`tilelabel.cluster.gpus.cuda_cluster`); a batch job's shape is fixed when it is
submitted, and this launcher keeps several single-threaded workers per GPU for it
(:data:`tilelabel.cluster.jobqueue.MAX_WORKERS_PER_GPU`).

With ``--fit-memory``, K is the most: a GPU gets no more workers than its free memory has room
for when the job starts (:func:`tilelabel.resources.gpu.memory_slots`). A batch job is
submitted before anyone can ask its GPUs, so every worker this module starts has the job's
real worker count in its environment (:data:`JOB_ENV`, :data:`JOB_WORKERS_ENV`): the
submitting process waits for those, not for the count it submitted
(:func:`tilelabel.cluster.jobqueue.wait_for_workers`).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence

from tilelabel.cluster.gpus import visible_gpus
from tilelabel.resources.gpu import memory_slots

#: environment of every worker started here: its job (launcher) and that job's worker count
JOB_ENV = "TILELABEL_JOB"
JOB_WORKERS_ENV = "TILELABEL_JOB_WORKERS"


def job_of_this_worker() -> tuple[str | None, int]:
    """(job, workers the job started) from a worker's environment; (None, 0) for a worker not
    started by this module. Run on workers through ``Client.run``."""
    job = os.environ.get(JOB_ENV)
    return (job, int(os.environ[JOB_WORKERS_ENV])) if job else (None, 0)


def worker_commands(
    argv: Sequence[str],
    gpus: Sequence[str],
    python: str = sys.executable,
    slots: Callable[[str], int | None] = memory_slots,
) -> list[tuple[list[str], dict[str, str]]]:
    """(command, environment changes) of the ``dask worker`` of each GPU, from this module's
    arguments; ``slots(gpu)``: the worker threads the GPU has room for (``--fit-memory``)."""
    argv = list(argv)
    # the scheduler's address comes first, or else --scheduler-file among the options: an
    # optional positional would take that option's value for an address
    scheduler = [argv.pop(0)] if argv and not argv[0].startswith("-") else []
    parser = argparse.ArgumentParser(prog="python -m tilelabel.cluster.gpu_worker")
    parser.add_argument("--workers-per-gpu", type=int, default=1)
    parser.add_argument("--fit-memory", action="store_true")
    parser.add_argument("--name")
    args, rest = parser.parse_known_args(argv)
    if args.workers_per_gpu < 1:
        parser.error(f"--workers-per-gpu must be >= 1, got {args.workers_per_gpu}")
    if "--nworkers" in rest or any(a.startswith("--nworkers=") for a in rest):
        parser.error("give --workers-per-gpu, not --nworkers")
    if not gpus:
        raise RuntimeError("this job sees no GPU (CUDA_VISIBLE_DEVICES is empty)")
    counts = [args.workers_per_gpu] * len(gpus)
    if args.fit_memory:  # K: the GPU's share of the job's cores, the most it may get
        counts = [min(args.workers_per_gpu, slots(gpu) or args.workers_per_gpu) for gpu in gpus]
        for gpu, n in zip(gpus, counts, strict=True):
            if n < args.workers_per_gpu:
                print(
                    f"gpu_worker: GPU {gpu}'s free memory has room for {n} of "
                    f"{args.workers_per_gpu} workers; starting {n}",
                    file=sys.stderr,
                    flush=True,
                )
    job = {JOB_ENV: f"{socket.gethostname()}:{os.getpid()}", JOB_WORKERS_ENV: str(sum(counts))}
    out = []
    for i, (gpu, n) in enumerate(zip(gpus, counts, strict=True)):
        cmd = [python, "-m", "distributed.cli.dask_worker", *scheduler, *rest]
        cmd += ["--nworkers", str(n)]
        if args.name:
            cmd += ["--name", f"{args.name}-gpu{i}"]
        out.append((cmd, {"CUDA_VISIBLE_DEVICES": gpu, **job}))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Start every GPU's ``dask worker``, pass signals on to them, and return the worst exit
    status once all have ended."""
    argv = sys.argv[1:] if argv is None else argv
    commands = worker_commands(argv, visible_gpus(os.environ))
    procs = [subprocess.Popen(cmd, env={**os.environ, **env}) for cmd, env in commands]

    def forward(signum, _frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    return max(abs(p.wait()) for p in procs)


if __name__ == "__main__":
    sys.exit(main())
