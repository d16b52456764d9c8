"""The ``cpu`` backend's resources: host memory is the dask worker's memory limit's business,
and zarr compresses the output."""

from __future__ import annotations

import os
from typing import Any

from tilelabel.chunking import plan_for_run
from tilelabel.cores import usable_cores
from tilelabel.resources.plan import ClusterShape, PlanRequest, RunPlan, Workload

#: voxels per processing chunk aimed for when the run names none: big enough to amortise task
#: overhead, small enough that a worker holds a few chunks at once
TARGET_VOXELS = 256**3

#: bytes per voxel a run holds at most were it to hold the whole volume: its input, uint64
#: labels, and as much again for the chunks in flight
HELD_BYTES_PER_VOXEL = 2 * (1 + 8)

#: where a cgroup (v2, then v1) limits the memory of the processes in it
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def memory_limit() -> int:
    """Bytes of memory this process may use: the machine's, or its cgroup's limit where lower
    (a container's, a batch job's)."""
    limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in _CGROUP_LIMITS:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            limit = min(limit, int(text))
    return limit


def fits_this_process(workload: Workload) -> bool:
    """Whether this process could hold ``workload``'s whole volume (see
    :data:`HELD_BYTES_PER_VOXEL`) in its share of the host's memory. It never does (the run
    streams chunks), but a volume that fits is one that a single process's threads label
    sooner than a cluster of processes starts."""
    held = workload.voxels * (workload.itemsize + HELD_BYTES_PER_VOXEL - 1)
    return held <= memory_limit()


class HostResources:
    """The ``cpu`` backend's :class:`tilelabel.resources.Resources`."""

    backend = "cpu"

    def check_here(self) -> None:
        pass

    def in_process(self, workload: Workload, *, workers: int | None = None) -> int | None:
        """A thread per core, at most one per tile, where the volume fits this process and no
        ``workers`` are asked for."""
        if workers is None and fits_this_process(workload):
            return workload.threads(usable_cores())
        return None

    def cluster_shape(self, workload: Workload, *, workers: int | None = None) -> ClusterShape:
        """``workers`` single-threaded processes (default: one per core, at most one per
        tile): the CPU kernels are sequential per chunk, and processes keep the pipeline's
        numpy glue from sharing one GIL."""
        return ClusterShape(workers=workers or workload.threads(usable_cores()), threads=1)

    def fit(self, ex, request: PlanRequest) -> RunPlan:
        r, per = request, ex.threads()
        threads = sum(per.values()) or 1
        plan = plan_for_run(
            r.shape, r.storage, r.chunks, threads, TARGET_VOXELS, stored=r.stored, fill=r.fill
        )
        most = max(per.values(), default=1)
        return RunPlan.of(
            plan, r.connectivity, threads, r.keep_labels, r.keep_input, per_worker=most
        )

    def warm_ups(self, run_plan: RunPlan) -> list:
        return []

    def encoder(self, run_plan: RunPlan, created: Any) -> None:
        return None
