"""Device resource policy: what a run may hold on its workers' devices, behind one interface.

A run asks its backend's :class:`Resources` (:func:`for_backend`) five things, and nothing else
of the pipeline knows which device it runs on:

1. ``check_here()``: before any work, a clear error where this process cannot run the backend
   (``cuda`` without a usable GPU);
2. ``in_process(work, workers=)``: for a run that has no cluster, the threads
   that label it in this process where its volume (:class:`Work`) fits one process (or one GPU)
   and no workers are asked for, so that a small run pays for no cluster (None: it does not);
3. ``local_cluster(work, workers=)``: else the cluster started for it, no
   larger than its chunks can use;
4. ``fit(ex, request)``: the run's plan on its executor (:mod:`tilelabel.pipeline.executors`)
   and what each worker may keep between the passes (:class:`Fit`): on GPUs, fitted to their
   free memory, giving up defaults that do not fit (:mod:`.gpu_memory`), with the GPU's
   compression of the output (:mod:`.gpu`);
5. ``encoder(fit, created)``: how a write compresses its chunk on the device (None: zarr does,
   on the host).

What workers keep between the passes, and where, is :mod:`.keep`.
"""

from __future__ import annotations

from typing import Any, Protocol

from tilelabel.resources.fit import Fit, Request, Work


class Resources(Protocol):
    backend: str

    def check_here(self) -> None: ...

    def in_process(self, work: Work, *, workers: int | None = None) -> int | None: ...

    def local_cluster(self, work: Work, *, workers: int | None = None): ...

    def fit(self, ex, request: Request) -> Fit: ...

    def encoder(self, fit: Fit, created: Any) -> Any: ...


def for_backend(backend: str) -> Resources:
    """The resources of a resolved backend (``cpu`` or ``cuda``)."""
    if backend == "cuda":
        from tilelabel.resources.gpu import GPUResources

        return GPUResources()
    from tilelabel.resources.host import HostResources

    return HostResources()


__all__ = ["Fit", "Request", "Resources", "Work", "for_backend"]
