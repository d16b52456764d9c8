"""zarr to zarr, in this process or on a dask cluster: the run's phases in order
(:mod:`tilelabel.workflow`).

A run that fails or is interrupted cancels its tasks, waits for the writes in flight and removes
what it made of its output; its error is what the caller sees. A run stopped from outside
(:class:`.Terminated`) does the same but leaves its output to a resume.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from tilelabel.options import Options
from tilelabel.pipeline import kept
from tilelabel.pipeline.graph import MergeGraph
from tilelabel.workflow import heap
from tilelabel.workflow.executors import Executor, open_executor
from tilelabel.workflow.finishing import complete_already, finish, start_graph, start_table
from tilelabel.workflow.labeling import label
from tilelabel.workflow.merging import merge
from tilelabel.workflow.opening import open_run, settle_backend
from tilelabel.workflow.planning import build_graph, plan_run
from tilelabel.workflow.state import Result, Run, Submitted, Terminated
from tilelabel.workflow.writing import write

if TYPE_CHECKING:
    from distributed import Client

    from tilelabel.workflow.tables import Collector

log = logging.getLogger("tilelabel")


@heap.during_runs
def label_zarr(
    options: Options,
    *,
    client: Client | None = None,
    structure: np.ndarray | None = None,
    progress: bool = False,
) -> Result:
    """Label ``options.input`` into ``options.output`` (see :func:`tilelabel.label_zarr`)."""
    run = open_run(options, structure=structure, progress=progress, client=client)  # 0. open
    if run.output.mode == "done":
        return complete_already(run)
    try:
        run.output.take()  # the last check of phase 0: the output's lease
        run.lap("opening")
        with open_executor(run) as ex:
            run = settle_backend(run, ex)
            run.lap("starting")  # this process's threads or a cluster, and the backend there
            run_plan = plan_run(run, ex)  # 1. plan
            graph = build_graph(run, run_plan)  # the tasks of the pipeline's steps 2 to 5
            run.lap("planning")
            with kept_between_passes(ex, graph):
                submitted = label(run, ex, graph)  # 2. label, with 3-5 submitted behind it
                with cancelled_on_failure(ex, submitted):
                    count, keepers = merge(run, ex, graph, submitted)  # 3-5. merge, number
                    table = start_table(run, ex, graph, submitted, count)  # gathered while writing
                    graph_rows = start_graph(run, ex, submitted)
                    with abandoned_on_failure(table, graph_rows):
                        created = write(run, ex, graph, submitted, run_plan, count, keepers)  # 6
            result = finish(run, ex, graph, submitted, created, count, table, graph_rows)  # 7
    except Terminated:
        leave(run)
        raise
    except BaseException:
        discard(run)
        raise
    result.seconds = time.perf_counter() - run.started
    return result


def discard(run: Run) -> None:
    """A failed run: what it made of its output goes, and its lease (never another run's).
    Never raises: the run's own error is what the caller sees."""
    try:
        run.output.discard()
    except Exception as e:
        log.warning("could not remove the unfinished output %s: %s", run.output.url, e)


def leave(run: Run) -> None:
    """A run stopped from outside: its output is left to ``--resume`` (:meth:`Output.leave`).
    Never raises."""
    try:
        run.output.leave()
    except Exception as e:
        log.warning("could not give up the output %s: %s", run.output.url, e)


@contextlib.contextmanager
def cancelled_on_failure(ex: Executor, submitted: Submitted) -> Iterator[None]:
    """Where a phase fails (or is interrupted), the run's tasks still pending are cancelled: a
    client's cluster outlives the run. Cancelling never raises."""
    try:
        yield
    except BaseException:
        ex.cancel(submitted.futures())
        raise


@contextlib.contextmanager
def abandoned_on_failure(*tables: Collector | None) -> Iterator[None]:
    """Where the writing pass fails, the tables being written go with it."""
    try:
        yield
    except BaseException:
        for table in tables:
            if table is not None:
                table.abandon()
        raise


@contextlib.contextmanager
def kept_between_passes(ex: Executor, graph: MergeGraph) -> Iterator[None]:
    """While the passes run; then what the workers kept of them is dropped, however the run
    ends (on every worker still there), and how much of it the writing pass used is logged."""
    try:
        yield
    finally:
        if graph.keeping:
            try:
                per_worker = list(ex.each(kept.drop, graph.token, lenient=True).values())
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
