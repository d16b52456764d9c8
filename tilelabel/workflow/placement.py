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
The scheduler places each spec as its chunk's counts are done (:class:`SpecsBeside`), long
before the merge lets the spec start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from distributed import Client, SchedulerPlugin

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


class SpecsBeside(SchedulerPlugin):
    """On the scheduler: each spec prefers the worker that holds its chunk's counts, set once
    both are known. Loose, so that a spec whose worker is gone runs elsewhere. The plugin
    leaves once every spec has started or been forgotten."""

    def __init__(self, name: str, counts_of: Mapping[Key, Key]):
        self.name = name
        self.counts_of = dict(counts_of)  # spec key -> its chunk's counts key
        self.spec_of = {c: s for s, c in self.counts_of.items()}
        self.scheduler = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish == "memory" and key in self.spec_of:
            self._place(self.spec_of[key])
        elif key in self.counts_of:
            if finish == "waiting":  # submitted after its counts were done
                self._place(key)
            elif finish != "released":  # started, or gone: nothing left to place
                del self.spec_of[self.counts_of.pop(key)]
                if not self.counts_of:
                    self.scheduler.remove_plugin(name=self.name)

    def _place(self, spec: Key) -> None:
        tasks = self.scheduler.tasks
        ts, counts = tasks.get(spec), tasks.get(self.counts_of[spec])
        if ts is None or counts is None or not counts.who_has:
            return
        if ts.state in ("released", "waiting"):
            ts.worker_restrictions = {next(iter(counts.who_has)).address}
            ts.loose_restrictions = True


def place_specs(client: Client, name: str, counts_of: Mapping[Key, Key]) -> None:
    """Make each spec of ``counts_of`` (spec key -> its chunk's counts key) on the worker that
    computes the counts; registered before either is submitted."""
    client.register_plugin(SpecsBeside(name, counts_of), name=name)


def unplace_specs(client: Client, name: str) -> None:
    """Remove :func:`place_specs`' plugin (a submission that failed: no spec will start)."""
    with contextlib.suppress(Exception):
        client.unregister_scheduler_plugin(name)
