"""Step 6: the output is created once the count is known, and every chunk is relabeled and
written (:func:`.relabel.write_chunk`).

The writes are submitted as soon as the count is known, each to start when its chunk's lookup
spec is ready, on the worker that kept the chunk's labels or input where one did. Each write
checks that the output is still the run's, and records its chunk once stored, so that a run
resumed after a kill writes only the chunks not recorded (:mod:`tilelabel.storage.lease`).

Where a write fails or the run is interrupted, the writes not started are cancelled, the output
is closed to new writes and the run waits for those in flight (:func:`stop`) before the caller
removes the output, so that nothing is written into a removed output.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from tilelabel._version import __version__
from tilelabel.dtypes import label_dtype
from tilelabel.pipeline import relabel
from tilelabel.pipeline.graph import MergeGraph
from tilelabel.pipeline.labeling import Passes
from tilelabel.pipeline.plan import ChunkPlan
from tilelabel.pipeline.relabel import write_chunk
from tilelabel.resources import Fit
from tilelabel.storage import Created, ZarrTarget

if TYPE_CHECKING:
    from tilelabel.pipeline.executors import Executor
    from tilelabel.pipeline.run import Run

log = logging.getLogger("tilelabel")

#: how long a failed writing pass waits for the writes in flight before it removes the output
STOP_SECONDS = 300.0


def attributes(run: Run, count: int | None, plan: ChunkPlan | None = None) -> dict:
    """What the output records of the run that made it (``complete`` only once it is; the run's
    id is the output's to add)."""
    meta: dict[str, Any] = {
        "version": __version__,
        "source": run.volume.url,
        "connectivity": run.labeler.connectivity,
        "components": count,
        "backend": run.labeler.backend,
        "complete": False,
    }
    if run.labeler.multilabel:
        meta["multilabel"] = True
    if run.volume.lead:
        meta["selection"] = list(run.volume.lead)
    if run.wrap:
        meta["wrap_axes"] = list(run.wrap)
    if plan is not None:  # the processing chunks, which a resumed run takes again
        meta["chunks"] = [int(c[0]) for c in plan.chunks]
    if run.stats is not None and run.stats.filtering:
        meta.update(min_size=run.stats.min_size, max_size=run.stats.max_size)
        meta.update(largest_k=run.stats.largest_k, order=run.stats.order)
    return {"tilelabel": meta}


def write(
    run: Run,
    ex: Executor,
    graph: MergeGraph,
    passes: Passes,
    fit: Fit,
    count: int,
    holders: dict,
) -> Created:
    """Create the output for ``count`` components and write every chunk into it (a resumed
    run: every chunk not written yet)."""
    output = run.output
    # a uint32 that cannot hold the count is refused; a resumed run keeps its labels' dtype
    requested = run.options.dtype
    if requested == "auto":
        requested = output.resumed_dtype() or "auto"
    dtype = label_dtype(count, requested)
    created = output.create(dtype, attributes(run, count, graph.plan))
    marks = output.marks()
    written = marks.written() if output.mode == "resume" else set()
    if written:
        log.info("resuming: %d of %d chunks written already", len(written), graph.plan.nchunks)
    encoder = run.resources.encoder(fit, created)
    target = ZarrTarget(
        created.url,
        run.options.storage_options,
        created.index,
        None if encoder is None else encoder.layout,
        run=output.run_id,
    )
    reader, tag = run.volume.reader(), uuid.uuid4().hex
    idxs = list(graph.plan.indices())
    writes = [
        ex.submit(
            write_chunk,
            reader,
            spec,
            chunk=graph.plan.chunk(idx),
            labeler=run.labeler,
            dtype=dtype,
            target=target,
            slot=graph.slots.get(idx),
            encoder=encoder,
            marks=marks,
            tag=tag,
            key=relabel.write_key(tag, i),
            where=holders.get(idx),
        )
        for i, (idx, spec) in enumerate(zip(idxs, passes.specs, strict=True))
        if idx not in written
    ]
    try:
        ex.wait(writes, "writing", run.progress)
        output.fill(ex)
    except BaseException:
        stop(run, ex, writes, tag)
        raise
    run.lap("writing")
    return created


def stop(run: Run, ex: Executor, writes: list, tag: str) -> None:
    """A failed writing pass: the writes not started are cancelled, the output is closed to
    new ones, and the writes in flight (``tag``'s, on every worker still there) are waited for.
    Never raises: the failure is what the caller sees."""
    steps = (
        ("cancelling the writes", lambda: ex.cancel(writes)),
        ("closing the output", run.output.stop_writes),
        ("waiting for the writes in flight", lambda: wait_for_writes(ex, tag)),
    )
    for what, step in steps:
        try:
            step()
        except Exception as e:
            log.warning("%s of %s failed: %s", what, run.output.url, e)


def wait_for_writes(ex: Executor, tag: str, timeout: float = STOP_SECONDS) -> None:
    """Until no worker runs a write of ``tag`` (:func:`.relabel.writes_in_flight`)."""
    deadline = time.monotonic() + timeout
    while True:
        left = sum(ex.each(relabel.writes_in_flight, tag, lenient=True).values())
        if not left:
            return
        if time.monotonic() > deadline:
            log.warning("%d writes still running after %.0f s", left, timeout)
            return
        time.sleep(0.05)
