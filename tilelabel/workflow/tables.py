"""The statistics table of a run, collected from its chunks one slab at a time while the labels
are written and written to Parquet by a streaming writer, so that the client holds one slab's
rows (plus the frame, where one is asked for)."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from tilelabel.pipeline.stats import concat, empty_columns, to_frame
from tilelabel.storage.outputs import partial_path
from tilelabel.storage.places import filesystem

#: Parquet row-group size (rows) when writing the table
ROW_GROUP = 1 << 20


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
    """Writes the table to Parquet piece by piece (row groups of at most :data:`ROW_GROUP`), to
    a local path or any fsspec URL."""

    def __init__(self, path: str, names: list[str], metadata: dict[str, str] | None = None):
        import pyarrow as pa

        self.path = path
        self._fs, where = filesystem(path)
        self._at, self._partial = where, partial_path(where)
        self._file = None
        empty = empty_columns(names)
        self.schema = pa.schema(
            [pa.field(c, pa.from_numpy_dtype(v.dtype)) for c, v in empty.items()],
            metadata=metadata,
        )
        self._writer = None
        self.rows = 0

    def write(self, cols: dict[str, np.ndarray]) -> None:
        import pyarrow as pa

        n = len(cols["label"])
        if not n:  # nothing to write; close() makes a table of no rows
            return
        if self._writer is None:
            if "value" in cols:  # the source's own dtype: uint64 ids do not all fit int64
                field = pa.field("value", pa.from_numpy_dtype(cols["value"].dtype))
                self.schema = self.schema.set(self.schema.get_field_index("value"), field)
            self._open()
        for a in range(0, n, ROW_GROUP):
            arrays = [_arrow(cols[f.name][a : a + ROW_GROUP], f.type) for f in self.schema]
            self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.rows += n

    def _open(self) -> None:
        import pyarrow.parquet as pq

        self._file = self._fs.open(self._partial, "wb")
        # no dictionaries: labels and float statistics are nearly all distinct values, and
        # encoding them twice takes most of the writer's time
        self._writer = pq.ParquetWriter(self._file, self.schema, use_dictionary=False)

    def close(self) -> None:
        """The table whole at its path (written under :func:`partial_path`, then moved)."""
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
    """The chunk tables gathered one slab (first grid axis) at a time, in label order, by a
    thread of its own while the labels are written (``gather``: the run's executor's, which
    fetches and lets go of a slab's futures; ``cancel``: its cancel, for a run that fails);
    :meth:`result` then waits for it.

    Writes them to Parquet at ``path`` (if given), under its partial name until :meth:`result`
    moves it into place, so that a table is whole only beside complete labels; returns the
    whole table as a DataFrame (if ``frame``). In ``raster`` order every label rooted in an
    earlier slab is smaller than every label rooted in a later one, so concatenating sorted
    slabs gives the sorted table while the client holds one slab's rows (plus the frame, when
    one is asked for). Numbered by size (``largest_k`` rows at most), they are gathered at once.
    """

    def __init__(self, gather, cancel, futures, idxs, names, path=None, frame=False,
                 metadata=None, raster=True):  # fmt: skip
        slabs: dict[int, list] = {}
        for idx, fut in zip(idxs, futures, strict=True):
            slabs.setdefault(idx[0] if raster else 0, []).append(fut)
        self._slabs = [slabs[z] for z in sorted(slabs)]
        self._futures = list(futures)
        self._gather, self._cancel, self._names, self._frame = gather, cancel, names, frame
        self._sink = ParquetSink(path, names, metadata) if path else None
        self._parts: list[dict[str, np.ndarray]] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._collect, name="tilelabel-table", daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        try:
            for futures in self._slabs:
                part = concat(self._gather(futures), self._names)
                if self._sink is not None:
                    self._sink.write(part)
                if self._frame:
                    self._parts.append(part)
                del part  # (not held while the next slab is gathered)
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
        return to_frame(concat(self._parts, self._names) if self._parts else
                        empty_columns(self._names))  # fmt: skip

    def abandon(self) -> None:
        """A run that failed: its table's futures cancelled and the thread ended, what was
        written of the table goes (never raises)."""
        with contextlib.suppress(Exception):
            self._cancel(self._futures)
        self._thread.join(timeout=60)
        if self._sink is not None:
            self._sink.abandon()
