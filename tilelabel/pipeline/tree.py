"""Step 4, resolve: border labels are joined in groups of up to 2^ndim chunks, then in groups of
those groups, up to one group of the whole grid; what each group learned then goes back down.

A node of the tree is a box of chunks. Going up, a node joins its children's components through
the border pairs between them and passes on only the labels on its own outer faces, with their
component's smallest key within the node, and the pairs that leave it. Its memory is that of
its children's borders with each other: at the top, the labels on the grid's mid-planes, never
every chunk's border labels (which grow with the volume, as O(N) for N voxels; the mid-planes'
as O(N^(2/3))).

A component's smallest key within a node is its root (its first voxel in raster order) as soon
as the node's box holds that voxel, and a component that touches none of a node's outer faces
lies wholly inside it. So going down, a node hands each child the roots of the child's exported
components (:func:`down`, :func:`share`), and later the final label or merged statistics of
each (:func:`gather` up, :func:`scatter` down), again in O(its children's borders).

On a wrapped axis (periodic boundaries) the grid's end faces touch each other: a node's faces
there have chunks beyond them (the other end) until the node spans the whole axis, so its
labels there stay open and the pairs across the wrap stay pending until that level.

Labels are named across the tree as ``chunk ordinal << POSITION_BITS | position``, the position
being the label's index in its chunk's sorted border ids (:func:`borders.chunk_pairs`); the name
tells a node which chunk, and so which child and face, a label belongs to (:func:`leaf`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from dask.sizeof import sizeof

from tilelabel.pipeline.borders import POSITION_BITS, chunk_pairs, face_mask
from tilelabel.pipeline.local import Borders, sizeof_fields
from tilelabel.sorting import runs, unique_inverse

Reducers = Mapping[str, Callable]


@dataclass(frozen=True)
class Tree:
    """The nodes of the merge tree over a chunk grid: level 0 is the chunks themselves, a node
    of level L covers up to 2^L chunks along each axis, and level ``depth`` is one node. With
    ``leaves``, only the nodes over those chunks (the rest hold no data)."""

    grid: tuple[int, ...]
    #: the wrapped axes (:class:`tilelabel.chunking.ChunkPlan`'s ``wrap``)
    wrap: tuple[int, ...] = ()
    #: the chunks that are leaves, in raster order (None: every chunk)
    leaves: tuple[tuple[int, ...], ...] | None = None

    @functools.cached_property
    def _present(self) -> list[tuple[tuple[int, ...], ...]]:
        """Per level, the nodes over some leaf, in raster order."""
        return [
            tuple(sorted({tuple(i >> lev for i in leaf) for leaf in self.leaves}))
            for lev in range(self.depth + 1)
        ]

    @functools.cached_property
    def _present_sets(self) -> list[frozenset]:
        return [frozenset(nodes) for nodes in self._present]

    @property
    def depth(self) -> int:
        # at least one level above the chunks, so that even one chunk has a node that resolves
        return max(1, *((g - 1).bit_length() for g in self.grid))

    def shape(self, level: int) -> tuple[int, ...]:
        """Nodes per axis at ``level``."""
        return tuple(-(-g >> level) for g in self.grid)

    def nodes(self, level: int) -> Iterator[tuple[int, ...]]:
        if self.leaves is not None:
            return iter(self._present[level])
        return itertools.product(*(range(n) for n in self.shape(level)))

    def children(self, level: int, node: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The nodes of ``level - 1`` under ``node``, in raster order."""
        below = self.shape(level - 1)
        present = None if self.leaves is None else self._present_sets[level - 1]
        kids = []
        for step in itertools.product((0, 1), repeat=len(node)):
            kid = tuple(2 * n + s for n, s in zip(node, step, strict=True))
            if all(c < b for c, b in zip(kid, below, strict=True)):
                if present is None or kid in present:
                    kids.append(kid)
        return kids

    def box(self, level: int, node: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The chunk indices ``node`` covers: from ``lo`` up to, not including, ``hi``."""
        lo = tuple(n << level for n in node)
        hi = tuple(min((n + 1) << level, g) for n, g in zip(node, self.grid, strict=True))
        return lo, hi


@dataclass
class Part:
    """What a node (or a chunk) passes up: its labels on its outer faces and the border pairs
    that leave it."""

    #: names of the labels that touch a face of the node's box with a chunk beyond it, sorted
    names: np.ndarray
    #: each one's component's smallest key within the node
    reps: np.ndarray
    #: each one's chunk faces it touches: bit ``2 * axis + side`` (side 1: the high face)
    faces: np.ndarray
    #: (k, 2) pairs of equivalent names, one of each pair outside the node
    pairs: np.ndarray


@dataclass
class Rows:
    """Values per key, sorted by key; with ``child``, the child of the node each key goes to."""

    keys: np.ndarray
    values: dict[str, np.ndarray]
    child: np.ndarray | None = None

    def take(self, sel: np.ndarray, fields: Sequence[str] | None = None) -> Rows:
        """The rows ``sel`` picks (only ``fields``, if given), without ``child``."""
        fields = self.values if fields is None else fields
        return Rows(self.keys[sel], {f: self.values[f][sel] for f in fields})

    def at(self, keys: np.ndarray) -> dict[str, np.ndarray]:
        """The values of ``keys``, every one of which is a key here."""
        if not keys.size:
            return {f: v[:0] for f, v in self.values.items()}
        pos = _search(self.keys, keys) if self.keys.size else None
        if pos is None or np.any(self.keys[pos] != keys):
            raise RuntimeError("merge tree: a component reached a node without its row")
        return {f: v[pos] for f, v in self.values.items()}


sizeof.register(Part)(sizeof_fields)
sizeof.register(Rows)(sizeof_fields)


def _search(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Where each of ``queries`` is or would go in the sorted, non-empty ``keys``, clipped to
    an index of ``keys`` (the caller tells hits by comparing). Queries out of order are sorted
    first: binary searches in random order miss the cache."""
    if queries.size > 4096 and np.any(queries[1:] < queries[:-1]):
        order = np.argsort(queries)
        pos = np.empty(queries.size, np.intp)
        pos[order] = np.searchsorted(keys, queries[order])
    else:
        pos = np.searchsorted(keys, queries)
    return pos.clip(max=keys.size - 1)


def leaf(
    borders: Borders,
    contacts: Sequence[np.ndarray],
    *,
    ordinal: int,
    steps: Sequence[tuple[int, ...]],
    ordinals: Sequence[int],
    connectivity: int,
) -> Part:
    """A chunk as a node of the tree: all its border labels, each its own component so far,
    their faces, and its pairs with its forward neighbours (at ``steps``, whose ``contacts``
    towards it are given: :func:`borders.contact`, and whose ``ordinals`` are their places in
    the grid's raster order)."""
    pairs = chunk_pairs(
        borders, ordinal, list(zip(steps, contacts, ordinals, strict=True)), connectivity
    )
    keys = borders.keys
    names = (np.int64(ordinal) << POSITION_BITS) + np.arange(keys.size, dtype=np.int64)
    return Part(names, keys.astype(np.int64, copy=False), face_mask(borders), pairs)


def _chunks(names: np.ndarray, grid: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    return np.unravel_index(names >> POSITION_BITS, grid)


def _inside(names: np.ndarray, lo: tuple[int, ...], hi: tuple[int, ...], grid) -> np.ndarray:
    out = np.ones(names.shape, bool)
    for c, a, b in zip(_chunks(names, grid), lo, hi, strict=True):
        out &= (c >= a) & (c < b)
    return out


def _on_outer_faces(names: np.ndarray, faces: np.ndarray, lo, hi, grid, wrap=()) -> np.ndarray:
    """Which of the labels ``names`` (touching their chunks' ``faces``) touch a face of the box
    ``lo``..``hi`` that has chunks beyond it (on a ``wrap``ped axis, the other end's unless the
    box spans the axis): only those can be named by a pair that leaves the box."""
    out = np.zeros(names.shape, bool)
    for axis, c in enumerate(_chunks(names, grid)):
        ends = ((0, lo[axis], lo[axis] > 0), (1, hi[axis] - 1, hi[axis] < grid[axis]))
        if axis in wrap:
            spans = lo[axis] == 0 and hi[axis] == grid[axis]
            ends = ((0, lo[axis], not spans), (1, hi[axis] - 1, not spans))
        for side, edge, beyond in ends:
            if beyond:
                out |= (c == edge) & ((faces >> (2 * axis + side)) & 1).astype(bool)
    return out


def least_linked(n: int, ends: np.ndarray) -> np.ndarray:
    """For each of ``n`` nodes, the least node of its connected component under the edges
    ``ends`` (shape (k, 2)).

    Each round hooks the larger root of every edge between two trees under the smaller one
    (the least such), then points every node at its root. A root never has a parent above
    it, so each tree's root is its least node; every tree with an edge to another joins one,
    so a component's trees at least halve each round. NumPy alone: importing scipy.sparse
    costs a small run more than its merge does.
    """
    parent = np.arange(n)
    a, b = ends[:, 0], ends[:, 1]
    while True:
        ra, rb = parent[a], parent[b]
        apart = ra != rb
        if not apart.any():
            return parent
        # an edge inside one tree stays there: only the others are looked at again
        a, b, ra, rb = a[apart], b[apart], ra[apart], rb[apart]
        np.minimum.at(parent, np.maximum(ra, rb), np.minimum(ra, rb))
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand


def up(
    parts: Sequence[Part],
    *,
    lo: tuple[int, ...],
    hi: tuple[int, ...],
    grid: tuple[int, ...],
    wrap: tuple[int, ...] = (),
) -> tuple[Rows, Part]:
    """Join the children's components (``parts``) inside the box ``lo``..``hi`` of chunks
    (of a grid whose ``wrap``ped axes' ends touch).

    Returns the node's joins, for :func:`down`: ``Rows`` of every child component that reaches
    here (keyed by the child's rep) with its rep here (``"root"``) and the child it came from;
    and the node's :class:`Part` for its parent.
    """
    # sorted by name, so that the pairs' names are found by a binary search each: the children
    # interleave (a chunk's ordinal is its place in the whole grid)
    names = np.concatenate([p.names for p in parts])
    order = np.argsort(names)
    names = names[order]
    reps = np.concatenate([p.reps for p in parts])[order]
    faces = np.concatenate([p.faces for p in parts])[order]
    sizes = [p.names.size for p in parts]
    child = np.repeat(np.arange(len(parts), dtype=np.uint8), sizes)[order]  # 8 children at most
    del order
    pairs = np.concatenate([p.pairs for p in parts]).reshape(-1, 2)
    within = _inside(pairs[:, 0], lo, hi, grid) & _inside(pairs[:, 1], lo, hi, grid)
    inner, pending = pairs[within], pairs[~within]
    uniq, first, inverse = unique_inverse(reps)
    joined = uniq
    if inner.size:
        ends = _search(names, inner.reshape(-1)).reshape(-1, 2)
        if np.any(names[ends] != inner):
            raise RuntimeError("merge tree: a border pair names a label no child passed up")
        # the least rep of each component (reps are sorted): its first voxel within this box
        joined = uniq[least_linked(uniq.size, inverse[ends])]
    keep = _on_outer_faces(names, faces, lo, hi, grid, wrap)
    outer = Part(names[keep], joined[inverse[keep]], faces[keep], pending)
    return Rows(uniq, {"root": joined}, child[first]), outer


def down(joins: Rows, given: Rows | None) -> Rows:
    """A node's joins with each component's root (``"root"``): ``given``'s (from the parent,
    keyed by this node's reps of its exported components) where it names the component's rep
    here; any other component lies inside the node, so its rep here is its root. ``"given_at"``
    keeps where in ``given`` each was found (-1: inside), for the node's :func:`scatter`s."""
    reps = joins.values["root"]
    roots, at = reps, np.full(reps.size, -1, np.intp)
    if given is not None and given.keys.size:
        pos = _search(given.keys, reps)
        hit = given.keys[pos] == reps
        roots = np.where(hit, given.values["root"][pos], reps)
        at[hit] = pos[hit]
    return Rows(joins.keys, {"root": roots, "given_at": at}, joins.child)


def share(rows: Rows, *, child: int, only: str | None = None) -> Rows:
    """Child ``child``'s part of a node's rows going down (only field ``only``, if given)."""
    return rows.take(rows.child == child, [only] if only else None)


def combine(parts: Sequence[Rows], reducers: Reducers) -> Rows:
    """Rows of the same key combined field by field (``reducers``: a ufunc per field name; the
    fields are those of ``parts``, all alike)."""
    keys = np.concatenate([p.keys for p in parts])
    # each part is sorted already: a stable sort merges their runs, and one pass finds the
    # first of each key (np.unique would sort them all again)
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    start = np.flatnonzero(runs(keys))
    values = {}
    for f in parts[0].values:
        vals = np.concatenate([p.values[f] for p in parts])[order]
        if start.size == keys.size:
            values[f] = vals
            continue
        with np.errstate(invalid="ignore"):  # a NaN intensity's min and max stay NaN, as meant
            values[f] = reducers[f].reduceat(vals, start, axis=0)
    return Rows(keys[start], values)


def grouped(roots: np.ndarray, values: dict[str, np.ndarray], *, reducers: Reducers) -> Rows:
    """A chunk's rows of its border labels (aligned with ``roots``), combined by root."""
    return combine([Rows(roots, values)], reducers)


def gather(parts: Sequence[Rows], given: Rows | None, *, reducers: Reducers) -> tuple[Rows, Rows]:
    """A node's rows keyed by root: its children's, combined; and of those, the rows of the
    components it exports (``given``: its exported reps and their roots from :func:`share`,
    None at the top) for its parent."""
    table = combine(parts, reducers)
    if given is None or not table.keys.size:
        return table, table.take(np.zeros(0, np.int64))
    roots = np.sort(given.values["root"])
    roots = roots[runs(roots)]
    pos = _search(table.keys, roots)
    return table, table.take(pos[table.keys[pos] == roots])


def scatter(table: Rows, given: Rows | None, resolved: Rows) -> Rows:
    """Each child component's final rows, keyed by its rep in the child: ``given``'s (the
    parent's rows for the components this node exports, complete) where the component is one
    of those; any other component lies inside the node, and its root's row in ``table`` is
    complete. ``resolved``: the node's :func:`down`. ``given`` has the keys, in the same order,
    of the parent's share of roots that :func:`down` searched: the same share of the parent's
    rows, so the positions found there hold here."""
    at, roots = resolved.values["given_at"], resolved.values["root"]
    inside = at < 0
    mine = table.at(roots[inside])
    values = {}
    for f, v in mine.items():
        values[f] = np.empty((at.size, *v.shape[1:]), v.dtype)
        values[f][inside] = v
        if not inside.all():
            values[f][~inside] = given.values[f][at[~inside]]
    return Rows(resolved.keys, values, resolved.child)


def values_at(given: Rows, keys: np.ndarray, field_name: str | None = None):
    """A chunk's values for its border labels (``keys``, in the order of its border ids) from
    what its level-1 node handed down; one field's array if ``field_name`` is given."""
    vals = given.at(keys.astype(np.int64, copy=False))
    return vals if field_name is None else vals[field_name]
