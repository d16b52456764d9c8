"""What a run asks of its resources, and the plan they fit to it.

:class:`Workload` is what a run's volume asks of a cluster started for it, :class:`PlanRequest`
what it asks of the resources' :meth:`~tilelabel.resources.Resources.fit`, and :class:`RunPlan`
the answer: its chunks and what each worker may keep between the passes (the budgets below),
and whether the device compresses the output. :class:`ClusterShape` is the local cluster the
resources advise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tilelabel.chunking import ChunkPlan, chunk_sizes
from tilelabel.dtypes import local_dtype

#: The input budget per worker thread, in bytes per voxel of the run's largest chunk: as many
#: bytes as that chunk's uint32 labels, which hold the bits of 32 chunks. Memory per worker
#: stays bounded by the chunk size times its threads, and a worker keeps every chunk it labels
#: up to 32 a thread (one worker per GPU labels many chunks).
INPUT_BYTES_PER_CHUNK_VOXEL = 4

#: The default labels budget, in chunks (the run's largest chunk's local labels) per worker
#: thread, where the run has no more chunks than the cluster has worker threads (else none).
#: Where each thread labels one chunk, keeping its labels adds nothing to a worker's peak, and the
#: writing pass skips labeling those chunks again; where a thread labels several chunks, one
#: chunk's labels more would raise its worker's peak for no gain (``benchmarks/pipeline.py``
#: reports each worker's peak).
DEFAULT_LABEL_CHUNKS = 1


def label_budget(
    keep_labels: int | None,
    chunk_label_bytes: int,
    chunks: int = 1,
    threads: int = 1,
    per_worker: int = 1,
) -> int:
    """Bytes of labels a worker process may keep: ``keep_labels``, or where it is None (the
    default) :data:`DEFAULT_LABEL_CHUNKS` chunks of ``chunk_label_bytes`` for each of its
    ``per_worker`` threads where the run's ``chunks`` are no more than the cluster's worker
    ``threads``, else 0."""
    if keep_labels is None:
        chunk_bytes = DEFAULT_LABEL_CHUNKS * chunk_label_bytes
        return per_worker * chunk_bytes if chunks <= threads else 0
    return int(keep_labels)


@dataclass(frozen=True)
class ClusterShape:
    """A local cluster of ``workers`` processes of ``threads`` threads each; on GPUs, one worker
    on each of ``gpus`` (entries of ``CUDA_VISIBLE_DEVICES``)."""

    workers: int
    threads: int
    gpus: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workload:
    """What a run's volume asks of a cluster started for it
    (:meth:`~tilelabel.resources.Resources.cluster_shape`)."""

    voxels: int
    #: bytes per input voxel
    itemsize: int
    #: the most chunks the run can have (its storage chunks, or its named chunks): no cluster
    #: needs more worker threads than these
    tiles: int

    @classmethod
    def of(cls, shape, storage, chunks, itemsize: int, stored: int | None = None) -> Workload:
        """The workload of a volume of ``shape`` stored in ``storage`` chunks, processed in
        ``chunks`` (None: any whole number of storage chunks); ``stored``: how many storage
        chunks hold data (None: all may), the rest being background that no task reads."""
        sizes = chunk_sizes(shape, storage, chunks or storage)
        voxels = math.prod(shape)
        tiles = math.prod(-(-int(n) // c) for n, c in zip(shape, sizes, strict=True))
        if stored is not None:
            unit = math.prod(min(int(c), int(s)) for c, s in zip(storage, shape, strict=True))
            voxels, tiles = min(voxels, stored * unit), min(tiles, max(stored, 1))
        return cls(voxels, itemsize, tiles)

    def threads(self, most: int) -> int:
        """Worker threads for this workload where ``most`` are available: no more than its
        tiles."""
        return max(1, min(most, self.tiles))


@dataclass(frozen=True)
class PlanRequest:
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
    #: the indices of the storage chunks that hold data (None: all may)
    stored: Any = None
    #: the value of the chunks not stored where it is not 0 (None: they are background)
    fill: Any = None


@dataclass(frozen=True)
class RunPlan:
    """The chunks of a run and what each worker may hold besides them."""

    chunks: ChunkPlan
    #: bytes of labels each worker may keep between the passes (:mod:`tilelabel.pipeline.kept`)
    label_budget: int
    #: bytes of packed input each worker may keep between the passes
    input_budget: int
    #: the output's codec where the device compresses it (:func:`.encoding.encodes`); None:
    #: zarr compresses it on the host
    codec: str | None = None

    @property
    def encode(self) -> bool:
        """Whether the device compresses the output."""
        return self.codec is not None

    @classmethod
    def of(
        cls,
        plan: ChunkPlan,
        connectivity: int,
        threads: int,
        keep_labels: int | None,
        keep_input: bool,
        codec: str | None = None,
        per_worker: int = 1,
    ) -> RunPlan:
        """The run of ``plan`` on a cluster of ``threads`` worker threads, at most
        ``per_worker`` in one worker, with the budgets that ``keep_labels`` and ``keep_input``
        give it (:mod:`tilelabel.pipeline.kept`)."""
        voxels = chunk_voxels(plan)
        chunk = voxels * label_bytes(plan, connectivity)
        labels = label_budget(keep_labels, chunk, plan.nchunks, threads, per_worker)
        inputs = INPUT_BYTES_PER_CHUNK_VOXEL * voxels * per_worker if keep_input else 0
        return cls(plan, labels, inputs, codec)

    def held(self, connectivity: int) -> tuple[int, int]:
        """What one worker can hold of this run's (labels, packed input): at most the budgets,
        at most every chunk."""
        voxels, n = chunk_voxels(self.chunks), self.chunks.nchunks
        labels = min(self.label_budget, n * voxels * label_bytes(self.chunks, connectivity))
        return labels, min(self.input_budget, n * ((voxels + 7) // 8))


def chunk_voxels(plan: ChunkPlan) -> int:
    """Voxels of ``plan``'s largest chunk."""
    return math.prod(plan.max_block_shape())


def label_bytes(plan: ChunkPlan, connectivity: int) -> int:
    """Bytes per voxel of the local labels of ``plan``'s largest chunk."""
    return local_dtype(plan.max_block_shape(), connectivity).itemsize
