"""Phase 2: the labeling pass, with the merge submitted behind it.

The run's graph goes to its executor at once (:meth:`~.executors.Executor.start`): every chunk
is labeled, only its summary stays (its faces, border keys and row counts), and the merge's and
the numbering's tasks run as soon as their chunks are labeled. Here the run waits until every
chunk is labeled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilelabel.pipeline.graph import MergeGraph
from tilelabel.workflow.state import Run, Submitted

if TYPE_CHECKING:
    from tilelabel.workflow.executors import Executor


def label(run: Run, ex: Executor, graph: MergeGraph) -> Submitted:
    """Submit the labeling pass and, behind it, the merge; wait for every chunk's summary."""
    submitted = ex.start(graph)
    run.lap("submitting")
    try:
        ex.wait(submitted.counts, "labeling", run.progress)
    except BaseException:
        ex.cancel(submitted.futures())
        raise
    run.lap("labeling")
    return submitted
