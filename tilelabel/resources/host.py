"""The ``cpu`` backend's resources: host memory is the dask worker's memory limit's business,
and zarr compresses the output."""

from __future__ import annotations

import os
from typing import Any

from tilelabel.cores import usable_cores
from tilelabel.pipeline.plan import plan_for_run
from tilelabel.resources.fit import Fit, Request, Work

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


def fits_this_process(work: Work) -> bool:
    """Whether this process could hold ``work``'s whole volume (see
    :data:`HELD_BYTES_PER_VOXEL`) in its share of the host's memory. It never does (the run
    streams chunks), but a volume that fits is one that a single process's threads label
    sooner than a cluster of processes starts."""
    held = work.voxels * (work.itemsize + HELD_BYTES_PER_VOXEL - 1)
    return held <= memory_limit()


class HostResources:
    """The ``cpu`` backend's :class:`tilelabel.resources.Resources`."""

    backend = "cpu"

    def check_here(self) -> None:
        pass

    def in_process(self, work: Work, *, workers: int | None = None) -> int | None:
        """A thread per core, at most one per tile, where the volume fits this process and no
        ``workers`` are asked for."""
        if workers is None and fits_this_process(work):
            return work.threads(usable_cores())
        return None

    def local_cluster(self, work: Work, *, workers: int | None = None):
        """``workers`` processes (default: one per core, at most one per tile)."""
        from tilelabel.cluster.local import cpu_cluster

        return cpu_cluster(workers or work.threads(usable_cores()))

    def fit(self, ex, request: Request) -> Fit:
        r, per = request, ex.threads()
        threads = sum(per.values()) or 1
        plan = plan_for_run(r.shape, r.storage, r.chunks, threads, TARGET_VOXELS)
        most = max(per.values(), default=1)
        return Fit.of(plan, r.connectivity, threads, r.keep_labels, r.keep_input, per_worker=most)

    def encoder(self, fit: Fit, created: Any) -> None:
        return None
