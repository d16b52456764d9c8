"""Step 6: the output is created once the count is known, and every chunk is relabeled and
written (:func:`.relabel.write_chunk`).

The writes are submitted as soon as the count is known, each to start when its chunk's lookup
spec is ready, on the worker that kept the chunk's labels or input where one did. A write that
fails removes the output again, so that nothing half-written is left.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from tilelabel._version import __version__
from tilelabel.dtypes import label_dtype
from tilelabel.pipeline.graph import MergeGraph
from tilelabel.pipeline.labeling import Passes
from tilelabel.pipeline.relabel import write_chunk
from tilelabel.resources import Fit
from tilelabel.storage import Created, ZarrTarget

if TYPE_CHECKING:
    from tilelabel.pipeline.executors import Executor
    from tilelabel.pipeline.run import Run


def attributes(run: Run, count: int) -> dict:
    """What the output records of the run that made it (``complete`` only once it is)."""
    meta = {
        "version": __version__,
        "source": run.volume.url,
        "connectivity": run.labeler.connectivity,
        "components": count,
        "backend": run.labeler.backend,
        "complete": False,
    }
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
    """Create the output for ``count`` components and write every chunk into it."""
    dtype = label_dtype(count, run.options.dtype)  # a uint32 that cannot hold it is refused
    created = run.output.create(dtype, attributes(run, count))
    encoder = run.resources.encoder(fit, created)
    target = ZarrTarget(
        created.url,
        run.options.storage_options,
        created.index,
        None if encoder is None else encoder.layout,
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
            key=f"tilelabel-write-{tag}-{i}",
            where=holders.get(idx),
        )
        for i, (idx, spec) in enumerate(zip(idxs, passes.specs, strict=True))
    ]
    try:
        ex.wait(writes, "writing", run.progress)
        run.output.fill(ex)
    except BaseException:
        run.output.remove()
        raise
    run.lap("writing")
    return created
