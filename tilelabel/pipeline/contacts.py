"""The region graph of a run: every pair of touching output labels, with the number of voxel
pairs in contact and their face area, computed in the labeling pass and merged up the tree.

Two labels touch where a voxel of one and a voxel of the other are neighbours under the graph's
connectivity (cc3d's ``contacts``); every such voxel pair counts once, in its class (a face along
each axis, or an edge or corner, which has no area).

1. In the summary task (:func:`tilelabel.pipeline.local.summarize`), a chunk's contacts among
   its own labels (:meth:`Backend.contacts`), by local id.
2. :func:`leaf`: once the chunk's lookup table is known, those in final labels, and the voxel
   pairs across its forward borders from the border merge's contacts
   (:func:`tilelabel.pipeline.borders.contact`) and the neighbours' border finals.
3. :func:`up`: a node of the merge tree sums its children's rows per pair. A pair is complete
   once one of its labels is not exported by the node: that label lies inside it, and so does
   every voxel pair it is in. The other rows go up. Rows of voxel pairs across two chunks join
   the sums at the first node that holds both chunks (at the leaf for a chunk that wraps onto
   itself).
4. :func:`columns`: the complete pairs as the graph's columns (:func:`names`), in no order. At
   the tree's top every pair is complete; the client writes each task's rows as they come, so
   no process holds the whole graph.

A component dropped by a size filter has final label 0, and its pairs are dropped with it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from dask.sizeof import sizeof

from tilelabel.connectivity import structure
from tilelabel.pipeline.borders import contact, split
from tilelabel.pipeline.local import Borders, sizeof_fields
from tilelabel.pipeline.numbering import LutSpec, build_lut


@dataclass(frozen=True)
class ContactsOptions:
    """What the region graph of a run needs beyond the labels."""

    #: the graph's connectivity: which neighbours touch (at least the labeling's for binary
    #: input, where components touch only through the neighbours the labeling does not join)
    connectivity: int
    #: physical size of a voxel along each axis (the areas; None: 1 each)
    spacing: tuple[float, ...] | None = None
    #: the input's dtype where each label has one source value (multi-label input), else None
    value_dtype: str | None = None


@dataclass
class Pairs:
    """Rows of label pairs ``a < b`` (sorted where :func:`combined`) with their contacts."""

    #: (m, 2) int64: the two labels, the smaller first
    ab: np.ndarray
    #: (m, ndim + 1) int64: voxel pairs per class (faces along each axis, then the rest)
    classes: np.ndarray
    #: (m, 2) the labels' source values (multi-label input; unsigned, of their own width)
    values: np.ndarray | None = None
    #: (m, 2) int64 ordinals of the two chunks a row's voxel pairs lie across (None: inside)
    origin: np.ndarray | None = None

    def take(self, sel: np.ndarray) -> Pairs:
        def pick(x):
            return None if x is None else x[sel]

        return Pairs(self.ab[sel], self.classes[sel], pick(self.values), pick(self.origin))


sizeof.register(Pairs)(sizeof_fields)


def _empty(ndim: int, values: bool, origin: bool = False) -> Pairs:
    pair = np.zeros((0, 2), np.int64)
    return Pairs(pair, np.zeros((0, ndim + 1), np.int64), pair if values else None,
                 pair if origin else None)  # fmt: skip


def _concat(parts: Sequence[Pairs]) -> Pairs:
    """One set of rows (all with values or all without, origins alike)."""

    def cat(name):
        got = [getattr(p, name) for p in parts]
        return None if got[0] is None else np.concatenate(got)

    return Pairs(cat("ab"), cat("classes"), cat("values"), cat("origin"))


def oriented(a: np.ndarray, b: np.ndarray, classes: np.ndarray | None, values=None) -> Pairs:
    """Rows of label pairs in either order as ``a < b`` (values swapped alike); pairs of one
    label, or with a label 0 (background, a dropped component), dropped. ``classes`` None:
    rows to be counted (:func:`_summed`)."""
    keep = (a != b) & (a != 0) & (b != 0)
    a, b = a[keep], b[keep]
    classes = None if classes is None else classes[keep]
    swap = a > b
    ab = np.stack([np.where(swap, b, a), np.where(swap, a, b)], axis=1).astype(np.int64)
    if values is not None:
        va, vb = values[keep, 0], values[keep, 1]
        values = np.stack([np.where(swap, vb, va), np.where(swap, va, vb)], axis=1)
    return Pairs(ab, classes, values)


def combined(rows: Pairs) -> Pairs:
    """Rows of one pair (and origin) summed into one, sorted by pair."""
    keys = [rows.ab[:, 1], rows.ab[:, 0]]
    if rows.origin is not None:
        keys += [rows.origin[:, 1], rows.origin[:, 0]]
    order = np.lexsort(keys)
    rows = rows.take(order)
    if not rows.ab.shape[0]:
        return rows
    cols = [rows.ab] if rows.origin is None else [rows.ab, rows.origin]
    key = np.concatenate(cols, axis=1)
    start = np.ones(len(key), bool)
    start[1:] = np.any(key[1:] != key[:-1], axis=1)
    at = np.flatnonzero(start)
    out = rows.take(at)
    out.classes = np.add.reduceat(rows.classes, at, axis=0)
    return out


# -- 2. the leaf ---------------------------------------------------------------------------


def _finals(positions: np.ndarray, finals: np.ndarray) -> np.ndarray:
    """The final label at each voxel of a contact (positions in the border ids plus one)."""
    table = np.zeros(finals.size + 1, np.int64)
    table[1:] = finals
    return table[positions]


def _across(a, va, b, vb, step, struct, ndim) -> list[Pairs]:
    """The rows of the voxel pairs across one contact: ``a`` (this chunk's side, final labels,
    values ``va``) against ``b`` (the neighbour's) at every offset of ``struct`` that crosses
    at ``step``; ``b`` padded by background, what a shift past its edge reads."""
    free = [ax for ax, s in enumerate(step) if s == 0]
    if a.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
        va, vb = (None, None) if va is None else (va.reshape(1), vb.reshape(1))
    framed = np.pad(b, 1)
    vframed = None if vb is None else np.pad(vb, 1)
    out = []
    for shift in itertools.product((-1, 0, 1), repeat=len(free)):
        offset = list(step)
        for ax, s in zip(free, shift, strict=True):
            offset[ax] = s
        if not struct[tuple(o + 1 for o in offset)]:
            continue
        nonzero = [ax for ax, o in enumerate(offset) if o]
        cls = nonzero[0] if len(nonzero) == 1 else ndim
        sl = tuple(slice(1 + s, 1 + s + n) for s, n in zip(shift or (0,), a.shape, strict=True))
        bs = framed[sl]
        hit = (a != 0) & (bs != 0) & (a != bs)
        if not hit.any():
            continue
        values = None if va is None else np.stack([va[hit], vframed[sl][hit]], axis=1)
        out.append(_summed(oriented(a[hit], bs[hit], None, values), cls, ndim))
    return out


def _summed(rows: Pairs, cls: int, ndim: int) -> Pairs:
    """Rows of one voxel pair each, all of class ``cls`` (``classes`` None), as one row per
    pair with its count: a face holds many voxel pairs of each pair of labels."""
    ab = rows.ab
    if len(ab) and ab.max() < 1 << 31:  # both labels in one key: a single sort
        key = ab[:, 0] << 32 | ab[:, 1]
        _, first, count = np.unique(key, return_index=True, return_counts=True)
    else:
        _, first, count = np.unique(ab, axis=0, return_index=True, return_counts=True)
    classes = np.zeros((len(first), ndim + 1), np.int64)
    classes[:, cls] = count
    return Pairs(ab[first], classes, None if rows.values is None else rows.values[first])


def leaf(
    mine: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    spec: LutSpec,
    borders: Borders,
    theirs: Sequence[Any],
    their_finals: Sequence[np.ndarray],
    *,
    ordinal: int,
    ordinals: Sequence[int],
    steps: Sequence[tuple[int, ...]],
    connectivity: int,
    ndim: int,
) -> tuple[Pairs, Pairs]:
    """A chunk's rows: its own contacts (``mine``: local id pairs, counts per class, values)
    in final labels through its lookup table (in raster order: a size order is the columns'),
    and those across its forward borders, at ``steps``, whose neighbours' :func:`contact`
    towards it (``theirs``) and border finals (``their_finals``) are given. Returns the
    complete rows and those passed up (:func:`up`).

    A pair of two labels that touch no open face is complete, and no other local pair maps
    to it (each such label is a component of its own): those rows skip the sums."""
    lut = build_lut(dataclasses.replace(spec, reorder=None), np.dtype(np.int64))
    pairs, classes, mine_values = mine
    values = mine_values is not None
    border = np.zeros(spec.n + 1, bool)
    border[spec.border_ids] = True
    alone = ~(border[pairs[:, 0]] | border[pairs[:, 1]])
    rest = np.flatnonzero(~alone)
    alone = np.flatnonzero(alone)

    def rows(sel):
        v = None if mine_values is None else mine_values[sel]
        return oriented(lut[pairs[sel, 0]], lut[pairs[sel, 1]], classes[sel], v)

    # labels rooted here keep their order in the raster numbering: a < b stays, and only a
    # label dropped by a size filter (0) drops its rows
    ab = lut[pairs[alone]]
    kept = np.flatnonzero((ab[:, 0] != 0) & (ab[:, 1] != 0))
    if len(kept) < len(alone):
        ab, alone = ab[kept], alone[kept]
    done = Pairs(ab, classes[alone], None if mine_values is None else mine_values[alone])
    inside = [rows(rest)]
    pending = []
    struct = structure(ndim, connectivity)
    for step, side, finals, other in zip(steps, theirs, their_finals, ordinals, strict=True):
        a, va = split(contact(borders, step, high=True))
        b, vb = split(side)
        if borders.value_faces is not None:  # continuous values: labels only
            va = vb = None
        rows = _across(_finals(a, spec.border_finals), va, _finals(b, finals), vb, step,
                       struct, ndim)  # fmt: skip
        if other == ordinal:  # a chunk that wraps onto itself: inside already
            inside += rows
        else:
            for r in rows:
                r.origin = np.tile(np.array([[ordinal, other]], np.int64), (len(r.ab), 1))
            pending += rows
    part_in = combined(_concat(inside))
    part_out = combined(_concat(pending)) if pending else _empty(ndim, values, origin=True)
    complete, up_rows = _settle(part_in, part_out, spec.border_finals)
    return _concat([done, complete]), up_rows


# -- 3. up the tree ------------------------------------------------------------------------


def _within(ordinals: np.ndarray, lo, hi, grid) -> np.ndarray:
    """Which chunks (by ordinal; -1: a row inside already, within) lie in the box."""
    out = np.ones(ordinals.shape, bool)
    for c, a, b in zip(np.unravel_index(np.maximum(ordinals, 0), grid), lo, hi, strict=True):
        out &= (c >= a) & (c < b)
    return out | (ordinals < 0)


def _settle(inside: Pairs, pending: Pairs, exported: np.ndarray) -> tuple[Pairs, Pairs]:
    """The complete rows of ``inside`` (one label not among the ``exported`` finals), and the
    rest with ``pending`` for the parent, as one :class:`Pairs` whose inside rows have no
    origin (-1)."""
    exported = np.unique(exported)
    out = np.isin(inside.ab[:, 0], exported) & np.isin(inside.ab[:, 1], exported)
    done, rest = inside.take(~out), inside.take(out)
    rest.origin = np.full((len(rest.ab), 2), -1, np.int64)
    return done, _concat([rest, pending])


def up(
    parts: Sequence[Pairs],
    exported: Any,
    *,
    lo: tuple[int, ...],
    hi: tuple[int, ...],
    grid: tuple[int, ...],
) -> tuple[Pairs, Pairs]:
    """A node's rows: its children's (``parts``) summed per pair, where a row's chunks both
    lie in the node's box ``lo``..``hi``; the complete ones, and the rest for its parent.
    ``exported``: the final labels of the node's components its parent sees (the ``final``
    of a :class:`tilelabel.pipeline.tree.Rows`), None at the top."""
    rows = _concat(parts)
    inner = _within(rows.origin[:, 0], lo, hi, grid) & _within(rows.origin[:, 1], lo, hi, grid)
    inside = rows.take(inner)
    inside.origin = None
    pending = rows.take(~inner)
    finals = np.zeros(0, np.int64) if exported is None else exported.values["final"]
    return _settle(combined(inside), pending, finals)


# -- 4. the columns ------------------------------------------------------------------------


def names(multilabel: bool) -> list[str]:
    """The graph's columns: the two labels, with multi-label input their source values, the
    voxel pairs in contact (cc3d's ``contacts(surface_area=False)``) and the face area (its
    ``contacts`` with ``anisotropy``: faces weigh the product of the other axes' spacing)."""
    return ["label_a", "label_b", *(["value_a", "value_b"] if multilabel else []),
            "count", "area"]  # fmt: skip


def columns(
    done: Pairs,
    reorder: np.ndarray | None = None,
    *,
    spacing: tuple[float, ...] | None = None,
    value_dtype: str | None = None,
) -> dict[str, np.ndarray]:
    """Complete rows as the graph's columns; ``reorder``: raster-order label ->
    final label (a size order), ``value_dtype``: the input's (multi-label values)."""
    from tilelabel.kernels.cpu.contacts import totals

    if reorder is not None:
        ab = reorder[done.ab]
        done = combined(oriented(ab[:, 0], ab[:, 1], done.classes, done.values))
    count, area = totals(done.classes, spacing)
    out = {"label_a": done.ab[:, 0].copy(), "label_b": done.ab[:, 1].copy()}
    if value_dtype is not None:
        dtype = np.dtype(value_dtype)
        values = done.values.astype(f"u{dtype.itemsize}", copy=False).view(dtype)
        out["value_a"], out["value_b"] = values[:, 0].copy(), values[:, 1].copy()
    out["count"], out["area"] = count, area
    return out


def empty_columns(cols: list[str]) -> dict[str, np.ndarray]:
    """The graph's columns, empty, of their dtypes (``value_*``: the source's, once known)."""
    return {c: np.zeros(0, np.float64 if c == "area" else np.int64) for c in cols}


def concat(pieces: Sequence[dict[str, np.ndarray]], cols: list[str]) -> dict[str, np.ndarray]:
    """Pieces of :func:`columns` as one, in their order."""
    pieces = [p for p in pieces if p["label_a"].size]
    if not pieces:
        return empty_columns(cols)
    return {c: np.concatenate([p[c] for p in pieces]) for c in cols}


def to_frame(pieces: Sequence[dict[str, np.ndarray]], cols: list[str]):
    """Pieces of :func:`columns` as one pandas DataFrame, sorted by pair."""
    import pandas as pd

    out = concat(pieces, cols)
    order = np.lexsort((out["label_b"], out["label_a"]))
    return pd.DataFrame({c: v[order] for c, v in out.items()}, copy=False)
