"""Where a run's tasks execute: threads of this process, or the workers of a dask cluster.

Whether a run joins a cluster, starts one or may stay in this process is decided once, as it
opens (:func:`where`); :func:`open_executor` then gives its phases (:mod:`.labeling`,
:mod:`.merging`, :mod:`.writing`, :mod:`.finishing`) an :class:`Executor`, which they ask the
same few things whichever it is:

- ``threads()``: each worker's threads, which size the plan;
- ``each(fn, ..., lenient=False)``: ``fn`` run once in every worker process (its GPU, what it
  keeps); ``lenient``: the answers of the workers that gave one (a worker may die meanwhile);
- ``start(graph)``: the run's graph submitted: a future per chunk's counts, lookup spec and
  table rows, and one for the component count (:class:`~.state.Submitted`);
- ``keepers(graph)``: per chunk, the worker that kept it for the writing pass;
- ``submit(fn, *args, key=..., where=..., **kwargs)``: one task (a unique ``key``), run once
  its future arguments are done, on the worker ``where`` if it still runs;
- ``wait(futures, desc, show)`` (a progress bar where ``show``), ``result(future)``,
  ``gather(futures)`` (then let go of), ``release(futures)`` (results no longer wanted),
  ``cancel(futures)`` (what of them has not run; never raises).

A volume that one process can label runs on :class:`ThreadExecutor`: dask's threaded
scheduler over the same graph and the same task functions in this process, with no scheduler,
no worker processes, and nothing of ``distributed`` imported, so that a small run costs about
what its work does. Larger volumes, and every cluster a user names, run on
:class:`DaskExecutor`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import as_completed as futures_done
from typing import TYPE_CHECKING, Any, Protocol

from tilelabel.pipeline.graph import Index, MergeGraph
from tilelabel.workflow import progress
from tilelabel.workflow.state import Submitted, Where

if TYPE_CHECKING:
    from distributed import Client

    from tilelabel.options import Options
    from tilelabel.workflow.state import Run


class Executor(Protocol):
    """What the phases of a run ask of the place its tasks run (see the module's docstring)."""

    def threads(self) -> dict[str, int]: ...

    def each(
        self, fn: Callable, *args: Any, lenient: bool = False, **kwargs: Any
    ) -> dict[str, Any]: ...

    def start(self, graph: MergeGraph) -> Submitted: ...

    def keepers(self, graph: MergeGraph) -> dict[Index, str]: ...

    def submit(
        self, fn: Callable, *args: Any, key: str, where: str | None = None, **kwargs: Any
    ): ...

    def wait(self, futures: Sequence, desc: str, show: bool) -> None: ...

    def result(self, future) -> Any: ...

    def gather(self, futures: Sequence) -> list: ...

    def release(self, futures: Sequence) -> None: ...

    def cancel(self, futures: Sequence) -> None: ...


#: the ``cluster:`` kinds whose workers the run starts on this machine
LOCAL_KINDS = ("local", "local-cuda")


def where(options: Options, client: Client | None = None) -> Where:
    """Where the run of ``options`` executes: ``client``'s cluster; else the cluster its
    options name (a scheduler address, a ``cluster:`` section); else the client already active
    in this process; else this process or a local cluster started for it."""
    if client is not None:
        return Where(client=client, remote=True)
    if options.scheduler is not None:
        return Where(remote=True)
    if options.cluster is not None:
        return Where(remote=options.cluster["kind"] not in LOCAL_KINDS)
    active = active_client()
    if active is not None:
        return Where(client=active, remote=True)
    return Where(may_stay=True)


@contextlib.contextmanager
def open_executor(run: Run) -> Iterator[Executor]:
    """The executor of ``run``, as :attr:`Run.where <tilelabel.workflow.state.Run.where>`
    says: its threads here, or a client of the cluster it joins or starts
    (:func:`tilelabel.cluster.connect.connect`)."""
    o, at = run.options, run.where
    if at.may_stay:
        threads = run.resources.in_process(run.workload, workers=o.workers)
        if threads:
            with ThreadExecutor(threads) as ex:
                yield ex
            return
    from tilelabel.cluster.connect import connect

    with connect(
        client=at.client,
        scheduler=o.scheduler,
        cluster=o.cluster,
        backend=run.labeler.backend,
        workload=run.workload,
        workers=o.workers,
    ) as c:
        yield DaskExecutor(c)


def active_client() -> Client | None:
    """This process's dask.distributed client, if it has one (never imports distributed)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


# -- this process --------------------------------------------------------------------------------

#: the one worker of a :class:`ThreadExecutor`
THIS_PROCESS = "this process"


class _Cancelled(Exception):
    """Raised into the graph's scheduling loop once its executor closes."""


class ThreadExecutor:
    """The tasks of a run on ``threads`` threads of this process (see the module's docstring).

    The graph runs on dask's threaded scheduler in a thread of its own, which resolves each
    wanted key's future as its task finishes; single tasks go to the same pool once their
    future arguments are done, so that none waits in a pool thread for another.
    """

    def __init__(self, threads: int):
        self.nthreads = int(threads)
        self.pool = ThreadPoolExecutor(self.nthreads, thread_name_prefix="tilelabel")
        self.graphs: list[threading.Thread] = []
        self.closed = False

    def __enter__(self) -> ThreadExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop scheduling; wait for the tasks already running."""
        self.closed = True
        self.pool.shutdown(wait=True, cancel_futures=True)
        for thread in self.graphs:
            thread.join()

    def threads(self) -> dict[str, int]:
        return {THIS_PROCESS: self.nthreads}

    def each(
        self, fn: Callable, *args: Any, lenient: bool = False, **kwargs: Any
    ) -> dict[str, Any]:
        return {THIS_PROCESS: fn(*args, **kwargs)}

    def start(self, graph: MergeGraph) -> Submitted:
        import dask.threaded

        idxs = list(graph.plan.indices())
        wanted: dict[Any, Future] = {}

        def want(key) -> Future:
            return wanted.setdefault(key, Future())

        counts = [want(graph.summary_keys[i][1]) for i in idxs]
        tables = [want(graph.table_keys[i]) for i in idxs if graph.table_keys]
        specs = [want(graph.spec_keys[i]) for i in idxs]
        contacts = [want(key) for key in graph.contacts_keys]
        count = want(graph.count_key)
        prints = None if graph.prints_key is None else want(graph.prints_key)

        def pretask(key, dsk, state) -> None:
            if self.closed:
                raise _Cancelled("the run's executor has closed")

        def posttask(key, result, dsk, state, worker_id) -> None:
            fut = wanted.get(key)
            if fut is not None and not fut.done():
                fut.set_result(result)

        def compute() -> None:
            try:
                dask.threaded.get(
                    dict(graph.graph),
                    list(wanted),
                    pool=self.pool,
                    callbacks=[(None, None, pretask, posttask, None)],
                )
            except BaseException as e:  # every future not yet done fails with the task's error
                for fut in wanted.values():
                    if not fut.done():
                        fut.set_exception(e)

        thread = threading.Thread(target=compute, name="tilelabel-graph", daemon=True)
        thread.start()
        self.graphs.append(thread)
        return Submitted(
            counts=counts, specs=specs, tables=tables, count=count, prints=prints, contacts=contacts
        )

    def keepers(self, graph: MergeGraph) -> dict[Index, str]:
        return {}  # what this process keeps, its writes find

    def submit(
        self, fn: Callable, *args: Any, key: str, where: str | None = None, **kwargs: Any
    ) -> Future:
        out: Future = Future()
        deps = [a for a in args if isinstance(a, Future)]
        left = [len(deps)]
        lock = threading.Lock()

        def launch() -> None:
            if out.done():  # cancelled while it waited for its arguments
                return
            try:
                values = [a.result() if isinstance(a, Future) else a for a in args]
                inner = self.pool.submit(fn, *values, **kwargs)
            except BaseException as e:  # a failed argument, or the pool has shut down
                if not out.done():
                    out.set_exception(e)
                return
            inner.add_done_callback(functools.partial(_copy_outcome, out))

        def arrived(_) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            launch()

        if not deps:
            launch()
        for dep in deps:
            dep.add_done_callback(arrived)
        return out

    def wait(self, futures: Sequence[Future], desc: str, show: bool) -> None:
        with progress.bar(len(futures), desc, show) as bar:
            for fut in futures_done(futures):
                fut.result()  # the first failure, with its traceback
                bar.update(1)

    def result(self, future: Future) -> Any:
        return future.result()

    def gather(self, futures: Sequence[Future]) -> list:
        return [f.result() for f in futures]

    def release(self, futures: Sequence[Future]) -> None:
        pass  # a result here is this process's memory, freed with the last reference to it

    def cancel(self, futures: Sequence[Future]) -> None:
        """The graph schedules nothing more; the futures not done are cancelled (tasks already
        running end on their own)."""
        self.closed = True
        for fut in futures:
            fut.cancel()


def _copy_outcome(out: Future, done: Future) -> None:
    if out.done():  # cancelled meanwhile
        return
    if done.cancelled():
        out.cancel()
    elif done.exception() is not None:
        out.set_exception(done.exception())
    else:
        out.set_result(done.result())


# -- a dask cluster ------------------------------------------------------------------------------


class DaskExecutor:
    """The tasks of a run on the workers of ``client``'s cluster.

    Chunks are labeled in raster order of the grid and merge tasks run before the chunks still
    to label; each chunk's lookup spec is made and its write runs on the worker that labeled
    and kept it (:mod:`.placement`).
    """

    def __init__(self, client: Client):
        self.client = client

    def threads(self) -> dict[str, int]:
        # not scheduler_info(), whose cached answer a periodic refresh may empty
        return dict(self.client.nthreads())

    def each(
        self, fn: Callable, *args: Any, lenient: bool = False, **kwargs: Any
    ) -> dict[str, Any]:
        on_error = "ignore" if lenient else "raise"
        return self.client.run(fn, *args, on_error=on_error, **kwargs)

    def start(self, graph: MergeGraph) -> Submitted:
        import dask
        from distributed import futures_of

        from tilelabel.workflow import placement

        client, delayed = self.client, graph.delayed
        idxs = list(graph.plan.indices())
        per = [graph.summary_keys[i] for i in idxs]  # borders, counts (, stats)

        plugin = f"tilelabel-specs-{graph.token}"
        placement.place_specs(
            client, plugin, {graph.spec_keys[i]: graph.key("counts", i) for i in idxs}
        )
        priority = functools.partial(placement.raster_priority, graph.plan.grid)
        try:
            with dask.annotate(priority=priority):
                persisted = client.persist(
                    [delayed(key) for keys in per for key in keys], optimize_graph=False
                )
            # one submission, unoptimized: the specs and the count share the prefix-sum tasks,
            # and optimizing them as separate collections would rename those shared keys
            tables = [delayed(graph.table_keys[i]) for i in idxs if graph.table_keys]
            specs = [delayed(graph.spec_keys[i]) for i in idxs]
            count = delayed(graph.count_key)
            prints = [] if graph.prints_key is None else [delayed(graph.prints_key)]
            rows = [delayed(key) for key in graph.contacts_keys]
            *futures, count = client.compute(
                [*tables, *specs, *prints, *rows, count], optimize_graph=False
            )
            contacts = futures[len(futures) - len(rows) :]
            del futures[len(futures) - len(rows) :]
            prints = futures.pop() if prints else None
        except BaseException:
            placement.unplace_specs(client, plugin)
            raise
        # Each chunk's borders (its faces) are let go now that the merge's graph holds them: the
        # scheduler frees them once the border pairs that read them are done, during the
        # labeling pass, so that what waits on a worker does not grow with the volume. The
        # release reaches the scheduler after the graph: one ordered stream, handled in order.
        width = len(per[0])
        summaries = [p for j, p in enumerate(persisted) if j % width]
        counts = persisted[1::width]
        del persisted
        return Submitted(
            summaries=summaries,
            counts=[futures_of(c)[0] for c in counts],  # in raster order, one per chunk
            specs=futures[len(tables) :],
            tables=futures[: len(tables)],
            count=count,
            prints=prints,
            contacts=contacts,
        )

    def keepers(self, graph: MergeGraph) -> dict[Index, str]:
        from tilelabel.pipeline import kept

        found: dict[Index, str] = {}
        if graph.keeping:  # asked while the merge runs: every summary, so every keep, is done
            # a worker lost meanwhile kept nothing: its chunks are labeled again where they go
            for worker, held in self.each(kept.held, graph.token, lenient=True).items():
                found.update((tuple(idx), worker) for idx in held)
        return found

    def submit(self, fn: Callable, *args: Any, key: str, where: str | None = None, **kwargs: Any):
        # where a worker kept the chunk, there (elsewhere it reads and labels it again)
        return self.client.submit(
            fn,
            *args,
            key=key,
            workers=None if where is None else [where],
            allow_other_workers=where is not None,
            **kwargs,
        )

    def wait(self, futures: Sequence, desc: str, show: bool) -> None:
        from distributed import as_completed

        with progress.bar(len(futures), desc, show) as bar:
            for fut in as_completed(list(futures), loop=self.client.loop):
                # a finished future's result stays on its worker: fetching it here would bring
                # every chunk's borders and lookup specs into this process, one by one
                if fut.status != "finished":
                    fut.result()
                bar.update(1)

    def result(self, future) -> Any:
        return future.result()

    def gather(self, futures: Sequence) -> list:
        out = self.client.gather(list(futures))
        self.release(futures)
        return out

    def release(self, futures: Sequence) -> None:
        for fut in futures:
            fut.release()

    def cancel(self, futures: Sequence) -> None:
        from distributed import futures_of

        try:
            self.client.cancel(futures_of(list(futures)))
        except Exception as e:  # the run's own error is the one to see
            logging.getLogger("tilelabel").debug("cancelling the run's tasks failed: %s", e)
