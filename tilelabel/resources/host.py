"""The ``cpu`` backend's resources: host memory is the dask worker's memory limit's business,
and zarr compresses the output."""

from __future__ import annotations

from typing import Any

from tilelabel.cluster.local import cluster_threads
from tilelabel.cores import usable_cores
from tilelabel.pipeline.plan import plan_for_run
from tilelabel.resources.fit import Fit, Request, Work

#: voxels per processing chunk aimed for when the run names none: big enough to amortise task
#: overhead, small enough that a worker holds a few chunks at once
TARGET_VOXELS = 256**3

#: bytes per voxel a run holds at most were it to hold the whole volume: its input, uint64
#: labels, and as much again for the chunks in flight
HELD_BYTES_PER_VOXEL = 2 * (1 + 8)


def fits_this_process(work: Work) -> bool:
    """Whether this process could hold ``work``'s whole volume (see
    :data:`HELD_BYTES_PER_VOXEL`) in its share of the host's memory (its cgroup limit, if
    any). It never does (the run streams chunks), but a volume that fits is one that a single
    process's threads label sooner than a cluster of processes starts."""
    from distributed.system import MEMORY_LIMIT

    held = work.voxels * (work.itemsize + HELD_BYTES_PER_VOXEL - 1)
    return held <= MEMORY_LIMIT


class HostResources:
    """The ``cpu`` backend's :class:`tilelabel.resources.Resources`."""

    backend = "cpu"

    def check_here(self) -> None:
        pass

    def local_cluster(
        self, work: Work, *, workers: int | None = None, workers_per_gpu: int | None = None
    ):
        """In this process where the volume fits it and no ``workers`` are asked for, else
        ``workers`` processes (default: one per core, at most one per tile)."""
        from tilelabel.cluster.local import cpu_cluster, in_process_cluster

        if workers is None and fits_this_process(work):
            return in_process_cluster(work.threads(usable_cores()))
        return cpu_cluster(workers or work.threads(usable_cores()))

    def fit(self, client, request: Request) -> Fit:
        r, threads = request, cluster_threads(client)
        plan = plan_for_run(r.shape, r.storage, r.chunks, threads, TARGET_VOXELS)
        return Fit.of(plan, r.connectivity, threads, r.keep_labels, r.keep_input)

    def encoder(self, fit: Fit, created: Any) -> None:
        return None
