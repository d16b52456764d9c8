"""The tables of a run (the statistics, the region graph), collected from their tasks a piece at
a time while the labels are written and written to Parquet by a streaming writer, so that the
client holds one piece's rows, of a bounded size (plus the frame, where one is asked for)."""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from tilelabel.pipeline import contacts
from tilelabel.pipeline.stats import concat, empty_columns, label_span, rows_between, to_frame
from tilelabel.storage.outputs import partial_path
from tilelabel.storage.places import filesystem

if TYPE_CHECKING:
    from tilelabel.workflow.executors import Executor

#: Parquet row-group size (rows) when writing the table
ROW_GROUP = 1 << 20
#: pieces of fewer rows are held until they make as many, so that no row group is tiny
SMALL_PIECE = 1 << 16


def _arrow(values: np.ndarray, kind):
    """A numpy column as an Arrow array of type ``kind``, on the column's own buffer:
    ``pa.array`` imports pandas (a quarter second of a run) to ask whether it was given a
    pandas object."""
    import pyarrow as pa

    if values.dtype == np.bool_:  # Arrow packs booleans in bits
        return pa.array(values, kind)
    values = np.ascontiguousarray(values, dtype=np.dtype(kind.to_pandas_dtype()))
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


class ParquetSink:
    """Writes the table to Parquet piece by piece (row groups of :data:`SMALL_PIECE` to
    :data:`ROW_GROUP` rows, but the last), to a local path or any fsspec URL. ``empty``: the
    columns, empty, of their dtypes; a column named ``value...`` takes the dtype of the first
    rows written (the source's)."""

    def __init__(self, path: str, empty: dict[str, np.ndarray], metadata: dict | None = None):
        import pyarrow as pa

        self.path = path
        self._fs, where = filesystem(path)
        self._at, self._partial = where, partial_path(where)
        self._file = None
        self.schema = pa.schema(
            [pa.field(c, pa.from_numpy_dtype(v.dtype)) for c, v in empty.items()],
            metadata=metadata,
        )
        self._writer = None
        self._held: list[dict[str, np.ndarray]] = []

    def write(self, cols: dict[str, np.ndarray]) -> None:
        """Rows in the table's order after those written before."""
        n = len(cols[self.schema.names[0]])
        if not n:  # nothing to write; close() makes a table of no rows
            return
        self._held.append(cols)
        if sum(len(p[self.schema.names[0]]) for p in self._held) >= SMALL_PIECE:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if not self._held:
            return
        pieces, self._held = self._held, []
        names = self.schema.names
        cols = pieces[0] if len(pieces) == 1 else {
            c: np.concatenate([p[c] for p in pieces]) for c in names
        }  # fmt: skip
        n = len(cols[names[0]])
        if self._writer is None:
            for name in self.schema.names:  # the source's own dtype: uint64 ids exceed int64
                if name.startswith("value"):
                    field = pa.field(name, pa.from_numpy_dtype(cols[name].dtype))
                    self.schema = self.schema.set(self.schema.get_field_index(name), field)
            self._open()
        for a in range(0, n, ROW_GROUP):
            arrays = [_arrow(cols[f.name][a : a + ROW_GROUP], f.type) for f in self.schema]
            self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))

    def _open(self) -> None:
        import pyarrow.parquet as pq

        self._file = self._fs.open(self._partial, "wb")
        # no dictionaries: labels and float statistics are nearly all distinct values, and
        # encoding them twice takes most of the writer's time; min / max statistics of the
        # labels only, the columns a reader selects rows by
        labels = [c for c in self.schema.names if c.startswith("label")]
        self._writer = pq.ParquetWriter(
            self._file, self.schema, use_dictionary=False, write_statistics=labels
        )

    def close(self) -> None:
        """The table whole at its path (written under :func:`partial_path`, then moved)."""
        self._flush()
        if self._writer is None:  # no rows at all: still a valid, empty table with the columns
            self._open()
        self._writer.close()
        self._file.close()
        self._fs.mv(self._partial, self._at)

    def abandon(self) -> None:
        """A table not finished: what was written of it goes (never raises)."""
        with contextlib.suppress(Exception):
            if self._file is not None:
                self._file.close()
            if self._fs.exists(self._partial):
                self._fs.rm(self._partial)


class Collector:
    """A table's pieces, each already one piece of columns, taken in order from ``parts`` by a
    thread of its own while the labels are written; :meth:`result` then waits for it.
    ``parts`` gathers them from the run's tasks; ``futures``: the tasks (a list that ``parts``
    may extend) that ``cancel`` (the executor's) cancels for a run that fails.

    Writes them with ``sink`` (if given), under its partial name until :meth:`result` moves it
    into place, so that a table is whole only beside complete labels; with ``frame``, returns
    the whole table as a DataFrame (``join`` of every piece).
    """

    def __init__(
        self,
        cancel: Callable,
        futures: list,
        parts: Iterable[dict[str, np.ndarray]],
        join: Callable[[list], dict[str, np.ndarray]],
        sink: ParquetSink | None = None,
        frame: bool = False,
    ):
        self._parts_in = parts
        self._futures = futures
        self._cancel, self._join, self._frame = cancel, join, frame
        self._sink = sink
        self._parts: list[dict[str, np.ndarray]] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._collect, name="tilelabel-table", daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        try:
            for part in self._parts_in:
                if self._sink is not None:
                    self._sink.write(part)
                if self._frame:
                    self._parts.append(part)
                del part  # (not held while the next one is gathered)
        except BaseException as e:  # the run's cancelled futures, or a failed task
            self._error = e

    def result(self):
        """Wait for the table; the Parquet file moved into place; the DataFrame (or None)."""
        try:
            self._thread.join()
            if self._error is not None:
                raise self._error
            if self._sink is not None:
                self._sink.close()
        except BaseException:
            self.abandon()
            raise
        if not self._frame:
            return None
        return to_frame(self._join(self._parts))

    def abandon(self) -> None:
        """A run that failed: its table's futures cancelled and the thread ended, what was
        written of the table goes (never raises)."""
        with contextlib.suppress(Exception):
            self._cancel(list(self._futures))
        self._thread.join(timeout=60)
        if self._sink is not None:
            self._sink.abandon()


#: the most rows of the statistics table gathered at once: a slab of more is gathered a range
#: of labels at a time, so that the client's memory does not grow with the component count
BUCKET = 1 << 20
#: pieces joined ahead of the one being written: each piece is joined (sorted) by a task of
#: its own, so that the writer's thread only encodes, and the next ones are ready when it is
AHEAD = 4


def statistics(
    ex: Executor,
    futures: list,
    idxs: list,
    names: list[str],
    *,
    count: int,
    token: str,
    path: str | None = None,
    frame: bool = False,
    raster: bool = True,
) -> Collector:
    """The statistics table's :class:`Collector`: the chunk tables one slab (first grid axis)
    at a time, in label order (:func:`slab_rows`). In ``raster`` order every label rooted in
    an earlier slab is smaller than every label rooted in a later one, so concatenating sorted
    slabs gives the sorted table; numbered by size, the chunks are one slab. ``count``: the
    run's component count, which bounds the table's rows; ``token``: the run's, for keys."""
    slabs: dict[int, list] = {}
    for idx, fut in zip(idxs, futures, strict=True):
        slabs.setdefault(idx[0] if raster else 0, []).append(fut)
    sink = ParquetSink(path, empty_columns(names)) if path else None
    tasks = list(futures)
    pieces = slab_rows(ex, [slabs[z] for z in sorted(slabs)], names, count, token, tasks)
    join = lambda parts: concat(parts, names)  # noqa: E731
    return Collector(ex.cancel, tasks, gathered(ex, pieces), join, sink, frame)


def joined(*pieces: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """Chunk tables as one sorted by label (a task: :func:`~tilelabel.pipeline.stats.concat`)."""
    return concat(pieces, names)


def gathered(ex: Executor, pieces: Iterator, most: int = AHEAD) -> Iterator:
    """The results of the futures ``pieces`` yields, in order, taking up to ``most`` futures
    from it ahead of the one gathered, so that their tasks run while it is written."""
    held: collections.deque = collections.deque()
    for fut in pieces:
        held.append(fut)
        if len(held) > most:
            yield ex.gather([held.popleft()])[0]
    while held:
        yield ex.gather([held.popleft()])[0]


def slab_rows(
    ex: Executor, slabs: list[list], names: list[str], count: int, token: str, tasks: list
) -> Iterator:
    """Futures of each slab's rows (its chunk tables, futures, :func:`joined`) in label order,
    as pieces of at most :data:`BUCKET` rows where the table may hold more: each chunk's first
    and last label (:func:`~tilelabel.pipeline.stats.label_span`), then, for a slab of more
    rows, each range of :data:`BUCKET` labels (labels are dense, so as many rows) from the
    chunks that hold any of it (:func:`~tilelabel.pipeline.stats.rows_between`). ``tasks``
    takes the tasks submitted here, for a run that fails. Where no slab can exceed a bucket,
    every join is submitted before this returns, by the run's thread."""

    def join(futures: list, key: str):
        fut = ex.submit(joined, *futures, names=names, key=f"tilelabel-join-{token}-{key}")
        tasks.append(fut)
        released_after(ex, futures, [fut])
        return fut

    if count <= BUCKET:  # the whole table is a piece at most
        return iter([join(futures, f"{z}") for z, futures in enumerate(slabs)])
    spans = [
        [ex.submit(label_span, f, key=f"tilelabel-span-{token}-{z}-{i}") for i, f in enumerate(s)]
        for z, s in enumerate(slabs)
    ]
    tasks.extend(f for s in spans for f in s)
    return _bucketed(ex, slabs, spans, join, token, tasks)


def _bucketed(
    ex: Executor, slabs: list[list], spans: list[list], join: Callable, token: str, tasks: list
) -> Iterator:
    """:func:`slab_rows` of a table that may hold more than :data:`BUCKET` rows: the pieces of
    each slab, submitted once its chunks' ``spans`` are known."""
    for z, futures in enumerate(slabs):
        got = ex.gather(spans[z])
        if sum(n for _, _, n in got) <= BUCKET:
            yield join(futures, f"{z}")
            continue
        held = [(f, a, b) for f, (a, b, n) in zip(futures, got, strict=True) if n]
        first, last = min(a for _, a, _ in held), max(b for _, _, b in held)
        joins = []
        for lo in range(first, last + 1, BUCKET):
            hi = min(lo + BUCKET - 1, last)
            pieces = [
                ex.submit(
                    rows_between, f, first=lo, last=hi, key=f"tilelabel-rows-{token}-{z}-{lo}-{i}"
                )
                for i, (f, a, b) in enumerate(held)
                if a <= hi and b >= lo
            ]
            tasks.extend(pieces)
            joins.append(join(pieces, f"{z}-{lo}"))
        released_after(ex, futures, joins)
        yield from joins


def released_after(ex: Executor, futures: list, done: list) -> None:
    """``futures`` released once every future of ``done`` (which need them) is: a key released
    while its dependents wait is one that cancelling the run would find half-forgotten."""
    left, lock = [len(done)], threading.Lock()

    def one(_) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        ex.release(futures)

    for fut in done:
        fut.add_done_callback(one)


#: the most futures of the region graph's rows gathered and written together: a task's rows
#: are about its chunk's pairs, so the client holds a few chunks' worth, whatever the volume
GRAPH_GROUP = 8


def ready_runs(futures: list, most: int) -> Iterator[list]:
    """``futures`` in order, in groups of the next one and those after it done already (at
    most ``most``): one round trip gathers what has piled up, and a piece is written as soon
    as those before it are."""
    i = 0
    while i < len(futures):
        j = i + 1
        while j < len(futures) and j - i < most and futures[j].done():
            j += 1
        yield futures[i:j]
        i = j


def region_graph(ex: Executor, futures: list, names: list[str], path: str) -> Collector:
    """The region graph's :class:`Collector`: its tasks' rows in task order, a few tasks at a
    time (:func:`ready_runs`)."""
    sink = ParquetSink(path, contacts.empty_columns(names))
    join = lambda parts: contacts.concat(parts, names)  # noqa: E731
    parts = (join(ex.gather(run)) for run in ready_runs(futures, GRAPH_GROUP))
    return Collector(ex.cancel, futures, parts, join, sink)
