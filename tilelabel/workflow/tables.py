"""The statistics table of a run, collected from its chunks one slab at a time and written to
Parquet by a streaming writer, so that the client holds one slab's rows (plus the frame, where
one is asked for)."""

from __future__ import annotations

import contextlib

import numpy as np

from tilelabel.pipeline.stats import concat, empty_columns, to_frame
from tilelabel.storage.outputs import partial_path
from tilelabel.storage.places import filesystem

#: Parquet row-group size (rows) when writing the table
ROW_GROUP = 1 << 20


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
            batch = pa.table(
                {c: pa.array(v[a : a + ROW_GROUP]) for c, v in cols.items()}, schema=self.schema
            )
            self._writer.write_table(batch)
        self.rows += n

    def _open(self) -> None:
        import pyarrow.parquet as pq

        self._file = self._fs.open(self._partial, "wb")
        self._writer = pq.ParquetWriter(self._file, self.schema)

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


def collect(gather, futures, idxs, names, path=None, frame=False, metadata=None, raster=True):
    """Gather the chunk tables one slab (first grid axis) at a time, in label order
    (``gather``: the run's executor's, which fetches and lets go of a slab's futures).

    Writes them to Parquet at ``path`` (if given) and returns the whole table as a DataFrame (if
    ``frame``). In ``raster`` order every label rooted in an earlier slab is smaller than every
    label rooted in a later one, so concatenating sorted slabs gives the sorted table while the
    client holds one slab's rows (plus the frame, when one is asked for). Numbered by size
    (``largest_k`` rows at most), they are gathered at once.
    """
    slabs: dict[int, list] = {}
    for idx, fut in zip(idxs, futures, strict=True):
        slabs.setdefault(idx[0] if raster else 0, []).append(fut)
    sink = ParquetSink(path, names, metadata) if path else None
    parts = []
    try:
        for z in sorted(slabs):
            part = concat(gather(slabs[z]), names)
            if sink is not None:
                sink.write(part)
            if frame:
                parts.append(part)
        if sink is not None:
            sink.close()
    except BaseException:
        if sink is not None:
            sink.abandon()
        raise
    if not frame:
        return None
    return to_frame(concat(parts, names) if parts else empty_columns(names))
