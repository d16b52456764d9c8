"""Steps 3 to 5: the merge and the numbering, submitted behind the labeling pass
(:mod:`.labeling`), run as their chunks are labeled; here the run waits for the count.

While they run, the run learns which worker kept what of each chunk for the writing pass
(:meth:`~.executors.Executor.holders`, :mod:`tilelabel.resources.keep`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilelabel.pipeline.graph import Index, MergeGraph
from tilelabel.pipeline.labeling import Passes

if TYPE_CHECKING:
    from tilelabel.pipeline.executors import Executor
    from tilelabel.pipeline.run import Run


def merge(run: Run, ex: Executor, graph: MergeGraph, passes: Passes) -> tuple[int, dict]:
    """The component count, and per chunk index the worker that kept its labels or input."""
    holders: dict[Index, str] = ex.holders(graph)
    passes.counts.clear()
    ex.wait([passes.count], "merging", run.progress)
    passes.summaries.clear()  # the counts and statistics are no longer needed by the run
    count = int(ex.result(passes.count))
    run.lap("merging")
    return count, holders
