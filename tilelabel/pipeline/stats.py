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

Keeping the ``largest_k`` components (cc3d's ``largest_k``, ITK's ``RelabelComponent``): each
chunk names its k largest roots (:func:`candidates`, by size, then raster order of their first
voxels: the earlier of two of one size is the larger), a tree of tasks keeps the k largest of
those (:func:`top_k`), and every root ranked after the k-th is dropped. With ``order="size"`` the
k kept are numbered by that rank instead of raster order (:func:`size_order`, a lookup table of
k + 1 entries applied after the raster numbering).

The table has one row per final label. Each chunk builds the rows of the components whose root
lies in it (:func:`chunk_table`); every label rooted in slab ``i`` of the first grid axis
precedes every label rooted in slab ``i + 1``, so a run collects them one slab at a time, or a
range of labels of a slab at a time (:func:`rows_between`; :mod:`tilelabel.workflow.tables`).
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
    "m2": np.add,
    "isq": np.add,
    # with largest_k: each label's key (first voxel), a component's the smallest
    "key": np.minimum,
    # multi-label input: each label's source value, one per component
    "value": np.minimum,
}

#: how the kept components are numbered: raster order of first voxels, or by size (largest 1)
ORDERS = ("raster", "size")


@dataclass(frozen=True)
class StatsOptions:
    """What the pipeline computes beyond labels: a table, a size filter, or both."""

    table: bool = False
    min_size: int | None = None
    max_size: int | None = None
    intensity: bool = False
    #: physical size of a voxel along each axis (the table's physical columns; None: 1 each)
    spacing: tuple[float, ...] | None = None
    #: keep only the k largest components (after the size range)
    largest_k: int | None = None
    #: numbering of the kept components (:data:`ORDERS`)
    order: str = "raster"

    @property
    def keys(self) -> bool:
        """Whether every label's key rides along with its statistics (to rank equal sizes)."""
        return self.largest_k is not None

    @property
    def moments(self) -> bool:
        """Whether the chunks' statistics include second moments: every table has them."""
        return self.table

    @property
    def filtering(self) -> bool:
        return self.min_size is not None or self.max_size is not None or self.keys

    @property
    def active(self) -> bool:
        return self.table or self.filtering or self.order != "raster"

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
    spacing: tuple[float, ...] | None = None,
    ndim: int | None = None,
    largest_k: int | None = None,
    order: str = "raster",
    chunked: bool = False,
) -> StatsOptions | None:
    """The options, or None when nothing beyond labels is asked (the default path); sizes
    already checked one by one (:class:`tilelabel.options.Options`), here together, and the
    ``spacing`` against the volume's ``ndim`` where it is known. ``chunked``: for a run over
    chunks, where ``order="size"`` needs ``largest_k``."""
    if min_size is not None and max_size is not None and min_size > max_size:
        raise ValueError(f"min_size {min_size} is larger than max_size {max_size}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if chunked and order == "size" and largest_k is None:
        raise ValueError(
            "order 'size' over chunks needs largest_k: the kept components are ranked by size "
            "on one task, which is bounded only by k (pass largest_k, as large as you need)"
        )
    if intensity and not table:
        raise ValueError("an intensity image is only used for statistics; ask for them too")
    spacing = checked_spacing(spacing, ndim)
    if table:
        require_table_libs()
    opts = StatsOptions(
        bool(table),
        None if min_size is None else int(min_size),
        None if max_size is None else int(max_size),
        bool(intensity),
        spacing,
        None if largest_k is None else int(largest_k),
        order,
    )
    return opts if opts.active else None


def checked_spacing(spacing, ndim: int | None) -> tuple[float, ...] | None:
    """``spacing`` as floats, refused where it has not one value per axis (``ndim``, if known)."""
    if spacing is None:
        return None
    spacing = tuple(float(s) for s in spacing)
    if ndim is not None and len(spacing) != ndim:
        raise ValueError(f"spacing {spacing} has {len(spacing)} values for {ndim} axes")
    return spacing


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


def _roots(stats, counts: Counts, roots: np.ndarray, merged) -> tuple[np.ndarray, np.ndarray]:
    """Each local label's component size (merged totals for border labels) and whether it is
    its component's root: interior labels are whole components (their count is local); a border
    label counts only if it is its component's root, with the merged total."""
    total = stats["count"][:, 0].copy()
    is_root = np.ones(counts.n, bool)
    if counts.ids.size:
        total[counts.ids - 1] = merged["count"][:, 0]
        is_root[merged_ids(counts, roots) - 1] = False
    return total, is_root


@dataclass(frozen=True)
class Top:
    """The largest components, largest first (equal sizes: the earlier first voxel first)."""

    count: np.ndarray
    key: np.ndarray

    def ranked(self, k: int) -> Top:
        order = np.lexsort((self.key, -self.count))[:k]
        return Top(self.count[order], self.key[order])


def candidates(
    stats: dict[str, np.ndarray],
    counts: Counts,
    roots: np.ndarray,
    merged: dict[str, np.ndarray],
    *,
    opts: StatsOptions,
) -> Top:
    """The ``largest_k`` largest component roots of this chunk within the size range."""
    total, is_root = _roots(stats, counts, roots, merged)
    sel = np.flatnonzero(is_root & opts.keep(total))
    return Top(total[sel], stats["key"][sel, 0]).ranked(opts.largest_k)


def top_k(parts: list[Top], *, k: int) -> Top:
    """The ``k`` largest of some chunks' (or groups') candidates."""
    return Top(
        np.concatenate([p.count for p in parts]), np.concatenate([p.key for p in parts])
    ).ranked(k)


def size_order(top: Top) -> np.ndarray:
    """Raster-order label -> size-order label of the kept components (0 stays 0): the raster
    order of kept components is their keys' order."""
    perm = np.zeros(top.key.size + 1, np.int64)
    perm[1:] = np.argsort(top.key) + 1  # the r-th by key is the argsort[r]-th by size
    return perm


def dropped(
    stats: dict[str, np.ndarray],
    counts: Counts,
    roots: np.ndarray,
    merged: dict[str, np.ndarray],
    top: Top | None = None,
    *,
    opts: StatsOptions,
) -> np.ndarray:
    """Sorted local ids of the component roots in this chunk that the size filter drops: out
    of the size range, or (``top``: the ``largest_k`` kept) ranked after the k-th.

    Non-root border labels are never listed: they follow their root through the numbering's
    border finals.
    """
    total, is_root = _roots(stats, counts, roots, merged)
    keep = opts.keep(total)
    if top is not None and opts.largest_k == 0:
        keep[:] = False
    elif top is not None and top.count.size == opts.largest_k:
        # fewer than k in all: every one within the range is kept
        last_count, last_key = top.count[-1], top.key[-1]
        key = stats["key"][:, 0]
        keep &= (total > last_count) | ((total == last_count) & (key <= last_key))
    return (np.flatnonzero(is_root & ~keep) + 1).astype(np.int64)


# -- the table ---------------------------------------------------------------------------------


def columns(
    ndim: int,
    intensity: bool,
    spacing: tuple[float, ...] | None = None,
    multilabel: bool = False,
) -> list[str]:
    """Column names, scikit-image's ``regionprops_table`` ones (plus ``intensity_sum``, with a
    ``spacing`` the box in physical units ``bbox_scaled``, and for multi-label input each
    component's source ``value``)."""
    names = ["label", *(["value"] if multilabel else []), "area", "num_pixels"]
    names += [f"bbox-{i}" for i in range(2 * ndim)]
    if spacing is not None:
        names += [f"bbox_scaled-{i}" for i in range(2 * ndim)]
    names += [f"centroid-{i}" for i in range(ndim)]
    names += [f"inertia_tensor-{i}-{j}" for i in range(ndim) for j in range(ndim)]
    names += [f"inertia_tensor_eigvals-{i}" for i in range(ndim)]
    names += ["axis_major_length", "axis_minor_length"]
    if intensity:
        names += ["intensity_sum", "intensity_mean", "intensity_min", "intensity_max"]
        names += ["intensity_std"]
    return names


def to_columns(
    labels: np.ndarray, rows: dict[str, np.ndarray], spacing: tuple[float, ...] | None = None
) -> dict[str, np.ndarray]:
    """Statistics fields of some components (with their final labels) as named table columns,
    physical ones scaled by ``spacing`` as scikit-image's ``regionprops(spacing=...)`` does:
    ``area``, ``centroid``, the inertia tensor, its eigenvalues and the axis lengths."""
    count = rows["count"][:, 0]
    ndim = rows["lo"].shape[1]
    scale = np.ones(ndim) if spacing is None else np.asarray(spacing, np.float64)
    out = {
        "label": labels.astype(np.int64),
        **({"value": rows["value"][:, 0]} if "value" in rows else {}),
        "area": count * float(np.prod(scale)),
        "num_pixels": count.astype(np.int64),
    }
    for i in range(ndim):
        out[f"bbox-{i}"] = rows["lo"][:, i]
    for i in range(ndim):
        out[f"bbox-{ndim + i}"] = rows["hi"][:, i] + 1  # exclusive, like scikit-image
    if spacing is not None:
        for i in range(2 * ndim):
            out[f"bbox_scaled-{i}"] = out[f"bbox-{i}"] * scale[i % ndim]
    with np.errstate(invalid="ignore", divide="ignore"):
        for i in range(ndim):
            out[f"centroid-{i}"] = rows["csum"][:, i] / count * scale[i]
        out.update(_inertia(rows, count, scale))
        if "isum" in rows:
            mean = rows["isum"][:, 0] / count
            out["intensity_sum"] = rows["isum"][:, 0]
            out["intensity_mean"] = mean
            out["intensity_min"] = rows["imin"][:, 0]
            out["intensity_max"] = rows["imax"][:, 0]
            # population variance from the sums; rounding may leave a tiny negative
            var = rows["isq"][:, 0] / count - mean * mean
            out["intensity_std"] = np.sqrt(np.maximum(var, 0.0))
    return out


def _inertia(rows: dict[str, np.ndarray], count: np.ndarray, scale: np.ndarray) -> dict:
    """The inertia tensor (scikit-image's: trace(C) I - C for the covariance C of the voxel
    coordinates, in physical units), its eigenvalues (descending, clipped at 0) and the axis
    lengths scikit-image derives from them (2D and 3D)."""
    from tilelabel.kernels.cpu.stats import inertia_tensors

    n, ndim = rows["csum"].shape
    cols = inertia_tensors(rows["csum"], rows["m2"], count, scale)
    out = {f"inertia_tensor-{i}-{j}": cols[i * ndim + j] for i in range(ndim) for j in range(ndim)}
    ev = np.zeros((ndim, n))  # a column per eigenvalue, descending
    # a tensor of zeros (one voxel: most rows of a noisy volume) has eigenvalues 0
    wide = np.flatnonzero((cols != 0).any(axis=0))
    if wide.size:
        tensor = np.ascontiguousarray(cols[:, wide].T).reshape(-1, ndim, ndim)
        ev[:, wide] = np.clip(np.linalg.eigvalsh(tensor), 0, None)[:, ::-1].T
    for i in range(ndim):
        out[f"inertia_tensor_eigvals-{i}"] = ev[i]
    if ndim == 2:
        major, minor = 4 * np.sqrt(ev[0]), 4 * np.sqrt(ev[-1])
    elif ndim == 3:
        major = np.sqrt(np.maximum(0, 10 * (ev[0] + ev[1] - ev[2])))
        minor = np.sqrt(np.maximum(0, 10 * (-ev[0] + ev[1] + ev[2])))
    else:
        major = minor = np.full(n, np.nan)
    out["axis_major_length"], out["axis_minor_length"] = major, minor
    return out


def chunk_table(
    stats: dict[str, np.ndarray],
    counts: Counts,
    roots: np.ndarray,
    merged: dict[str, np.ndarray],
    spec: LutSpec,
    *,
    spacing: tuple[float, ...] | None = None,
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
    return to_columns(labels[order], {f: v[order] for f, v in rows.items()}, spacing)


def label_span(table: dict[str, np.ndarray]) -> tuple[int, int, int]:
    """A chunk table's first and last label and its number of rows ((0, -1, 0): none)."""
    labels = table["label"]
    if not labels.size:
        return 0, -1, 0
    return int(labels[0]), int(labels[-1]), int(labels.size)


def rows_between(table: dict[str, np.ndarray], *, first: int, last: int) -> dict[str, np.ndarray]:
    """A chunk table's rows of labels ``first..last`` (its rows are sorted by label)."""
    a, b = np.searchsorted(table["label"], [first, last + 1])
    return {c: v[a:b] for c, v in table.items()}


def concat(pieces: Iterable[dict[str, np.ndarray]], names: list[str]) -> dict[str, np.ndarray]:
    """Chunk tables into one, sorted by label. The pieces give up their columns as the table
    takes them, one column at a time, so that the rows are held about once, not three times."""
    pieces = [p for p in pieces if p["label"].size]
    if not pieces:
        return empty_columns(names)
    order = np.argsort(np.concatenate([p["label"] for p in pieces]), kind="stable")
    out = {}
    for c in names:
        out[c] = np.concatenate([p.pop(c) for p in pieces])[order]
    return out


def empty_columns(names: list[str]) -> dict[str, np.ndarray]:
    ints = ("label", "value", "num_pixels", "bbox-")
    return {c: np.empty(0, np.int64 if c.startswith(ints) else np.float64) for c in names}


def to_frame(cols: dict[str, np.ndarray]):
    import pandas as pd

    return pd.DataFrame(cols, copy=False)


# -- whole arrays in memory --------------------------------------------------------------------


def filter_lut(count: np.ndarray, opts: StatsOptions) -> np.ndarray:
    """Old label -> new label (0 for dropped) for labels 1..n (numbered in raster order) with
    voxel counts ``count``: the size range, the ``largest_k`` and the ``order``."""
    keep = opts.keep(count)
    sel = np.flatnonzero(keep)
    if opts.largest_k is not None or opts.order == "size":
        # by size, the earlier label first among equal sizes
        ranked = sel[np.lexsort((sel, -count[sel]))][: opts.largest_k]
        sel = ranked if opts.order == "size" else np.sort(ranked)
    lut = np.zeros(count.size + 1, np.int64)
    lut[sel + 1] = np.arange(1, sel.size + 1)
    return lut


def table_of(stats: dict[str, np.ndarray], opts: StatsOptions) -> dict[str, np.ndarray]:
    """The table of a whole labeled array from its ``label_stats`` (filtered, renumbered)."""
    lut = filter_lut(stats["count"][:, 0], opts)[1:]
    sel = np.flatnonzero(lut)
    sel = sel[np.argsort(lut[sel])]
    rows = {f: v[sel] for f, v in stats.items()}
    return to_columns(lut[sel], rows, opts.spacing)
