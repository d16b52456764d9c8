"""The pipeline's task graph: summaries -> contacts -> pairs -> merge tree -> numbering -> specs.

The graph is written as plain task dicts, a few layers per phase whatever the number of chunks
(one ``dask.delayed`` call per chunk would add a layer per call and make building and culling the
graph quadratic in the chunk count). The lazy API (dask array in) and the zarr runner (which runs
it on a cluster in phases) share every step.
"""

from __future__ import annotations

import functools
import itertools
import operator
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dask.array as da
import numpy as np
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from tilelabel.kernels.backends import Backend, get_backend
from tilelabel.pipeline import keep as keep_mod
from tilelabel.pipeline import merge, numbering
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline import tree as tree_mod
from tilelabel.pipeline.local import label_block, summarize
from tilelabel.pipeline.plan import ChunkPlan, forward_steps

Key = tuple


def materialize(block: Any, slices: tuple[slice, ...]) -> np.ndarray:
    """A task argument that is either the block itself or a reader to call inside the task."""
    if isinstance(block, np.ndarray):
        return block
    return np.asarray(block(slices))


def _keeper(slot: keep_mod.Slot | None):
    return None if slot is None else functools.partial(keep_mod.put, slot)


def _summarize(block, slot, slices, *args):
    return summarize(materialize(block, slices), *args, keep=_keeper(slot))


def _summarize_stats(block, ivals, slot, slices, *args):
    intensity = None if ivals is None else materialize(ivals, slices)
    return summarize(
        materialize(block, slices), *args, stats=True, intensity=intensity, keep=_keeper(slot)
    )


def _leaf(borders, ordinal, steps, contacts, ordinals, connectivity):
    """A chunk as a leaf of the merge tree: its border labels, their faces and its pairs."""
    pairs = merge.chunk_pairs(
        borders, ordinal, list(zip(steps, contacts, ordinals, strict=True)), connectivity
    )
    return tree_mod.leaf(ordinal, borders.keys, merge.face_mask(borders), pairs)


def _keys_of(counts):
    return counts.keys


def _final_rows(finals):
    keys, values = finals
    return tree_mod.Rows(keys.astype(np.int64, copy=False), {"final": values})


#: how the final labels of roots combine going up the tree: each root has its one, so any
#: reduction that keeps a lone value
_FINALS = {"final": np.maximum}


def _up_the_tree(dsk, t, tree: tree_mod.Tree, name: str, leaves: dict, task) -> None:
    """One task ``name`` per node of the merge tree, level by level up: ``task(level, node,
    children's keys)``. Its result is a pair: what the node keeps (``name_held``) and what it
    passes up (``name_part``); ``leaves``: per chunk index, the key of what the chunk passes."""
    below = leaves
    for lev in range(1, tree.depth + 1):
        here = {}
        for node in tree.nodes(lev):
            key = t(name, lev, node)
            dsk[key] = task(lev, node, [below[c] for c in tree.children(lev, node)])
            dsk[t(f"{name}_held", lev, node)] = (operator.getitem, key, 0)
            if lev < tree.depth:  # the top passes nothing
                here[node] = t(f"{name}_part", lev, node)
                dsk[here[node]] = (operator.getitem, key, 1)
        below = here


def _down_the_tree(dsk, t, tree: tree_mod.Tree, name: str, task, only=None) -> dict:
    """One task ``name`` per node, level by level down from the top: ``task(level, node, key
    of what the parent handed down, None at the top)``, whose result the node's children
    share (``name_given``, :func:`tree.share`; only field ``only``, if given). Returns, per
    chunk index, the key of its share."""
    handed: dict = {}
    for lev in range(tree.depth, 0, -1):
        for node in tree.nodes(lev):
            key = t(name, lev, node)
            dsk[key] = task(lev, node, handed.get((lev, node)))
            for i, c in enumerate(tree.children(lev, node)):
                handed[(lev - 1, c)] = t(f"{name}_given", lev - 1, c)
                dsk[handed[(lev - 1, c)]] = (tree_mod.share, key, i, only)
    return {c: key for (lev, c), key in handed.items() if lev == 0}


def _resolve(dsk, t, tree: tree_mod.Tree, leaves: dict) -> dict:
    """Tasks that join the chunks' border labels up the merge tree and hand each node the roots
    of its exported components on the way down (``down_given``). Returns per chunk index the
    key of its share: its border keys' roots."""
    _up_the_tree(
        dsk,
        t,
        tree,
        "up",
        leaves,
        lambda lev, node, kids: (tree_mod.up, *tree.box(lev, node), tree.grid, kids),
    )
    return _down_the_tree(
        dsk,
        t,
        tree,
        "down",
        lambda lev, node, given: (tree_mod.down, t("up_held", lev, node), given),
        only="root",  # where each was found in the parent's share is for its scatters alone
    )


def _spread(dsk, t, tree: tree_mod.Tree, name: str, leaves: dict, reducers) -> dict:
    """Tasks that take rows keyed by root up the merge tree and each component's rows back down
    (:func:`tree.gather`, :func:`tree.scatter`); ``leaves``: per chunk index, the key of its
    rows. Returns per chunk index the key of what its level-1 node handed down to it."""
    gather = functools.partial(tree_mod.gather, reducers=reducers)

    def exported(lev, node):  # the roots of the node's components that reach its parent
        return t("down_given", lev, node) if lev < tree.depth else None

    _up_the_tree(
        dsk,
        t,
        tree,
        f"{name}_gather",
        leaves,
        lambda lev, node, kids: (gather, kids, exported(lev, node)),
    )
    return _down_the_tree(
        dsk,
        t,
        tree,
        f"{name}_scatter",
        lambda lev, node, given: (
            tree_mod.scatter,
            t(f"{name}_gather_held", lev, node),
            given,
            t("down", lev, node),
        ),
    )


def task_key(token: str, name: str, index: tuple[int, ...] = ()) -> Key:
    return (f"tilelabel-{name}-{token}", *index)


@dataclass
class Source:
    """Where chunk blocks come from.

    ``block(idx)`` is what a task receives as its block argument: a key of ``graph`` (dask array
    input) or a picklable reader called inside the task (zarr input, so that a store is read in
    the task that needs the data and never held between phases).
    """

    block: Callable[[tuple[int, ...]], Any]
    dependencies: list = None  # collections whose graphs hold the keys ``block`` returns
    token: str = ""


@dataclass
class MergeGraph:
    plan: ChunkPlan
    graph: HighLevelGraph
    #: per chunk index, the keys of its (Borders, Counts) summary and of its LUT spec
    summary_keys: dict[tuple[int, ...], tuple[Key, Key]]
    spec_keys: dict[tuple[int, ...], Key]
    #: a 0-d dask array: the number of components
    count: da.Array
    #: the graph layer that holds the specs (what a Delayed of any of them names)
    layer: str
    #: with statistics or a size filter: per chunk index, the key of its local statistics
    #: (persist them with the summaries) and, with a table, of its rows of the table
    stats_keys: dict[tuple[int, ...], Key] = field(default_factory=dict)
    table_keys: dict[tuple[int, ...], Key] = field(default_factory=dict)
    #: per chunk index, where its labels may have been kept (None: keeping is off)
    slots: dict[tuple[int, ...], keep_mod.Slot | None] = field(default_factory=dict)
    token: str = ""

    def key(self, name: str, index: tuple[int, ...] = ()) -> Key:
        """The key of task ``name`` of a chunk (``index``: its grid index), of a node of the
        merge tree (its level, then its index) or of the whole run (no index)."""
        return task_key(self.token, name, index)

    def delayed(self, key: Key) -> Delayed:
        """A Delayed for any key of the graph (a spec or a summary part), for computing it."""
        return Delayed(key, self.graph, layer=self.layer)


def build_merge_graph(
    source: Source,
    plan: ChunkPlan,
    connectivity: int,
    backend: str,
    algorithm: str | None = None,
    stats: stats_mod.StatsOptions | None = None,
    intensity: Source | None = None,
    keep_budget: int = 0,
    keep_input_budget: int = 0,
) -> MergeGraph:
    """From chunk blocks to per-chunk LUT specs and the component count.

    ``stats`` (None: labels only, the default path) adds per-chunk statistics (over the blocks
    of ``intensity`` if given), their border merge, a size filter and per-chunk table rows.
    ``keep_budget``, ``keep_input_budget``: bytes of labels, and of bit-packed input, per worker
    that the labeling pass may keep for the writing pass (:mod:`tilelabel.pipeline.keep`; the
    slots are ``MergeGraph.slots``).
    """
    token = source.token or uuid.uuid4().hex
    shape = plan.shape
    idxs = list(plan.indices())

    def k(name: str, idx: tuple[int, ...] = ()) -> Key:
        return task_key(token, name, idx)

    dsk: dict[Key, Any] = {}
    keeping = keep_budget > 0 or keep_input_budget > 0
    slots = {
        idx: keep_mod.Slot(token, idx, keep_budget, keep_input_budget) if keeping else None
        for idx in idxs
    }
    for idx in idxs:
        open_faces = tuple((idx[a] > 0, idx[a] < plan.grid[a] - 1) for a in range(plan.ndim))
        head = (_summarize, source.block(idx), slots[idx])
        if stats is not None:
            ivals = None if intensity is None else intensity.block(idx)
            head = (_summarize_stats, source.block(idx), ivals, slots[idx])
        dsk[k("summary", idx)] = (
            *head,
            plan.slices(idx),
            f"chunk {idx} at {plan.offset(idx)}",
            plan.offset(idx),
            shape,
            open_faces,
            backend,
            connectivity,
            algorithm,
        )
        dsk[k("borders", idx)] = (operator.getitem, k("summary", idx), 0)
        dsk[k("counts", idx)] = (operator.getitem, k("summary", idx), 1)
        dsk[k("keys", idx)] = (_keys_of, k("counts", idx))
        if stats is not None:
            dsk[k("stats", idx)] = (operator.getitem, k("summary", idx), 2)
            dsk[k("bstats", idx)] = (stats_mod.border_rows, k("stats", idx), k("counts", idx))

    steps = forward_steps(plan.ndim)
    ordinal = {idx: i for i, idx in enumerate(idxs)}  # C order: np.ravel_multi_index
    for idx in idxs:
        nbs = [(i, nb) for i, s in enumerate(steps) if (nb := plan.neighbour(idx, s)) is not None]
        for i, nb in nbs:  # the neighbour's side of the contact, cut out where it lives
            dsk[k("contact", (*nb, i))] = (merge.contact, k("borders", nb), steps[i], False)
        dsk[k("leaf", idx)] = (
            _leaf,
            k("borders", idx),
            ordinal[idx],
            [steps[i] for i, _ in nbs],
            [k("contact", (*nb, i)) for i, nb in nbs],
            [ordinal[nb] for _, nb in nbs],
            connectivity,
        )
    tree = tree_mod.Tree(plan.grid)

    def t(name: str, level: int, node: tuple[int, ...]) -> Key:
        return k(name, (level, *node))

    handed = _resolve(dsk, t, tree, {idx: k("leaf", idx) for idx in idxs})
    for idx in idxs:
        dsk[k("roots", idx)] = (tree_mod.values_at, handed[idx], k("keys", idx), "root")

    # extra trailing argument of the numbering steps: the roots a size filter drops
    drop: dict[tuple[int, ...], tuple] = {idx: () for idx in idxs}
    if stats is not None:
        group = functools.partial(tree_mod.grouped, reducers=stats_mod.REDUCE)
        for idx in idxs:
            dsk[k("srows", idx)] = (group, k("roots", idx), k("bstats", idx))
        merged = _spread(
            dsk, t, tree, "stats", {idx: k("srows", idx) for idx in idxs}, stats_mod.REDUCE
        )
        for idx in idxs:
            dsk[k("mstats", idx)] = (tree_mod.values_at, merged[idx], k("keys", idx))
            if stats.filtering:
                dsk[k("dropped", idx)] = (
                    stats_mod.dropped,
                    k("stats", idx),
                    k("counts", idx),
                    k("roots", idx),
                    k("mstats", idx),
                    stats,
                )
                drop[idx] = (k("dropped", idx),)

    # raster-order exclusive prefix of the row counts: level 1 groups the chunks of one chunk
    # row (members along the last grid axis), level L groups level L-1's totals along grid axis
    # ndim - L; level ndim's one total is the component count. This chain is the merge's
    # critical path, a scheduler round trip per task, so the small steps run inside the tasks
    # that need them, not as tasks of their own: the chunks' row counts inside level 1, a
    # level's totals (its leading axes only) inside the next level, the top level's prefix and
    # each chunk's sum of its prefixes inside the tasks that use them. The lower levels'
    # prefixes, as large as the chunks' row counts, stay tasks of their own, ready long before
    # the top level is.
    d = plan.ndim
    parts: dict[tuple[int, ...], Any] = {
        idx: (
            numbering.corrected_counts,
            k("counts", idx),
            k("roots", idx),
            plan.offset(idx),
            shape,
            plan.block_shape(idx),
            *drop[idx],
        )
        for idx in idxs
    }
    prefix: dict[tuple[int, ...], Any] = {}  # (level, member) -> its prefix: key or task
    for lev in range(1, d + 1):
        axis = d - lev
        groups = itertools.product(*(range(g) for g in plan.grid[:axis]))
        totals = {}
        for grp in groups:
            members = [(*grp, m) for m in range(plan.grid[axis])]
            level = k(f"level{lev}", grp)
            dsk[level] = (numbering.concat_offsets, [parts[m] for m in members])
            for i, m in enumerate(members):
                taken = (operator.getitem, (operator.getitem, level, 0), i)
                if lev < d:
                    dsk[k(f"offset{lev}", m)] = taken
                    taken = k(f"offset{lev}", m)
                prefix[(lev, *m)] = taken
            totals[grp] = (operator.getitem, level, 1)
        parts = totals
    count_name = k("count")[0]
    dsk[(count_name,)] = (int, parts[()])
    offsets = {
        idx: (
            numbering.assemble_offsets,
            [prefix[(lev, *idx[: d - lev + 1])] for lev in range(1, d + 1)],
        )
        for idx in idxs
    }
    for idx in idxs:
        dsk[k("finals", idx)] = (
            _final_rows,
            (
                numbering.border_finals,
                k("counts", idx),
                k("roots", idx),
                offsets[idx],
                plan.offset(idx),
                shape,
                plan.block_shape(idx),
                *drop[idx],
            ),
        )
    finals = _spread(dsk, t, tree, "finals", {idx: k("finals", idx) for idx in idxs}, _FINALS)
    for idx in idxs:
        dsk[k("bfinals", idx)] = (tree_mod.values_at, finals[idx], k("keys", idx), "final")
        dsk[k("spec", idx)] = (
            numbering.lut_spec,
            k("counts", idx),
            k("roots", idx),
            offsets[idx],
            k("bfinals", idx),
            *drop[idx],
        )
    table_keys = {}
    if stats is not None and stats.table:
        for idx in idxs:
            table_keys[idx] = k("table", idx)
            dsk[table_keys[idx]] = (
                stats_mod.chunk_table,
                k("stats", idx),
                k("counts", idx),
                k("roots", idx),
                k("mstats", idx),
                k("spec", idx),
            )
    deps = list(source.dependencies or [])
    if intensity is not None:
        deps += list(intensity.dependencies or [])
    graph = HighLevelGraph.from_collections(count_name, dsk, dependencies=deps)
    return MergeGraph(
        plan,
        graph,
        {idx: (k("borders", idx), k("counts", idx)) for idx in idxs},
        {idx: k("spec", idx) for idx in idxs},
        da.Array(graph, count_name, (), dtype=np.int64),
        count_name,
        {idx: k("stats", idx) for idx in idxs} if stats is not None else {},
        table_keys,
        slots,
        token,
    )


def _labels_again(block, spec, backend, connectivity, algorithm, kept):
    """(backend, local labels) of a chunk in the writing pass: kept labels, or the kept bits or
    ``block`` labeled again, checked against the first pass's count."""
    be = get_backend(backend)
    if kept is not None and kept.labels is not None:
        labels, n = kept.labels, kept.n
    else:
        if kept is not None:
            block = be.unpack(kept.packed, kept.shape)
        labels, n, _ = label_block(block, backend, connectivity, algorithm)
    if n != spec.n:
        raise RuntimeError(
            f"relabel pass found {n} local labels where the first pass found {spec.n}"
        )
    return be, labels


def relabeled(
    block: np.ndarray | None,
    spec: numbering.LutSpec,
    backend: str,
    connectivity: int,
    algorithm: str | None,
    dtype: np.dtype,
    kept: keep_mod.Kept | None = None,
) -> tuple[Backend, Any, np.ndarray]:
    """A chunk labeled again for the writing pass, its local labels not yet mapped: (backend,
    local labels on the backend's device, lookup table to final labels of ``dtype``). The
    caller maps them with :meth:`Backend.apply_lut` or :meth:`Backend.encode_tiles`.

    ``kept``: what the labeling pass kept of the chunk (:mod:`tilelabel.pipeline.keep`): its
    labels, used as they are, or its packed foreground, labeled again instead of ``block``
    (which is then not needed). Relabeling from the input otherwise keeps memory per worker
    O(chunk) for any volume size; the kernels' canonical numbering makes the second pass
    identical to the first.
    """
    be, labels = _labels_again(block, spec, backend, connectivity, algorithm, kept)
    return be, labels, numbering.build_lut(spec, dtype)


def relabel(
    block: np.ndarray | None,
    spec: numbering.LutSpec,
    backend: str,
    connectivity: int,
    algorithm: str | None,
    dtype: np.dtype,
    staging: bool = False,
    kept: keep_mod.Kept | None = None,
) -> np.ndarray:
    """Label a chunk again and map its local labels to final ones (host array of ``dtype``;
    ``staging``: for a caller that writes it out at once, see :meth:`Backend.apply_lut`).
    See :func:`relabeled` for ``kept``."""
    be, labels, lut = relabeled(block, spec, backend, connectivity, algorithm, dtype, kept)
    return be.apply_lut(labels, lut, staging=staging)
