"""Device resource policy: what a run may hold on its workers' devices, behind one interface.

The resources only advise: they start nothing and run nothing. A run asks its backend's
:class:`Resources` (:func:`for_backend`) six things, and nothing else of the run knows which
device it runs on:

1. ``check_here()``: before any work, a clear error where this process cannot run the backend
   (``cuda`` without a usable GPU);
2. ``in_process(workload, workers=)``: for a run that names no cluster, the threads that label
   it in this process where its volume (:class:`Workload`) fits one process (or one GPU) and no
   workers are asked for, so that a small run pays for no cluster (None: it does not);
3. ``cluster_shape(workload, workers=)``: else the local cluster to start for it, no larger
   than its chunks can use (:class:`ClusterShape`; :mod:`tilelabel.cluster` starts it);
4. ``fit(ex, request)``: the run's plan on its executor (:class:`PlanRequest` in,
   :class:`RunPlan` out): its chunks and what each worker may keep between the passes; on GPUs,
   fitted to their free memory, giving up defaults that do not fit (:mod:`.gpu_memory`), with
   the GPU's compression of the output (:mod:`.encoding`);
5. ``warm_ups(run_plan)``: what each worker should start loading while the labeling pass runs
   (functions the run has every worker call);
6. ``encoder(run_plan, created)``: how a write compresses its chunk on the device (None: zarr
   does, on the host).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tilelabel.resources.plan import ClusterShape, PlanRequest, RunPlan, Workload


class Resources(Protocol):
    backend: str

    def check_here(self) -> None: ...

    def in_process(self, workload: Workload, *, workers: int | None = None) -> int | None: ...

    def cluster_shape(self, workload: Workload, *, workers: int | None = None) -> ClusterShape: ...

    def fit(self, ex: Any, request: PlanRequest) -> RunPlan: ...

    def warm_ups(self, run_plan: RunPlan) -> list[Callable[[], None]]: ...

    def encoder(self, run_plan: RunPlan, created: Any) -> Any: ...


def for_backend(backend: str) -> Resources:
    """The resources of a resolved backend (``cpu`` or ``cuda``)."""
    if backend == "cuda":
        from tilelabel.resources.gpu import GPUResources

        return GPUResources()
    from tilelabel.resources.host import HostResources

    return HostResources()


__all__ = ["ClusterShape", "PlanRequest", "Resources", "RunPlan", "Workload", "for_backend"]
