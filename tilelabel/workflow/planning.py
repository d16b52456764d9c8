"""Phase 1, plan: the run's processing chunks on its executor and what each worker may keep
besides them, as its backend's resources advise (:meth:`tilelabel.resources.Resources.fit`);
then the graph of the pipeline's steps 2 to 5 for that plan
(:func:`tilelabel.pipeline.graph.build`).

Where the resources say the workers should load something while the labeling pass runs (the
GPU's encoder, the border merge's kernels), the run has each worker start it now.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TYPE_CHECKING

from tilelabel import settings
from tilelabel.chunking import ChunkPlan
from tilelabel.pipeline import graph as graph_mod
from tilelabel.resources import PlanRequest, RunPlan
from tilelabel.workflow.state import Run

if TYPE_CHECKING:
    from tilelabel.workflow.executors import Executor

log = logging.getLogger("tilelabel")


def plan_run(run: Run, ex: Executor) -> RunPlan:
    """The run's chunks on ``ex`` and what each worker may keep besides them; the warm-ups its
    resources ask for started on every worker (a lost worker starts none)."""
    o, volume = run.options, run.volume
    request = PlanRequest(
        shape=volume.shape,
        storage=volume.storage_chunks,
        chunks=o.chunks,
        connectivity=run.labeler.connectivity,
        keep_labels=o.keep_labels,
        keep_input=o.keep_input,
        gpu_encode=o.gpu_encode,
        like=volume.array,
        stored=run.stored,
        fill=run.fill,
    )
    run_plan = run.resources.fit(ex, request)
    for warm in run.resources.warm_ups(run_plan):
        ex.each(warm, lenient=True)
    log.info(
        "labeling %s %s in %d chunks of up to %s",
        volume.shape,
        volume.array.dtype,
        run_plan.chunks.nchunks,
        run_plan.chunks.max_block_shape(),
    )
    return run_plan


def build_graph(run: Run, run_plan: RunPlan) -> graph_mod.MergeGraph:
    """The tasks of the pipeline's steps 2 to 5 for the run's plan; refused where there would
    be more than ``max-tasks`` (:mod:`tilelabel.settings`) of them."""
    check_task_count(run_plan.chunks)
    reader = run.volume.reader()
    intensity = None
    if run.intensity is not None:
        intensity = graph_mod.Source(lambda idx, values=run.intensity: values)
    return graph_mod.build(
        source=graph_mod.Source(lambda idx: reader),
        plan=dataclasses.replace(run_plan.chunks, wrap=run.wrap),
        labeler=run.labeler,
        stats=run.stats,
        intensity=intensity,
        keep_budget=run_plan.label_budget,
        keep_input_budget=run_plan.input_budget,
        fingerprints=True,  # a resumed run proves its input unchanged (:mod:`.writing`)
        contacts=run.contacts,
    )


def check_task_count(plan: ChunkPlan) -> None:
    """Refuse a plan whose tasks the client could not build nor the scheduler hold, before it
    builds any, with chunks that would do."""
    most, tasks = settings.max_tasks(), plan.nchunks * graph_mod.TASKS_PER_CHUNK
    if tasks <= most:
        return
    size = [c[0] for c in plan.chunks]
    grow = math.ceil((tasks / most) ** (1 / plan.ndim))
    bigger = ",".join(str(min(s * grow, n)) for s, n in zip(size, plan.shape, strict=True))
    raise ValueError(
        f"{plan.nchunks:,} chunks of {tuple(size)} would make about {tasks:,} tasks, more than "
        f"tilelabel.max-tasks ({most:,}); use larger chunks, e.g. --chunks {bigger}"
    )
