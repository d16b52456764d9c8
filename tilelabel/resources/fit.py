"""A run's plan with what its workers may hold on top of its chunks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tilelabel.dtypes import local_dtype
from tilelabel.pipeline.plan import ChunkPlan, plan_for_storage
from tilelabel.resources import keep


@dataclass(frozen=True)
class Work:
    """What a run's volume asks of a cluster started for it
    (:meth:`~tilelabel.resources.Resources.local_cluster`)."""

    voxels: int
    #: bytes per input voxel
    itemsize: int
    #: the most chunks the run can have (its storage chunks, or its named chunks): no cluster
    #: needs more worker threads than these
    tiles: int

    @classmethod
    def of(cls, shape, storage, chunks, itemsize: int) -> Work:
        """The work of a volume of ``shape`` stored in ``storage`` chunks, processed in
        ``chunks`` (None: any whole number of storage chunks)."""
        plan = plan_for_storage(shape, storage, chunks or storage)
        return cls(math.prod(shape), itemsize, plan.nchunks)

    def threads(self, most: int) -> int:
        """Worker threads for this work where ``most`` are available: no more than its tiles."""
        return max(1, min(most, self.tiles))


@dataclass(frozen=True)
class Request:
    """What a run asks of its resources' :meth:`~tilelabel.resources.Resources.fit`."""

    shape: tuple[int, ...]
    #: the input's storage chunks (the unit a task may write)
    storage: tuple[int, ...]
    #: the processing chunks asked for by name (None: the resources' default)
    chunks: tuple[int, ...] | None
    connectivity: int
    keep_labels: int | None
    keep_input: bool
    gpu_encode: bool | None
    #: the input array, whose compression the output takes
    like: Any


@dataclass(frozen=True)
class Fit:
    """The chunks of a run and what each worker may hold besides them."""

    plan: ChunkPlan
    #: bytes of labels each worker may keep between the passes (:mod:`.keep`)
    label_budget: int
    #: bytes of packed input each worker may keep between the passes
    input_budget: int
    #: whether the device compresses the output (:func:`tilelabel.resources.gpu.encodes`)
    encode: bool = False

    @classmethod
    def of(
        cls,
        plan: ChunkPlan,
        connectivity: int,
        threads: int,
        keep_labels: int | None,
        keep_input: bool,
        encode: bool = False,
        per_worker: int = 1,
    ) -> Fit:
        """The run of ``plan`` on a cluster of ``threads`` worker threads, at most
        ``per_worker`` in one worker, with the budgets that ``keep_labels`` and ``keep_input``
        give it (:mod:`.keep`)."""
        voxels = chunk_voxels(plan)
        chunk = voxels * label_bytes(plan, connectivity)
        labels = keep.label_budget(keep_labels, chunk, plan.nchunks, threads, per_worker)
        inputs = keep.INPUT_BYTES_PER_CHUNK_VOXEL * voxels * per_worker if keep_input else 0
        return cls(plan, labels, inputs, encode)

    def held(self, connectivity: int) -> tuple[int, int]:
        """What one worker can hold of this run's (labels, packed input): at most the budgets,
        at most every chunk."""
        voxels, n = chunk_voxels(self.plan), self.plan.nchunks
        labels = min(self.label_budget, n * voxels * label_bytes(self.plan, connectivity))
        return labels, min(self.input_budget, n * ((voxels + 7) // 8))


def chunk_voxels(plan: ChunkPlan) -> int:
    """Voxels of ``plan``'s largest chunk."""
    return math.prod(plan.max_block_shape())


def label_bytes(plan: ChunkPlan, connectivity: int) -> int:
    """Bytes per voxel of the local labels of ``plan``'s largest chunk."""
    return local_dtype(plan.max_block_shape(), connectivity).itemsize
