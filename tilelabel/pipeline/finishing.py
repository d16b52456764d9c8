"""The end of a run: the output marked complete and made visible (once it is still the run's),
the statistics table collected, and the run's :class:`Result`."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.graph import MergeGraph
from tilelabel.pipeline.labeling import Passes
from tilelabel.pipeline.writing import attributes
from tilelabel.storage import Created

if TYPE_CHECKING:
    from tilelabel.pipeline.executors import Executor
    from tilelabel.pipeline.run import Run

log = logging.getLogger("tilelabel")


@dataclass
class Result:
    components: int
    voxels: int
    seconds: float
    dtype: str
    backend: str
    #: the statistics table (``stats=True``)
    table: Any = None
    #: wall seconds of each phase, from the client: ``starting`` until the labeling pass is
    #: submitted (opening, planning, the graph), ``labeling`` until every chunk's summary is
    #: done, ``merging`` until the component count is known, ``writing`` until the last write
    phases: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        rate = self.voxels / self.seconds if self.seconds > 0 else float("inf")
        return (
            f"{self.components:,} components in {self.voxels:,} voxels, "
            f"{self.seconds:.2f} s ({rate / 1e6:,.1f} Mvoxel/s, {self.backend}, {self.dtype})"
        )


def finish(
    run: Run, ex: Executor, graph: MergeGraph, passes: Passes, created: Created, count: int
) -> Result:
    """Mark the output complete and publish it; collect the statistics table if one is asked
    for (written to Parquet one slab of chunks at a time, or returned whole)."""
    attrs = attributes(run, count, graph.plan)
    attrs["tilelabel"]["complete"] = True
    run.output.complete(attrs)  # checked still the run's, made visible, the lease released
    table = None
    if passes.tables:
        stats = run.options.stats
        table = stats_mod.collect(
            ex.gather,
            passes.tables,
            list(graph.plan.indices()),
            stats_mod.columns(
                len(run.volume.shape),
                run.intensity is not None,
                run.stats.spacing,
                run.labeler.multilabel,
            ),
            path=None if stats is True else os.fspath(stats),
            frame=stats is True,
            raster=run.stats.order == "raster",
        )
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
    log.debug("%s", result.summary())
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
