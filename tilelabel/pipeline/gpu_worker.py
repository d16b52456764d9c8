"""Several dask workers on each GPU of a batch job: the worker command of Slurm GPU jobs.

``python -m tilelabel.pipeline.gpu_worker [SCHEDULER] --workers-per-gpu K [dask worker options]``
starts, for each GPU the job was given (``CUDA_VISIBLE_DEVICES``, which Slurm sets for
``--gres=gpu:N``), one ``dask worker --nworkers K`` that sees only that GPU, and waits for them.
The other options (``--name``, ``--nthreads``, ``--memory-limit``, ``--death-timeout``, ...)
are those of ``dask worker`` and apply to every worker; the workers on the job's ``d``-th GPU
are named ``NAME-gpu{d}-{k}``. A signal to this process (Slurm's at the end of a job) goes to every
``dask worker`` it started.

``dask cuda worker`` starts one worker per GPU; several single-threaded processes per GPU decode
and encode zarr chunks in parallel, where one process's threads share one GIL (see
:func:`tilelabel.pipeline.cluster.cuda_cluster`, which does the same on one machine).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from tilelabel.pipeline.cluster import visible_gpus


def worker_commands(
    argv: Sequence[str], gpus: Sequence[str], python: str = sys.executable
) -> list[tuple[list[str], dict[str, str]]]:
    """(command, environment changes) of the ``dask worker`` of each GPU, from this module's
    arguments."""
    argv = list(argv)
    # the scheduler's address comes first, or else --scheduler-file among the options: an
    # optional positional would take that option's value for an address
    scheduler = [argv.pop(0)] if argv and not argv[0].startswith("-") else []
    parser = argparse.ArgumentParser(prog="python -m tilelabel.pipeline.gpu_worker")
    parser.add_argument("--workers-per-gpu", type=int, default=1)
    parser.add_argument("--name")
    args, rest = parser.parse_known_args(argv)
    if args.workers_per_gpu < 1:
        parser.error(f"--workers-per-gpu must be >= 1, got {args.workers_per_gpu}")
    if "--nworkers" in rest or any(a.startswith("--nworkers=") for a in rest):
        parser.error("give --workers-per-gpu, not --nworkers")
    if not gpus:
        raise RuntimeError("this job sees no GPU (CUDA_VISIBLE_DEVICES is empty)")
    out = []
    for i, gpu in enumerate(gpus):
        cmd = [python, "-m", "distributed.cli.dask_worker", *scheduler, *rest]
        cmd += ["--nworkers", str(args.workers_per_gpu)]
        if args.name:
            cmd += ["--name", f"{args.name}-gpu{i}"]
        out.append((cmd, {"CUDA_VISIBLE_DEVICES": gpu}))
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
