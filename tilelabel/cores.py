"""How many CPU cores this process may use: the one answer every default thread count takes."""

from __future__ import annotations


def usable_cores() -> int:
    """The cores this process may run on: the fewest of the machine's, its CPU affinity's and
    its cgroup CPU quota's (rounded up), as ``dask.system.cpu_count`` counts them.

    ``os.cpu_count()`` counts the whole machine, also inside a Slurm job's cpuset, under
    ``taskset`` or in a container limited to some cores or to a CPU quota (a 4-CPU pod on a
    64-core node). A pool sized by it would run many threads per core in every worker process.
    """
    from dask.system import cpu_count

    return max(1, cpu_count())
