"""Step 2: the labeling pass, with the merge submitted behind it.

The run's graph goes to its executor at once (:meth:`~.executors.Executor.start`): every chunk
is labeled, only its summary stays (its faces, border keys and row counts), and the merge's and
the numbering's tasks run as soon as their chunks are labeled. Here the run waits until every
chunk is labeled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tilelabel.pipeline.graph import MergeGraph

if TYPE_CHECKING:
    from tilelabel.pipeline.executors import Executor
    from tilelabel.pipeline.run import Run


@dataclass
class Passes:
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

    def cancel(self, ex: Executor) -> None:
        """Cancel what of the run's graph is still to run (a failed or interrupted run: a
        client's cluster outlives it). Never raises."""
        ex.cancel([*self.summaries, *self.counts, *self.specs, *self.tables, self.count])


def label(run: Run, ex: Executor, graph: MergeGraph) -> Passes:
    """Submit the labeling pass and, behind it, the merge; wait for every chunk's summary."""
    passes = ex.start(graph)
    run.lap("starting")  # opening, planning, building and submitting the graph
    try:
        ex.wait(passes.counts, "labeling", run.progress)
    except BaseException:
        passes.cancel(ex)
        raise
    run.lap("labeling")
    return passes
