"""Per-component statistics and size filtering, computed inside the labeling pipeline.

Each chunk's summary task also computes, in one pass over its local labels (and intensity block),
a row of statistics per local label (:meth:`Backend.label_stats`): voxel count, inclusive box,
coordinate sums, and optionally intensity sum, min and max, all in global coordinates. Labels
that touch no open face are whole components: their rows are final in their chunk. Rows of border
labels are partial; the merge tree (:mod:`tilelabel.pipeline.tree`) combines them by root key
(:data:`REDUCE`: sum / min / max) on its way up and hands each chunk the totals of its own border
labels on its way down, as it does the final labels.

Size filtering drops whole components: :func:`dropped` lists, per chunk, the local ids of the
component roots (interior labels, and border labels that are their component's root) whose total
count lies outside ``[min_size, max_size]``. The numbering treats them like labels merged into an
earlier root (they get no number) and maps them to 0, so the survivors are renumbered 1..M in
raster order of their first voxels, which is ``scipy.ndimage.label`` of the filtered volume.

The table has one row per final label. Each chunk builds the rows of the components whose root
lies in it (:func:`chunk_table`); the client concatenates them one chunk slab at a time (every
label rooted in slab ``i`` of the first grid axis precedes every label rooted in slab ``i + 1``),
so writing Parquet holds one slab's rows at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tilelabel.pipeline.local import Counts
from tilelabel.pipeline.numbering import LutSpec, build_lut, merged_ids

#: how each field combines across chunks; every field is an (n, k) array
REDUCE = {
    "count": np.add,
    "lo": np.minimum,
    "hi": np.maximum,
    "csum": np.add,
    "isum": np.add,
    "imin": np.minimum,
    "imax": np.maximum,
}

#: Parquet row-group size (rows) when writing the table
ROW_GROUP = 1 << 20


@dataclass(frozen=True)
class StatsOptions:
    """What the pipeline computes beyond labels: a table, a size filter, or both."""

    table: bool = False
    min_size: int | None = None
    max_size: int | None = None
    intensity: bool = False

    @property
    def filtering(self) -> bool:
        return self.min_size is not None or self.max_size is not None

    @property
    def active(self) -> bool:
        return self.table or self.filtering

    def keep(self, count: np.ndarray) -> np.ndarray:
        ok = np.ones(count.shape, bool)
        if self.min_size is not None:
            ok &= count >= self.min_size
        if self.max_size is not None:
            ok &= count <= self.max_size
        return ok


def options(
    table: bool = False,
    min_size: int | None = None,
    max_size: int | None = None,
    intensity: bool = False,
) -> StatsOptions | None:
    """The options, or None when nothing beyond labels is asked (the default path); sizes
    already checked one by one (:class:`tilelabel.options.Options`), here together."""
    if min_size is not None and max_size is not None and min_size > max_size:
        raise ValueError(f"min_size {min_size} is larger than max_size {max_size}")
    if intensity and not table:
        raise ValueError("an intensity image is only used for statistics; ask for them too")
    if table:
        require_table_libs()
    opts = StatsOptions(
        bool(table),
        None if min_size is None else int(min_size),
        None if max_size is None else int(max_size),
        bool(intensity),
    )
    return opts if opts.active else None


def require_table_libs() -> None:
    """The table needs pandas and pyarrow (the ``stats`` extra); say so before any work."""
    import importlib.util

    missing = [m for m in ("pandas", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(
            f"statistics tables need {' and '.join(missing)}: pip install 'tilelabel[stats]'"
        )


# -- border merge ----------------------------------------------------------------------------


def border_rows(stats: dict[str, np.ndarray], counts: Counts) -> dict[str, np.ndarray]:
    """The (partial) rows of a chunk's border labels, in the order of ``counts.ids``."""
    return {f: v[counts.ids - 1] for f, v in stats.items()}


# -- filtering ---------------------------------------------------------------------------------


def dropped(
    stats: dict[str, np.ndarray],
    counts: Counts,
    roots: np.ndarray,
    merged: dict[str, np.ndarray],
    *,
    opts: StatsOptions,
) -> np.ndarray:
    """Sorted local ids of the component roots in this chunk that the size filter drops.

    Interior labels are whole components (their count is local); a border label counts only if it
    is its component's root, with the merged total. Non-root border labels are never listed:
    they follow their root through the numbering's border finals.
    """
    total = stats["count"][:, 0].copy()
    candidate = np.ones(counts.n, bool)
    if counts.ids.size:
        total[counts.ids - 1] = merged["count"][:, 0]
        candidate[merged_ids(counts, roots) - 1] = False
    return (np.flatnonzero(candidate & ~opts.keep(total)) + 1).astype(np.int64)


# -- the table ---------------------------------------------------------------------------------


def columns(ndim: int, intensity: bool) -> list[str]:
    """Column names, in scikit-image's ``regionprops_table`` style (plus ``intensity_sum``)."""
    names = ["label", "area"]
    names += [f"bbox-{i}" for i in range(2 * ndim)]
    names += [f"centroid-{i}" for i in range(ndim)]
    if intensity:
        names += ["intensity_sum", "intensity_mean", "intensity_min", "intensity_max"]
    return names


def to_columns(labels: np.ndarray, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Statistics fields of some components (with their final labels) as named table columns."""
    count = rows["count"][:, 0]
    ndim = rows["lo"].shape[1]
    out = {"label": labels.astype(np.int64), "area": count.astype(np.int64)}
    for i in range(ndim):
        out[f"bbox-{i}"] = rows["lo"][:, i]
    for i in range(ndim):
        out[f"bbox-{ndim + i}"] = rows["hi"][:, i] + 1  # exclusive, like scikit-image
    with np.errstate(invalid="ignore", divide="ignore"):
        for i in range(ndim):
            out[f"centroid-{i}"] = rows["csum"][:, i] / count
        if "isum" in rows:
            out["intensity_sum"] = rows["isum"][:, 0]
            out["intensity_mean"] = rows["isum"][:, 0] / count
            out["intensity_min"] = rows["imin"][:, 0]
            out["intensity_max"] = rows["imax"][:, 0]
    return out


def chunk_table(
    stats: dict[str, np.ndarray],
    counts: Counts,
    roots: np.ndarray,
    merged: dict[str, np.ndarray],
    spec: LutSpec,
) -> dict[str, np.ndarray]:
    """Rows of the components rooted in this chunk that keep a label, sorted by final label."""
    lut = build_lut(spec, np.dtype(np.int64))[1:]
    is_row = lut != 0
    if counts.ids.size:
        is_row[merged_ids(counts, roots) - 1] = False
    sel = np.flatnonzero(is_row)
    rows = {f: v[sel] for f, v in stats.items()}
    if counts.ids.size:
        # border roots among the selected rows take their component's merged totals
        is_root = roots == counts.keys
        root_ids = counts.ids[is_root]
        keep = is_row[root_ids - 1]
        at = np.searchsorted(sel, root_ids[keep] - 1)
        for f in rows:
            rows[f][at] = merged[f][is_root][keep]
    labels = lut[sel]
    order = np.argsort(labels, kind="stable")
    return to_columns(labels[order], {f: v[order] for f, v in rows.items()})


def concat(pieces: Iterable[dict[str, np.ndarray]], names: list[str]) -> dict[str, np.ndarray]:
    """Chunk tables into one, sorted by label."""
    pieces = [p for p in pieces if p["label"].size]
    if not pieces:
        return empty_columns(names)
    out = {c: np.concatenate([p[c] for p in pieces]) for c in names}
    order = np.argsort(out["label"], kind="stable")
    return {c: v[order] for c, v in out.items()}


def empty_columns(names: list[str]) -> dict[str, np.ndarray]:
    return {
        c: np.empty(0, np.float64 if c.startswith(("centroid", "intensity")) else np.int64)
        for c in names
    }


def to_frame(cols: dict[str, np.ndarray]):
    import pandas as pd

    return pd.DataFrame(cols, copy=False)


class ParquetSink:
    """Writes the table to Parquet piece by piece (row groups of at most :data:`ROW_GROUP`), to
    a local path or any fsspec URL."""

    def __init__(self, path: str, names: list[str], metadata: dict[str, str] | None = None):
        import pyarrow as pa

        self.path = path
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

        if self._writer is None:
            self._open()
        n = len(cols["label"])
        for a in range(0, n, ROW_GROUP):
            batch = pa.table(
                {c: pa.array(v[a : a + ROW_GROUP]) for c, v in cols.items()}, schema=self.schema
            )
            self._writer.write_table(batch)
        self.rows += n

    def _open(self) -> None:
        import fsspec
        import pyarrow.parquet as pq

        self._file = fsspec.open(self.path, "wb").open()
        self._writer = pq.ParquetWriter(self._file, self.schema)

    def close(self) -> None:
        if self._writer is None:  # no rows at all: still a valid, empty table with the columns
            self._open()
        self._writer.close()
        self._file.close()


def collect(gather, futures, idxs, names, path=None, frame=False, metadata=None):
    """Gather the chunk tables one slab (first grid axis) at a time, in label order
    (``gather``: the run's executor's, which fetches and lets go of a slab's futures).

    Writes them to Parquet at ``path`` (if given) and returns the whole table as a DataFrame (if
    ``frame``). Every label rooted in an earlier slab is smaller than every label rooted in a
    later one, so concatenating sorted slabs gives the sorted table while the client holds one
    slab's rows (plus the frame, when one is asked for).
    """
    slabs: dict[int, list] = {}
    for idx, fut in zip(idxs, futures, strict=True):
        slabs.setdefault(idx[0], []).append(fut)
    sink = ParquetSink(path, names, metadata) if path else None
    parts = []
    try:
        for z in sorted(slabs):
            part = concat(gather(slabs[z]), names)
            if sink is not None:
                sink.write(part)
            if frame:
                parts.append(part)
    finally:
        if sink is not None:
            sink.close()
    if not frame:
        return None
    return to_frame(concat(parts, names) if parts else empty_columns(names))


# -- whole arrays in memory --------------------------------------------------------------------


def filter_lut(count: np.ndarray, opts: StatsOptions) -> np.ndarray:
    """Old label -> new label (0 for dropped) for labels 0..n with voxel counts ``count``."""
    keep = opts.keep(count)
    lut = np.zeros(count.size + 1, np.int64)
    lut[1:][keep] = np.arange(1, int(keep.sum()) + 1)
    return lut


def table_of(stats: dict[str, np.ndarray], opts: StatsOptions) -> dict[str, np.ndarray]:
    """The table of a whole labeled array from its ``label_stats`` (filtered, renumbered)."""
    keep = opts.keep(stats["count"][:, 0])
    sel = np.flatnonzero(keep)
    return to_columns(np.arange(1, sel.size + 1), {f: v[sel] for f, v in stats.items()})
