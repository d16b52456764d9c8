"""Where and in which order a run's tasks go, so that what waits on the workers stays small.

*Order*: chunks are labeled in raster order of the chunk grid, and merge tasks run before the
chunks still to label. A chunk's faces wait on its worker until its border pairs are done, and
those need its forward neighbours, the next slab's among them. In raster order the faces that
wait are about a slab of chunks across all workers; in dask's own order, which jumps about the
grid, they grow with the volume.

*Place*: each chunk's lookup spec is made on the worker that labeled the chunk. dask runs a
task where most of its inputs' bytes are, and a spec's largest input (a chunk row's plane
prefixes) lives on the worker of that row's prefix task, so one worker would make and hold the
specs of many chunks until their writes. A spec waits for its chunk's write, which goes to the
worker that labeled the chunk: made there, every worker holds the specs of its own chunks alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distributed import Client

Key = str | tuple


def raster_priority(grid: tuple[int, ...], key: Key) -> int:
    """dask priority of a labeling task (a chunk's key: name, then its grid index): below
    every merge task (0) and the earlier in raster order the higher. A ``dask.annotate``
    callable, called by the scheduler for each key of the submission."""
    if not isinstance(key, tuple) or len(key) != 1 + len(grid):
        return 0
    ordinal = 0
    for i, n in zip(key[1:], grid, strict=True):
        ordinal = ordinal * n + i
    return -1 - ordinal


def _restrict(where: Mapping[Key, str], dask_scheduler=None) -> int:
    """On the scheduler: prefer ``where[key]`` for each task not yet started. Loose, so that a
    task whose worker is gone runs elsewhere instead of waiting for it."""
    placed = 0
    for key, worker in where.items():
        ts = dask_scheduler.tasks.get(key)
        if ts is None or ts.state not in ("released", "waiting"):
            continue  # started or done already: its place is taken
        if worker not in dask_scheduler.workers:
            continue
        ts.worker_restrictions = {worker}
        ts.loose_restrictions = True
        placed += 1
    return placed


def beside(client: Client, tasks: Mapping[Key, Any]) -> int:
    """Run each task of ``tasks`` (keys of submitted tasks) on the worker that holds the result
    of its value (a future, or a persisted collection of one key), where that task has not
    started yet and the worker still runs; returns how many were placed. A placement only: a
    task that started before it runs where it was put."""
    held = client.who_has(list(tasks.values()))
    where = {key: held[fut.key][0] for key, fut in tasks.items() if held.get(fut.key)}
    return client.run_on_scheduler(_restrict, where) if where else 0
