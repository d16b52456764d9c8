"""Step 5, number: label = 1 + the number of component roots before the component's first voxel.

Roots are counted per *row segment* (one row of one chunk). An exclusive prefix sum of those counts
in raster order, done as nested cumulative sums over a chunked array, gives each row segment its
offset; within a segment, a root's rank is local to its chunk. No task ever holds all keys or a
lookup table of every label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from dask.sizeof import sizeof

from tilelabel.chunking import Chunk
from tilelabel.dtypes import count_dtype
from tilelabel.pipeline.local import Counts, key_rows, sizeof_fields


@dataclass
class LutSpec:
    """Everything a chunk needs to build its local-to-global lookup table (O(rows + border))."""

    n: int
    #: number of local labels whose first voxel lies in each row, flat (``Counts.row_counts``)
    row_counts: np.ndarray
    #: global offset (number of roots before the row segment) of each row, coded as the step
    #: from the row before it in the same plane (0 for a plane's first row), one plane per
    #: row of this array: a step is at most a global row's roots, so uint16 wherever rows are
    #: up to 131070 voxels long, where the offsets themselves need uint32 or more
    row_step: np.ndarray
    #: local ids of border labels that are not their component's root, sorted
    demoted: np.ndarray
    #: local ids of all border labels and their final global labels
    border_ids: np.ndarray
    border_finals: np.ndarray
    #: local ids of component roots dropped by a size filter (mapped to 0), sorted
    dropped: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    #: the global offset of each plane's first row
    plane_base: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    #: raster-order label -> final label, where the kept components are numbered otherwise
    #: (by size: :func:`tilelabel.pipeline.stats.size_order`; at most largest_k + 1 entries)
    reorder: np.ndarray | None = None

    @classmethod
    def of(
        cls,
        n: int,
        row_counts: np.ndarray,
        row_offset: np.ndarray,
        demoted: np.ndarray,
        border_ids: np.ndarray,
        border_finals: np.ndarray,
        dropped: np.ndarray | None = None,
    ) -> LutSpec:
        """A spec from plain row offsets (shaped like the chunk's rows, or flat: one plane)."""
        planes = row_offset.reshape(-1, row_offset.shape[-1] if row_offset.ndim else 1)
        planes = planes.astype(np.int64, copy=False)
        steps = np.diff(planes, axis=1, prepend=planes[:, :1])
        return cls(
            n=n,
            row_counts=row_counts.reshape(-1),
            row_step=steps.astype(count_dtype(int(steps.max()) if steps.size else 0)),
            demoted=demoted,
            border_ids=border_ids,
            border_finals=border_finals,
            dropped=np.empty(0, np.int64) if dropped is None else dropped,
            plane_base=planes[:, 0].copy(),
        )

    def row_offsets(self) -> np.ndarray:
        """The rows' global offsets, flat, int64."""
        offsets = np.cumsum(self.row_step, axis=1, dtype=np.int64)
        offsets += self.plane_base[:, None]
        return offsets.reshape(-1)


sizeof.register(LutSpec)(sizeof_fields)  # its row counts and offsets: O(rows) bytes


def merged_ids(counts: Counts, roots: np.ndarray) -> np.ndarray:
    """Local ids of the border labels whose component's root (first voxel) is elsewhere."""
    return counts.ids[roots != counts.keys]


def _demoted(counts: Counts, roots: np.ndarray, dropped: np.ndarray | None = None) -> np.ndarray:
    """Local ids that get no number of their own: border labels merged into an earlier root,
    and (with a size filter) the dropped roots."""
    merged = merged_ids(counts, roots)
    if dropped is None or dropped.size == 0:
        return merged
    return np.concatenate([merged, dropped])


def corrected_counts(
    counts: Counts,
    roots: np.ndarray,
    dropped: np.ndarray | None = None,
    *,
    chunk: Chunk,
) -> np.ndarray:
    """Roots per row of the chunk: local first voxels minus those merged into an earlier root
    (and minus the roots a size filter drops, local ids ``dropped``).

    Shaped ``chunk.shape[:-1] + (1,)``: one count per row segment, ready to stitch into the
    chunked array of all row segments.
    """
    rc = counts.row_counts.copy().reshape(-1)
    demoted_keys = counts.keys[roots != counts.keys]
    if demoted_keys.size:
        np.subtract.at(rc, key_rows(demoted_keys, chunk), 1)
    if dropped is not None and dropped.size:
        # label l's first voxel lies in the row whose inclusive cumulative count reaches l
        np.subtract.at(rc, np.searchsorted(np.cumsum(counts.row_counts), dropped), 1)
    return rc.reshape(chunk.shape[:-1] + (1,))


def concat_offsets(parts: Sequence[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """One level of the raster-order prefix sum, for one group of chunks along one axis.

    ``parts`` are the members' counts, in grid order along the axis; they share all leading
    axes and are laid end to end along their last axis. Returns each member's exclusive prefix
    along that axis and the group's totals (the last axis summed away), which are the parts of
    the next level up.
    """
    # a running total over the members, not a cumulative sum along the concatenated last
    # axis: level 1's members are one count per row, and numpy's cumsum along a short axis is
    # many times slower than a loop over the members. int64 whatever the parts: level 1's are
    # row counts as narrow as dtypes.row_count_dtype
    run = np.zeros(parts[0].shape[:-1], np.int64)
    prefixes = []
    for part in parts:
        if part.shape[-1] == 1:
            prefixes.append(run[..., None].copy())
            run += part[..., 0]
        else:
            prefixes.append(np.cumsum(part, axis=-1, dtype=np.int64) - part + run[..., None])
            run += part.sum(axis=-1)
    # No prefix exceeds the group's totals: narrowed to them, level 1's (a global row's first
    # voxels, at most half its length: uint16 up to 131070 voxels) and level 2's (a plane's:
    # uint32) are a quarter and a half of int64's bytes, since they wait on their workers until
    # the chunks' lookup specs are made
    narrow = count_dtype(int(run.max()) if run.size else 0)
    return [p.astype(narrow) for p in prefixes], run


def assemble_offsets(levels: Sequence[np.ndarray]) -> np.ndarray:
    """A chunk's row-segment offsets: the sum of its prefixes at every level, broadcast.

    ``levels[0]`` has the chunk's row shape plus a unit axis; ``levels[L]`` (L >= 1) covers the
    leading ``ndim - L`` axes and is broadcast over the rest.
    """
    out = levels[0][..., 0].astype(np.int64)  # the levels are narrower (concat_offsets)
    for lev, arr in enumerate(levels[1:], start=1):
        out += arr[(Ellipsis,) + (None,) * (lev - 1)]
    return out


def border_finals(
    counts: Counts,
    roots: np.ndarray,
    row_offset: np.ndarray,
    dropped: np.ndarray | None = None,
    *,
    chunk: Chunk,
) -> tuple[np.ndarray, np.ndarray]:
    """Final labels of the border components whose root (first voxel) lies in this chunk
    (0 for the roots in ``dropped``)."""
    row_start = _row_start(counts.row_counts)
    demoted = np.sort(_demoted(counts, roots, dropped))
    is_root = roots == counts.keys
    ids, keys = counts.ids[is_root], counts.keys[is_root]
    rows = key_rows(keys, chunk)
    start = row_start[rows]
    before = np.searchsorted(demoted, ids) - np.searchsorted(demoted, start + 1)
    rank = (ids - 1 - start) - before
    finals = 1 + row_offset.reshape(-1)[rows] + rank
    if dropped is not None and dropped.size:
        finals[np.isin(ids, dropped)] = 0
    return keys, finals


def _row_start(row_counts: Any, xp: Any = np) -> Any:
    """First local id - 1 of each row: the exclusive cumulative sum of the row counts (an
    array of the array module ``xp``)."""
    rc = xp.asarray(row_counts).reshape(-1)
    start = xp.zeros(rc.size, xp.int64)
    # into place, not a concatenation: this runs twice per chunk on the merge's critical path
    xp.cumsum(rc[:-1], out=start[1:])
    return start


def lut_spec(
    counts: Counts,
    roots: np.ndarray,
    row_offset: np.ndarray,
    finals: np.ndarray,
    dropped: np.ndarray | None = None,
) -> LutSpec:
    return LutSpec.of(
        counts.n,
        counts.row_counts,
        row_offset,
        np.sort(_demoted(counts, roots, dropped)),
        counts.ids,
        finals,
        dropped,
    )


def build_lut(spec: LutSpec, dtype: np.dtype, xp: Any = np) -> Any:
    """Local label -> final label, for local labels 0..n (0 stays background), an array of
    the array module ``xp`` (NumPy, or a device's: built where it is used, it crosses no bus)."""
    n = spec.n
    lut = xp.zeros(n + 1, dtype=dtype)
    if n == 0:
        return lut
    counts = xp.asarray(spec.row_counts).astype(xp.int64)  # CuPy sums into its own dtype
    row_start = _row_start(counts, xp)
    demoted = xp.asarray(spec.demoted)
    # Local id i of row r is numbered base[r] + roots[i - 1], roots[k] being the roots among
    # local ids 1..k (k less the demoted ids up to k), base[r] = 1 + the row's offset - roots
    # before the row. So lut[1:] is one running sum of steps: 1 per label but where the label
    # before it is demoted, plus the change of base at each row's first label
    base = xp.asarray(spec.row_offsets()) + 1 - row_start
    base += xp.searchsorted(demoted, row_start, side="right")
    rows = xp.flatnonzero(counts)
    steps = xp.ones(n, xp.int64)
    steps[0] = 0
    steps[demoted[demoted < n]] -= 1
    steps[row_start[rows]] += xp.diff(base[rows], prepend=0)
    lut[1:] = xp.cumsum(steps)
    lut[xp.asarray(spec.border_ids)] = xp.asarray(spec.border_finals)
    lut[xp.asarray(spec.dropped)] = 0
    if spec.reorder is not None:
        lut = xp.asarray(spec.reorder).astype(dtype)[lut]
    return lut


def reordered(spec: LutSpec, reorder: np.ndarray) -> LutSpec:
    """``spec`` with its raster-order labels renumbered through ``reorder``."""
    spec.reorder = reorder
    return spec
