"""Phase 6: the output is created once the count is known, and every chunk is relabeled and
written (:func:`tilelabel.pipeline.relabel.write_chunk`).

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
from typing import TYPE_CHECKING

import numpy as np

from tilelabel.dtypes import label_dtype
from tilelabel.pipeline import relabel
from tilelabel.pipeline.graph import Index, MergeGraph
from tilelabel.pipeline.relabel import write_chunk
from tilelabel.resources import RunPlan
from tilelabel.storage import Created, ZarrTarget
from tilelabel.workflow.state import Run, Submitted, Terminated, attributes, input_checksum

if TYPE_CHECKING:
    from tilelabel.workflow.executors import Executor

log = logging.getLogger("tilelabel")

#: how long a failed writing pass waits for the writes in flight before it removes the output
STOP_SECONDS = 300.0


def write(
    run: Run,
    ex: Executor,
    graph: MergeGraph,
    submitted: Submitted,
    run_plan: RunPlan,
    count: int,
    keepers: dict[Index, str],
) -> Created:
    """Create the output for ``count`` components and write every chunk into it (a resumed
    run: every chunk not written yet)."""
    output = run.output
    # a uint32 that cannot hold the count is refused; a resumed run keeps its labels' dtype
    requested = run.options.dtype
    if requested == "auto":
        requested = output.resumed_dtype() or "auto"
    dust = run.options.dust is not None  # the input's values, not labels
    dtype = run.volume.array.dtype if dust else label_dtype(count, requested)
    prints = None if submitted.prints is None else ex.result(submitted.prints)
    if output.mode == "table":  # complete labels: their table is what the run writes
        created = output.open_complete(count, input_checksum(prints))
        run.lap("writing")
        return created
    marks = output.marks()
    resumed = output.mode == "resume"
    written = marks.written() if resumed else set()
    recorded = marks.recorded_input() if resumed else None
    if prints is not None and resumed:
        unchanged(run, graph, recorded, prints, written)
    created = output.create(dtype, attributes(run, count, graph.plan))
    if prints is not None and recorded is None:
        marks.record_input(prints)  # before any write
    if written:
        log.info("resuming: %d of %d chunks written already", len(written), graph.plan.nchunks)
    encoder = None if dust else run.resources.encoder(run_plan, created)
    target = ZarrTarget(
        created.url,
        run.options.storage_options,
        created.index,
        None if encoder is None else encoder.layout,
        run=output.run_id,
    )
    reader, token = run.volume.reader(), graph.token
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
            token=token,
            constant=graph.plan.constant(idx),
            values=dust,
            key=relabel.write_key(token, i),
            where=keepers.get(idx),
        )
        for i, (idx, spec) in enumerate(zip(idxs, submitted.specs, strict=True))
        if idx not in written
    ]
    try:
        ex.wait(writes, "writing", run.progress)
        made_from_labels(ex, output, token)
    except BaseException as e:
        stop(run, ex, writes, token, keep=isinstance(e, Terminated))
        raise
    run.lap("writing")
    return created


def unchanged(
    run: Run,
    graph: MergeGraph,
    recorded: np.ndarray | None,
    prints: np.ndarray,
    written: set[Index],
) -> None:
    """Refuse to resume labels whose input changed since the interrupted run read it: the
    chunks it wrote would not match the rest (``recorded``: that run's checksums, per chunk in
    raster order; None where it recorded none, which only matters once it wrote a chunk)."""
    url, hint = run.volume.url, "pass overwrite=True (--overwrite) to label it again"
    width = prints.shape[1]
    if recorded is None or recorded.size % width:
        if written:
            raise ValueError(
                f"output {run.output.url} holds no record of the input its labels were made "
                f"from; {hint}"
            )
        return
    then = {tuple(row[:-1]): row[-1] for row in recorded.reshape(-1, width).tolist()}
    now = {tuple(row[:-1]): row[-1] for row in prints.tolist()}
    changed = sorted(i for i in then.keys() | now.keys() if then.get(i) != now.get(i))
    if changed:
        where = graph.plan.chunk(changed[0]).where
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        raise ValueError(
            f"input {url} changed since the interrupted run read it ({where}{more}): the "
            f"labels written from it would not match; {hint}"
        )


def made_from_labels(ex: Executor, output, token: str) -> None:
    """What the output makes from its labels once they are written (an OME-Zarr label image's
    lower levels), one turn of tasks after another."""
    for turn, tasks in enumerate(output.levels()):
        keys = [f"tilelabel-level-{token}-{turn}-{i}" for i in range(len(tasks))]
        ex.gather([ex.submit(task, key=key) for task, key in zip(tasks, keys, strict=True)])


def stop(run: Run, ex: Executor, writes: list, token: str, keep: bool = False) -> None:
    """A failed writing pass: the writes not started are cancelled, the output is closed to
    new ones (not where it is to be resumed, ``keep``), and the writes in flight (``token``'s,
    on every worker still there) are waited for. Never raises: the failure is what the caller
    sees."""
    steps = (
        ("cancelling the writes", lambda: ex.cancel(writes)),
        ("closing the output", (lambda: None) if keep else run.output.stop_writes),
        ("waiting for the writes in flight", lambda: wait_for_writes(ex, token)),
    )
    for what, step in steps:
        try:
            step()
        except Exception as e:
            log.warning("%s of %s failed: %s", what, run.output.url, e)


def wait_for_writes(ex: Executor, token: str, timeout: float = STOP_SECONDS) -> None:
    """Until no worker runs a write of the run ``token``
    (:func:`tilelabel.pipeline.relabel.writes_in_flight`)."""
    deadline = time.monotonic() + timeout
    while True:
        left = sum(ex.each(relabel.writes_in_flight, token, lenient=True).values())
        if not left:
            return
        if time.monotonic() > deadline:
            log.warning("%d writes still running after %.0f s", left, timeout)
            return
        time.sleep(0.05)
