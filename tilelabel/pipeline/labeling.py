"""Step 2 on the cluster: the labeling pass, with the merge submitted behind it.

Every chunk's summary is persisted (its faces, border keys and row counts stay on the worker that
labeled it), and the merge's and the numbering's tasks are submitted at once after it, so that
each runs as soon as its chunks are labeled: chunks are labeled in raster order of the grid, and
every merge task that is ready runs before the chunks still to label (:mod:`.placement`).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dask
from distributed import Client, Future, futures_of

from tilelabel.pipeline import placement, progress
from tilelabel.pipeline.graph import MergeGraph

if TYPE_CHECKING:
    from tilelabel.pipeline.run import Run

log = logging.getLogger("tilelabel")


@dataclass
class Passes:
    """What the client holds of a run's submitted graph."""

    #: per chunk (raster order), its counts (and statistics), held until the count is known
    summaries: list[Any]
    #: per chunk, its counts: where its lookup spec is placed
    counts: list[Any]
    #: per chunk, its lookup spec; with a table, its rows of the table
    specs: list[Future]
    tables: list[Future]
    #: the component count
    count: Future

    def cancel(self, client: Client) -> None:
        """Cancel what of the run's graph is still to run (a failed or interrupted run: a
        client's cluster outlives it). Never raises."""
        futures = [*futures_of(self.summaries), *futures_of(self.counts), *self.specs]
        try:
            client.cancel([*futures, *self.tables, self.count])
        except Exception as e:  # the run's own error is the one to see
            log.debug("cancelling the run's tasks failed: %s", e)


def label(run: Run, client: Client, graph: MergeGraph) -> Passes:
    """Submit the labeling pass and, behind it, the merge; wait for every chunk's summary."""
    idxs = list(graph.plan.indices())
    per = [graph.summary_keys[i] for i in idxs]  # borders, counts (, stats)
    priority = functools.partial(placement.raster_priority, graph.plan.grid)
    with dask.annotate(priority=priority):
        persisted = client.persist(
            [graph.delayed(key) for keys in per for key in keys], optimize_graph=False
        )
    # one submission, unoptimized: the specs and the count share the prefix-sum tasks, and
    # optimizing them as separate collections would rename those shared keys
    tables = [graph.delayed(graph.table_keys[i]) for i in idxs if graph.table_keys]
    specs = [graph.delayed(graph.spec_keys[i]) for i in idxs]
    *futures, count = client.compute([*tables, *specs, graph.count], optimize_graph=False)
    # Each chunk's borders (its faces) are let go now that the merge's graph holds them: the
    # scheduler frees them once the border pairs that read them are done, during the labeling
    # pass, so that what waits on a worker does not grow with the volume. The release reaches
    # the scheduler after the graph: one ordered stream, handled in order.
    width = len(per[0])
    summaries = [p for j, p in enumerate(persisted) if j % width]
    counts = persisted[1::width]
    del persisted
    passes = Passes(summaries, counts, futures[len(tables) :], futures[: len(tables)], count)
    run.lap("starting")  # opening, planning, building and submitting the graph
    try:
        progress.wait(client, futures_of(counts), "labeling", run.progress)
    except BaseException:
        passes.cancel(client)
        raise
    run.lap("labeling")
    return passes
