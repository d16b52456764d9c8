"""One dask worker on each GPU of a batch job: the worker command of GPU jobs.

``python -m tilelabel.cluster.gpu_worker [SCHEDULER] [dask worker options]``
starts, for each GPU the job was given (``CUDA_VISIBLE_DEVICES``, which Slurm sets for
``--gres=gpu:N``), one ``dask worker`` that sees only that GPU, and waits for them, as
``dask cuda worker`` would. The options (``--name``, ``--nthreads``, ``--memory-limit``,
``--death-timeout``, ...) are those of ``dask worker`` and apply to every worker; the worker on
the job's ``d``-th GPU is named ``NAME-gpu{d}``. Each gets ``--nthreads`` threads, at most
:data:`tilelabel.resources.gpu.THREADS_PER_GPU` and one per 4 GiB of its GPU's free memory
when the job starts (:func:`tilelabel.resources.gpu.worker_threads`). A signal to this process
(Slurm's at the end of a job) goes to every ``dask worker`` it started.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence

from tilelabel.resources.gpu import room_on, visible_gpus, worker_threads


def worker_commands(
    argv: Sequence[str],
    gpus: Sequence[str],
    python: str = sys.executable,
    room: Callable[[str], int | None] = room_on,
) -> list[tuple[list[str], dict[str, str]]]:
    """(command, environment changes) of the ``dask worker`` of each GPU, from this module's
    arguments; ``room(gpu)``: the worker threads the GPU has room for."""
    argv = list(argv)
    # the scheduler's address comes first, or else --scheduler-file among the options: an
    # optional positional would take that option's value for an address
    scheduler = [argv.pop(0)] if argv and not argv[0].startswith("-") else []
    parser = argparse.ArgumentParser(prog="python -m tilelabel.cluster.gpu_worker")
    parser.add_argument("--name")
    parser.add_argument("--nthreads", type=int, default=1)
    args, rest = parser.parse_known_args(argv)
    if args.nthreads < 1:
        parser.error(f"--nthreads must be >= 1, got {args.nthreads}")
    if any(a == "--nworkers" or a.startswith("--nworkers=") for a in rest):
        parser.error("a GPU job starts one worker per GPU; --nworkers is not taken")
    if not gpus:
        raise RuntimeError("this job sees no GPU (CUDA_VISIBLE_DEVICES is empty)")
    out = []
    for i, gpu in enumerate(gpus):
        threads = worker_threads(args.nthreads, room(gpu))
        cmd = [python, "-m", "distributed.cli.dask_worker", *scheduler, *rest]
        cmd += ["--nworkers", "1", "--nthreads", str(threads)]
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
