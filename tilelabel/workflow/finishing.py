"""Phase 7, the end of a run: the output marked complete and made visible (once it is still
the run's), the statistics table collected (:mod:`.tables`), and the run's
:class:`~.state.Result`."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from tilelabel.pipeline import contacts as contacts_mod
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.graph import MergeGraph
from tilelabel.storage import Created
from tilelabel.workflow import tables
from tilelabel.workflow.state import Result, Run, Submitted, attributes

if TYPE_CHECKING:
    from tilelabel.workflow.executors import Executor

log = logging.getLogger("tilelabel")


def start_table(run: Run, ex: Executor, graph: MergeGraph, submitted: Submitted, count: int):
    """The statistics table's :class:`~.tables.Collector`, started once the ``count`` is known
    so that it gathers and writes the table while the labels are written (None: no table)."""
    if not submitted.tables:
        return None
    return tables.statistics(
        ex,
        submitted.tables,
        list(graph.plan.indices()),
        stats_mod.columns(
            len(run.volume.shape),
            run.intensity is not None,
            run.stats.spacing,
            run.labeler.by_value,
        ),
        count=count,
        token=graph.token,
        path=run.options.table,
        frame=run.options.stats is True,
        raster=run.stats.order == "raster",
    )


def start_graph(run: Run, ex: Executor, submitted: Submitted):
    """The region graph's :class:`~.tables.Collector`, started beside the statistics table's
    (None: no graph, or labels complete already that have theirs)."""
    if not submitted.contacts:
        return None
    names = contacts_mod.names(run.contacts.value_dtype is not None)
    return tables.region_graph(ex, submitted.contacts, names, run.options.contacts)


def finish(
    run: Run,
    ex: Executor,
    graph: MergeGraph,
    submitted: Submitted,
    created: Created,
    count: int,
    collector: tables.Collector | None = None,
    graph_rows: tables.Collector | None = None,
) -> Result:
    """Wait for the statistics table and the region graph where they are asked for (their
    Parquet files moved into place, or the frame returned), then mark the output complete and
    publish it: an output marked complete has its table and graph."""
    table = None if collector is None else collector.result()
    if graph_rows is not None:
        graph_rows.result()
    prints = None if submitted.prints is None else ex.result(submitted.prints)
    attrs = attributes(run, count, graph.plan, prints)
    attrs["tilelabel"]["complete"] = True
    run.output.complete(attrs)  # checked still the run's, made visible, the lease released
    run.lap("finishing")  # the table written, marked complete
    result = Result(
        components=count,
        voxels=int(np.prod(run.volume.shape)),
        seconds=time.perf_counter() - run.started,
        dtype=str(created.array.dtype),
        backend=run.labeler.backend,
        table=table,
        phases=run.phases,
    )
    log.info("phases: %s", ", ".join(f"{k} {v:.2f} s" for k, v in run.phases.items()))
    return result


def complete_already(run: Run) -> Result:
    """A resumed run whose output is complete: nothing to do, and no statistics table."""
    record = run.output.record
    log.info("output %s is complete already: nothing to resume", run.output.url)
    return Result(
        components=int(record["components"]),
        voxels=int(np.prod(run.volume.shape)),
        seconds=time.perf_counter() - run.started,
        dtype=run.output.resumed_dtype(),
        backend=str(record.get("backend", run.labeler.backend)),
    )
