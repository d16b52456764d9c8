"""The ``cpu`` backend's resources: host memory is the dask worker's memory limit's business,
and zarr compresses the output."""

from __future__ import annotations

from typing import Any

from tilelabel.cluster.local import cluster_threads
from tilelabel.pipeline.plan import plan_for_run
from tilelabel.resources.fit import Fit, Request

#: voxels per processing chunk aimed for when the run names none: big enough to amortise task
#: overhead, small enough that a worker holds a few chunks at once
TARGET_VOXELS = 256**3


class HostResources:
    """The ``cpu`` backend's :class:`tilelabel.resources.Resources`."""

    backend = "cpu"

    def check_here(self) -> None:
        pass

    def local_cluster(self, *, workers: int | None = None, workers_per_gpu: int | None = None):
        from tilelabel.cluster.local import cpu_cluster

        return cpu_cluster(workers)

    def fit(self, client, request: Request) -> Fit:
        r, threads = request, cluster_threads(client)
        plan = plan_for_run(r.shape, r.storage, r.chunks, threads, TARGET_VOXELS)
        return Fit.of(plan, r.connectivity, threads, r.keep_labels, r.keep_input)

    def encoder(self, fit: Fit, created: Any) -> None:
        return None
