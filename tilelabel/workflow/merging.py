"""Phases 3 to 5: the merge and the numbering, submitted behind the labeling pass
(:mod:`.labeling`), run as their chunks are labeled; here the run waits for the count.

While they run, the run learns which worker kept what of each chunk for the writing pass
(:meth:`~.executors.Executor.keepers`, :mod:`tilelabel.pipeline.kept`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilelabel.pipeline.graph import Index, MergeGraph
from tilelabel.workflow.state import Run, Submitted

if TYPE_CHECKING:
    from tilelabel.workflow.executors import Executor


def merge(
    run: Run, ex: Executor, graph: MergeGraph, submitted: Submitted
) -> tuple[int, dict[Index, str]]:
    """The component count, and per chunk index the worker that kept its labels or input."""
    keepers = ex.keepers(graph)
    submitted.counts.clear()
    ex.wait([submitted.count], "merging", run.progress)
    submitted.summaries.clear()  # the counts and statistics are no longer needed by the run
    count = int(ex.result(submitted.count))
    run.lap("merging")
    return count, keepers
