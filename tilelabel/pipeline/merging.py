"""Steps 3 to 5 on the cluster: the merge and the numbering, submitted behind the labeling pass
(:mod:`.labeling`), run as their chunks are labeled; here the run waits for the count.

While they run, each chunk's lookup spec is placed on the worker that labeled the chunk
(:func:`.placement.beside`), and the run learns which worker kept what of each chunk for the
writing pass (:mod:`tilelabel.resources.keep`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from distributed import Client

from tilelabel.pipeline import placement, progress
from tilelabel.pipeline.graph import MergeGraph
from tilelabel.pipeline.labeling import Passes
from tilelabel.resources import keep

if TYPE_CHECKING:
    from tilelabel.pipeline.run import Run

log = logging.getLogger("tilelabel")


def merge(run: Run, client: Client, graph: MergeGraph, passes: Passes) -> tuple[int, dict]:
    """The component count, and per chunk index the worker that kept its labels or input."""
    idxs = list(graph.plan.indices())
    # the specs wait for their inputs: the merge has just begun
    specs = {graph.spec_keys[i]: f for i, f in zip(idxs, passes.counts, strict=True)}
    placed = placement.beside(client, specs)
    log.debug("%d of %d lookup specs placed beside their chunks", placed, len(idxs))
    passes.counts.clear()
    holders = {}
    if graph.keeping:  # asked while the merge runs: every summary, so every keep, is done
        # a worker lost meanwhile kept nothing: its chunks are labeled again where they go
        for worker, held in client.run(keep.held, graph.token, on_error="ignore").items():
            holders.update((tuple(idx), worker) for idx in held)
    progress.wait(client, [passes.count], "merging", run.progress)
    passes.summaries.clear()  # the counts and statistics are no longer needed by the client
    count = int(passes.count.result())
    run.lap("merging")
    return count, holders
