"""What the phases of a run share: the run (:class:`Run`) and where its tasks execute
(:class:`Where`), what it submitted (:class:`Submitted`), what the output records of it
(:func:`attributes`) and what it returns (:class:`Result`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tilelabel._version import __version__

if TYPE_CHECKING:
    from distributed import Client

    from tilelabel.chunking import ChunkPlan
    from tilelabel.options import Options
    from tilelabel.pipeline.contacts import ContactsOptions
    from tilelabel.pipeline.local import Labeler
    from tilelabel.pipeline.stats import StatsOptions
    from tilelabel.resources import Resources, Workload
    from tilelabel.storage import Output, Volume, ZarrSource


class Terminated(KeyboardInterrupt):
    """The run was told to stop from outside (SIGTERM or SIGHUP, ``signum``: a batch system's
    time limit, ``kill``): it stops as at Ctrl-C, but leaves its output to ``--resume``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass(frozen=True)
class Where:
    """Where a run's tasks execute (:func:`tilelabel.workflow.executors.where`)."""

    #: the cluster the run joins as it is: the caller's client or this process's active one
    client: Client | None = None
    #: the run's workers are not this machine's processes started for it (a client, a scheduler
    #: address, batch jobs, an allocation): ``auto`` is settled on them, and this process need
    #: not be able to run the backend
    remote: bool = False
    #: nothing names a cluster: the run stays in this process where its resources say the
    #: volume fits (:meth:`~tilelabel.resources.Resources.in_process`), else starts one
    may_stay: bool = False


@dataclass(kw_only=True)
class Run:
    """One run: its options and what opening it found, and the time each phase took."""

    options: Options
    volume: Volume
    output: Output
    labeler: Labeler
    resources: Resources
    #: where its tasks execute (decided once, as it opens)
    where: Where
    #: what a cluster started for it is sized to (its options final: a resumed run takes the
    #: killed run's chunks)
    workload: Workload
    #: statistics and size filter (None: labels only)
    stats: StatsOptions | None = None
    #: the region graph (None: none)
    contacts: ContactsOptions | None = None
    #: the intensity image's reader (statistics)
    intensity: ZarrSource | None = None
    #: the wrapped axes (periodic boundaries, :mod:`tilelabel.periodic`)
    wrap: tuple[int, ...] = ()
    #: the indices of the input's storage chunks that hold data, the rest being all ``fill``,
    #: or background where that is None (None: any may hold data;
    #: :meth:`tilelabel.storage.Volume.stored_chunks`)
    stored: Any = None
    fill: Any = None
    progress: bool = False
    #: when it began (``time.perf_counter``)
    started: float = field(default_factory=time.perf_counter)
    #: wall seconds of each phase so far (see :class:`Result`)
    phases: dict[str, float] = field(default_factory=dict)

    def lap(self, phase: str) -> None:
        """Record ``phase`` as ending now, having begun when the last one ended."""
        now = time.perf_counter() - self.started
        self.phases[phase] = now - sum(self.phases.values())


@dataclass
class Submitted:
    """What the run holds of its submitted graph: futures of its executor."""

    #: per chunk (raster order), its counts: done once the chunk is labeled
    counts: list[Any]
    #: per chunk, its lookup spec; with a table, its rows of the table
    specs: list[Any]
    tables: list[Any]
    #: the component count
    count: Any
    #: what else keeps the chunks' summaries alive until the count is known (a cluster's)
    summaries: list[Any] = field(default_factory=list)
    #: every chunk's checksum, one array (None: not asked for)
    prints: Any = None
    #: with the region graph: its complete rows, task by task
    contacts: list[Any] = field(default_factory=list)

    def futures(self) -> list[Any]:
        """Every future of the graph the run still holds."""
        extra = [] if self.prints is None else [self.prints]
        return [*self.summaries, *self.counts, *self.specs, *self.tables, *self.contacts,
                self.count, *extra]  # fmt: skip


@dataclass
class Result:
    """What a run returns (``label_zarr(..., return_result=True)``)."""

    components: int
    voxels: int
    seconds: float
    dtype: str
    backend: str
    #: the statistics table (``stats=True``)
    table: Any = None
    #: wall seconds of each phase, from the client: ``opening`` the input and output,
    #: ``starting`` this process's threads or a cluster, ``planning`` the chunks and the graph,
    #: ``submitting`` it, ``labeling`` until every chunk's summary is done, ``merging`` until
    #: the component count is known, ``writing`` until the last write, ``finishing`` (the
    #: output marked complete, the statistics table written)
    phases: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        rate = self.voxels / self.seconds if self.seconds > 0 else float("inf")
        return (
            f"{self.components:,} components in {self.voxels:,} voxels, "
            f"{self.seconds:.2f} s ({rate / 1e6:,.1f} Mvoxel/s, {self.backend}, {self.dtype})"
        )


def input_checksum(prints: Any) -> str | None:
    """One checksum of the input from its chunks' (:func:`tilelabel.pipeline.graph.checksums`),
    recorded with complete labels (None: no chunk checksums)."""
    if prints is None:
        return None
    import hashlib

    return hashlib.blake2b(prints.astype("<u8").tobytes(), digest_size=8).hexdigest()


def attributes(
    run: Run, count: int | None, plan: ChunkPlan | None = None, prints: Any = None
) -> dict:
    """What the output records of the run that made it (``complete`` only once it is; the run's
    id is the output's to add; ``prints``: the chunks' checksums of the input)."""
    meta: dict[str, Any] = {
        "version": __version__,
        "source": run.volume.url,
        "connectivity": run.labeler.connectivity,
        "components": count,
        "backend": run.labeler.backend,
        "complete": False,
    }
    if run.labeler.multilabel:
        meta["multilabel"] = True
    if run.labeler.delta is not None:
        meta["delta"] = run.labeler.delta
    if run.options.dust is not None:  # the input's values, not labels
        meta["dust"] = run.options.dust
    if run.volume.lead:
        meta["selection"] = list(run.volume.lead)
    if run.wrap:
        meta["wrap_axes"] = list(run.wrap)
    if plan is not None:  # the processing chunks, which a resumed run takes again
        meta["chunks"] = [int(c[0]) for c in plan.chunks]
    if prints is not None:  # what writing a missing table proves the labels were made from
        meta["input_checksum"] = input_checksum(prints)
    table = run.options.table
    if table is not None:  # their table, which a resume may replace where this run may
        from tilelabel.storage import normalize_url

        meta["table"] = normalize_url(table)
        if run.options.overwrite or run.options.force:
            meta["replace_table"] = True
    if run.contacts is not None:  # the region graph, which a resume may replace likewise
        from tilelabel.storage import normalize_url

        meta["contacts"] = normalize_url(run.options.contacts)
        meta["contacts_connectivity"] = run.contacts.connectivity
        if run.options.overwrite or run.options.force:
            meta["replace_contacts"] = True
    if run.stats is not None:  # what changes the labels, where it is not the default
        kept = {
            "min_size": run.stats.min_size,
            "max_size": run.stats.max_size,
            "largest_k": run.stats.largest_k,
            "order": None if run.stats.order == "raster" else run.stats.order,
        }
        meta.update({k: v for k, v in kept.items() if v is not None})
    return {"tilelabel": meta}
