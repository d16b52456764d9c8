"""How many CPU cores this process may use: the one answer every default thread count takes."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system keeps one, else
    every core of the machine.

    ``os.cpu_count()`` counts the whole machine, also inside a Slurm job's cpuset, under
    ``taskset`` or in a container limited to some cores. A pool sized by it on a 128-core
    node whose job has 16 of them would run 8 threads per core in every worker process.
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
