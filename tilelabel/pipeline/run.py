"""zarr to zarr, in this process or on a dask cluster: the run, phase by phase.

0. open: the input, the output's place and the options are checked before any cluster starts,
   and the run takes its output's lease (:mod:`tilelabel.storage.outputs`) and gets its
   executor: this process's threads where the volume fits one process, else a dask cluster
   (:mod:`.executors`);
1. plan: the processing chunks, and what each worker may keep on its device (:mod:`.plan`,
   through the backend's :mod:`tilelabel.resources`);
2. label: every chunk is labeled; only its summary stays (:mod:`.labeling`, :mod:`.local`);
3. merge, 4. resolve, 5. number: border pairs joined up the merge tree, roots and final labels
   handed down, the count from a prefix sum (:mod:`.merging`, :mod:`.borders`, :mod:`.tree`,
   :mod:`.numbering`), submitted behind the labeling pass;
6. write: the output is created once the count is known, every chunk relabeled and written
   (:mod:`.writing`, :mod:`.relabel`);
7. finish: the output marked complete, the statistics table collected (:mod:`.finishing`).

A run that fails or is interrupted cancels its tasks, waits for the writes in flight and removes
what it made of its output; its error is what the caller sees.

The tasks of steps 2 to 5 are one graph, built stage by stage in :mod:`.graph`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tilelabel import connectivity as conn_mod
from tilelabel import periodic
from tilelabel.cluster import heap
from tilelabel.dtypes import check_values
from tilelabel.kernels.backends import cuda_available, resolve_backend
from tilelabel.options import Options
from tilelabel.pipeline import graph as graph_mod
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.executors import Executor, active_client, open_executor
from tilelabel.pipeline.finishing import Result, complete_already, finish
from tilelabel.pipeline.labeling import Passes, label
from tilelabel.pipeline.local import Labeler
from tilelabel.pipeline.merging import merge
from tilelabel.pipeline.plan import plan_run
from tilelabel.pipeline.writing import attributes, write
from tilelabel.resources import Fit, Resources, Work, for_backend
from tilelabel.resources import keep as keep_mod
from tilelabel.storage import (
    Output,
    Volume,
    ZarrSource,
    normalize_url,
    open_input,
    open_output,
    open_volume,
)
from tilelabel.storage.outputs import check_resume

if TYPE_CHECKING:
    from distributed import Client

log = logging.getLogger("tilelabel")


@dataclass
class Run:
    """One run: its options and what opening it found, and the time each phase took."""

    options: Options
    volume: Volume
    output: Output
    labeler: Labeler
    resources: Resources
    #: what a cluster started for the run is sized to (set once its options are final: a
    #: resumed run takes the killed run's chunks)
    work: Work | None
    #: statistics and size filter (None: labels only)
    stats: stats_mod.StatsOptions | None
    #: the intensity image's reader (statistics)
    intensity: ZarrSource | None
    progress: bool
    #: when it began (``time.perf_counter``)
    started: float = field(default_factory=time.perf_counter)
    #: wall seconds of each phase so far (see :class:`Result`)
    phases: dict[str, float] = field(default_factory=dict)
    #: the wrapped axes (periodic boundaries, :mod:`tilelabel.periodic`)
    wrap: tuple[int, ...] = ()
    #: ``auto`` is settled on the workers once the executor is open (:func:`settle_backend`)
    backend_on_workers: bool = False

    def lap(self, phase: str) -> None:
        """Record ``phase`` as ending now, having begun when the last one ended."""
        now = time.perf_counter() - self.started
        self.phases[phase] = now - sum(self.phases.values())


@heap.during_runs
def label_zarr(
    options: Options,
    *,
    client: Client | None = None,
    structure: np.ndarray | None = None,
    progress: bool = False,
) -> Result:
    """Label ``options.input`` into ``options.output`` (see :func:`tilelabel.label_zarr`)."""
    if options.cluster is not None:  # an allocation's scheduler and workers stay there
        from tilelabel.cluster.jobqueue import serve_unless_client

        serve_unless_client(options.cluster)
    run = open_run(options, structure=structure, progress=progress, client=client)  # 0. open
    if run.output.mode == "done":
        return complete_already(run)
    try:
        run.output.take()  # the last check of step 0: the output's lease
        with open_executor(run, client) as ex:
            settle_backend(run, ex)
            fit = plan_run(run, ex)  # 1. plan
            graph = build_graph(run, fit)  # the tasks of steps 2 to 5
            with kept_between_passes(ex, graph):
                passes = label(run, ex, graph)  # 2. label, with 3-5 submitted behind it
                with cancelled_on_failure(ex, passes):
                    count, holders = merge(run, ex, graph, passes)  # 3-5. merge, resolve, number
                    created = write(run, ex, graph, passes, fit, count, holders)  # 6. write
            result = finish(run, ex, graph, passes, created, count)  # 7. finish
    except BaseException:
        discard(run)
        raise
    result.seconds = time.perf_counter() - run.started
    return result


def open_run(
    options: Options,
    *,
    structure: np.ndarray | None = None,
    progress: bool = False,
    client: Client | None = None,
) -> Run:
    """Step 0: everything the input, the output and the options allow checking, before any
    cluster starts; a clear error for the first thing wrong. (Then the run takes its output's
    lease, :meth:`tilelabel.storage.Output.take`: a place another run writes, or one that
    cannot be written, is refused there.)"""
    o, started = options, time.perf_counter()
    if o.spacing is not None and not o.stats:
        raise ValueError("a spacing is only used by the statistics table; ask for one (--stats)")
    volume = open_volume(o.input, o.storage_options, o.channel, o.timepoint)
    stats = stats_mod.options(
        bool(o.stats),
        o.min_size,
        o.max_size,
        o.intensity is not None,
        spacing=o.spacing or volume.spacing,
        ndim=len(volume.shape),
        largest_k=o.largest_k,
        order=o.order,
        chunked=True,
    )
    connectivity = conn_mod.normalize(len(volume.shape), o.connectivity, structure)
    if o.multilabel:
        check_values(volume.array.dtype)
    wrap = periodic.axes(len(volume.shape), o.wrap_axes)
    remote = o.cluster is not None and o.cluster["kind"] not in ("local", "local-cuda")
    # on a cluster the run does not start, "auto" is its workers' to settle (settle_backend)
    on_workers = o.backend == "auto" and (
        client is not None or o.scheduler is not None or remote or active_client() is not None
    )
    backend = "cpu" if on_workers else resolve_backend(o.backend)
    resources = for_backend(backend)
    if client is None and o.scheduler is None and not remote:
        resources.check_here()  # before a local cluster starts for it
    inputs = {"input": volume.image.url if volume.image else volume.url}
    if o.intensity is not None:
        inputs["intensity image"] = normalize_url(o.intensity)
    output = open_output(
        volume,
        o.output,
        o.ome_labels,
        o.storage_options,
        overwrite=o.overwrite,
        force=o.force,
        resume=o.resume,
        inputs=inputs,
    )
    intensity = None
    if o.intensity is not None:
        if tuple(open_input(o.intensity, o.storage_options).shape) != volume.shape:
            raise ValueError(
                f"intensity {o.intensity} does not have the input's shape {volume.shape}"
            )
        intensity = ZarrSource(normalize_url(o.intensity), o.storage_options)
    labeler = Labeler(backend, connectivity, o.algorithm, multilabel=o.multilabel)
    run = Run(o, volume, output, labeler, resources, None, stats, intensity, progress, started)
    run.wrap, run.backend_on_workers = wrap, on_workers
    if output.mode in ("resume", "done"):
        run.options = resumed(run)
    # a bad chunk size is refused here, before a cluster starts
    itemsize = volume.array.dtype.itemsize
    run.work = Work.of(volume.shape, volume.storage_chunks, run.options.chunks, itemsize)
    return run


def settle_backend(run: Run, ex: Executor) -> None:
    """``auto`` on a cluster the run did not start: ``cuda`` where every worker has a usable
    GPU, else ``cpu``. Asked of the workers, not this process: a client without a GPU may drive
    GPU workers, and asking here would load CUDA into the caller for nothing."""
    if not run.backend_on_workers:
        return
    usable = ex.each(cuda_available)
    backend = "cuda" if usable and all(usable.values()) else "cpu"
    log.info("backend 'auto' on %d workers: %s", len(usable), backend)
    run.labeler = dataclasses.replace(run.labeler, backend=backend)
    run.resources = for_backend(backend)
    run.backend_on_workers = False


def resumed(run: Run) -> Options:
    """The options of a run that resumes (or finds complete) the labels of ``run.output``:
    refused where they would make other labels, given the killed run's processing chunks."""
    check_resume(run.output, attributes(run, None)["tilelabel"])
    o, recorded = run.options, run.output.record.get("chunks")
    if recorded is None:
        return o
    recorded = tuple(int(c) for c in recorded)
    if o.chunks is not None and tuple(o.chunks) != recorded:
        raise ValueError(
            f"output {run.output.url} is being written in chunks of {recorded}; resume it "
            "with those (or without --chunks)"
        )
    return dataclasses.replace(o, chunks=recorded)


def discard(run: Run) -> None:
    """A failed run: what it made of its output goes, and its lease (never another run's).
    Never raises: the run's own error is what the caller sees."""
    try:
        run.output.discard()
    except Exception as e:
        log.warning("could not remove the unfinished output %s: %s", run.output.url, e)


@contextlib.contextmanager
def cancelled_on_failure(ex: Executor, passes: Passes) -> Iterator[None]:
    """Where a phase fails (or is interrupted), the run's tasks still pending are cancelled: a
    client's cluster outlives the run."""
    try:
        yield
    except BaseException:
        passes.cancel(ex)
        raise


def build_graph(run: Run, fit: Fit) -> graph_mod.MergeGraph:
    """The tasks of steps 2 to 5 for the run's plan (:func:`.graph.build`)."""
    reader = run.volume.reader()
    intensity = None
    if run.intensity is not None:
        intensity = graph_mod.Source(lambda idx, values=run.intensity: values)
    return graph_mod.build(
        source=graph_mod.Source(lambda idx: reader),
        plan=dataclasses.replace(fit.plan, wrap=run.wrap),
        labeler=run.labeler,
        stats=run.stats,
        intensity=intensity,
        keep_budget=fit.label_budget,
        keep_input_budget=fit.input_budget,
    )


@contextlib.contextmanager
def kept_between_passes(ex: Executor, graph: graph_mod.MergeGraph) -> Iterator[None]:
    """While the passes run; then what the workers kept of them is dropped, however the run
    ends (on every worker still there), and how much of it the writing pass used is logged."""
    try:
        yield
    finally:
        if graph.keeping:
            try:
                per_worker = list(ex.each(keep_mod.drop, graph.token, lenient=True).values())
            except Exception as e:  # the run's own error, if any, is the one to see
                log.debug("dropping what the workers kept failed: %s", e)
            else:
                log.info(
                    "writing pass: %d of %d chunks from labels kept on the workers, %d from "
                    "their kept input",
                    sum(t[0] for t in per_worker),
                    graph.plan.nchunks,
                    sum(t[1] for t in per_worker),
                )
