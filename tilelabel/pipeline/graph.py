"""The pipeline's task graph, one builder per stage: labels, pairs, tree, numbering, specs.

Every task is ``(functools.partial(fn, **settings), *inputs)`` (:func:`task`): its settings (the
chunk, the labeler, the statistics options, ...) bound by keyword, its inputs the keys of the
tasks it reads, so that a setting can be followed by its name from the run to the kernel. The
graph is plain task dicts, a few layers per stage whatever the number of chunks (a
``dask.delayed`` call per chunk would add a layer per call and make building and culling the
graph quadratic in the chunk count). The lazy API (dask arrays) and the zarr run share it.
"""

from __future__ import annotations

import functools
import operator
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from dask.highlevelgraph import HighLevelGraph

from tilelabel.chunking import ChunkPlan, forward_steps
from tilelabel.pipeline import borders, kept, numbering, tree
from tilelabel.pipeline import contacts as contacts_mod
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.local import Labeler, summary_task

Key = tuple
Index = tuple[int, ...]


#: tasks per chunk, at most: its steps', its share of the merge tree's and its write (about 26,
#: 34 with statistics, 6 more with the region graph, counted on grids of 4^3 to 16^3 chunks)
TASKS_PER_CHUNK = 40


def task(fn: Callable, *inputs: Any, **settings: Any) -> tuple:
    """A task: ``fn`` with ``settings`` bound by keyword, applied to ``inputs`` (keys of other
    tasks, or tasks run inside this one)."""
    return (functools.partial(fn, **settings) if settings else fn, *inputs)


def task_key(token: str, name: str, index: tuple[int, ...] = ()) -> Key:
    """The key of task ``name`` of a chunk (``index``: its grid index), of a node of the merge
    tree (its level, then its index) or of the whole run (no index)."""
    return (f"tilelabel-{name}-{token}", *index)


@dataclass
class Tasks:
    """A graph under construction: its tasks, keyed by name and index."""

    token: str
    dsk: dict[Key, Any] = field(default_factory=dict)

    def key(self, name: str, index: tuple[int, ...] = ()) -> Key:
        return task_key(self.token, name, index)

    def add(self, name: str, index: tuple[int, ...], fn: Callable, *inputs, **settings) -> Key:
        key = self.key(name, index)
        self.dsk[key] = task(fn, *inputs, **settings)
        return key


@dataclass
class Source:
    """Where chunk blocks come from.

    ``block(idx)`` is what a task receives as its block: a key of a dask array's graph (lazy
    input) or a picklable reader called inside the task (zarr input, so that a store is read in
    the task that needs the data and never held between stages).
    """

    block: Callable[[Index], Any]
    dependencies: list = field(default_factory=list)  # collections whose graphs hold the keys
    token: str = ""


@dataclass
class MergeGraph:
    plan: ChunkPlan
    graph: HighLevelGraph
    token: str
    #: per chunk index, the keys of its borders, its counts, (with statistics) its stats and
    #: (with the region graph) its own contacts
    summary_keys: dict[Index, tuple[Key, ...]]
    #: per chunk index, the key of its lookup table's spec
    spec_keys: dict[Index, Key]
    #: the key of the number of components
    count_key: Key
    #: the graph layer that holds the specs (what a Delayed of any of them names)
    layer: str
    #: with a statistics table: per chunk index, the key of its rows of the table
    table_keys: dict[Index, Key] = field(default_factory=dict)
    #: per chunk index, where its labels may be kept for the writing pass (None: nowhere)
    slots: dict[Index, kept.Slot | None] = field(default_factory=dict)
    #: with fingerprints: the key of every chunk's checksum, in raster order (:func:`checksums`)
    prints_key: Key | None = None
    #: with the region graph: the keys of its complete rows, the chunks' then the tree's
    contacts_keys: list[Key] = field(default_factory=list)

    def key(self, name: str, index: tuple[int, ...] = ()) -> Key:
        """The key of task ``name`` (see :func:`task_key`)."""
        return task_key(self.token, name, index)

    def delayed(self, key: Key):
        """A ``dask.delayed.Delayed`` for any key of the graph, for computing it."""
        from dask.delayed import Delayed

        return Delayed(key, self.graph, layer=self.layer)

    @property
    def keeping(self) -> bool:
        """Whether the labeling pass may keep chunks on the workers for the writing pass."""
        return any(slot is not None for slot in self.slots.values())


def build(
    *,
    source: Source,
    plan: ChunkPlan,
    labeler: Labeler,
    stats: stats_mod.StatsOptions | None = None,
    intensity: Source | None = None,
    keep_budget: int = 0,
    keep_input_budget: int = 0,
    fingerprints: bool = False,
    contacts: contacts_mod.ContactsOptions | None = None,
) -> MergeGraph:
    """From chunk blocks to per-chunk lookup specs and the component count.

    ``stats`` (None: labels only) adds per-chunk statistics (over the blocks of ``intensity``
    if given), their merge across borders, a size filter and per-chunk table rows.
    ``keep_budget``, ``keep_input_budget``: bytes of labels, and of bit-packed input, per
    worker that the labeling pass may keep for the writing pass (:mod:`tilelabel.pipeline.kept`).
    ``fingerprints``: the checksum of every chunk's input as read (``prints_key``).
    ``contacts`` (None: none): the region graph's rows (``contacts_keys``).
    """
    t = Tasks(source.token or uuid.uuid4().hex)
    keeping = keep_budget > 0 or keep_input_budget > 0
    slots = {
        idx: kept.Slot(t.token, idx, keep_budget, keep_input_budget) if keeping else None
        for idx in plan.indices()
    }
    graph_conn = None if contacts is None else contacts.connectivity
    _label_stage(t, plan, source, labeler, stats, intensity, slots, fingerprints, graph_conn)
    _pair_stage(t, plan, labeler.connectivity)  # step 3
    merge_tree = tree.Tree(plan.grid, plan.wrap, plan.stored)
    _resolve_stage(t, merge_tree, plan)  # step 4
    drop, reorder = _stats_stage(t, merge_tree, plan, stats) if stats is not None else ({}, None)
    count_name, offsets = _prefix_stage(t, plan, drop)  # step 5
    _spec_stage(t, merge_tree, plan, offsets, drop, reorder)
    if stats is not None and stats.table:
        _table_stage(t, plan, stats.spacing)
    contact_rows = _contacts_stage(t, merge_tree, plan, contacts, reorder) if contacts else []
    prints = _prints_stage(t, plan) if fingerprints else None
    deps = list(source.dependencies) + (list(intensity.dependencies) if intensity else [])
    graph = HighLevelGraph.from_collections(count_name, t.dsk, dependencies=deps)
    idxs = list(plan.indices())
    parts = ("borders", "counts", *(("stats",) if stats is not None else ()))
    parts += ("lcontacts",) if contacts is not None else ()
    return MergeGraph(
        plan=plan,
        graph=graph,
        token=t.token,
        summary_keys={i: tuple(t.key(p, i) for p in parts) for i in idxs},
        spec_keys={i: t.key("spec", i) for i in idxs},
        count_key=(count_name,),
        layer=count_name,
        table_keys={i: t.key("table", i) for i in idxs} if stats and stats.table else {},
        slots=slots,
        prints_key=prints,
        contacts_keys=contact_rows,
    )


def _label_stage(t: Tasks, plan, source, labeler, stats, intensity, slots, prints, graph) -> None:
    """Each chunk's summary (:func:`local.summarize`), and its parts as tasks of their own
    (``graph``: the region graph's connectivity, None: none)."""
    for idx in plan.indices():
        # a chunk all of a nonzero fill value is read only for statistics or the graph
        constant = None if stats is not None or graph else plan.constant(idx)
        inputs = [source.block(idx) if constant is None else None]
        inputs += [intensity.block(idx)] if intensity is not None else []
        slot = slots[idx]
        summary = t.add(
            "summary",
            idx,
            summary_task,
            *inputs,
            chunk=plan.chunk(idx),
            labeler=labeler,
            stats=stats is not None,
            moments=stats is not None and stats.moments,
            keys=stats is not None and stats.keys,
            keep=None if slot is None else functools.partial(kept.put, slot),
            fingerprint=prints,
            **({} if constant is None else {"constant": constant}),
            **({} if graph is None else {"contacts": graph}),
        )
        t.add("borders", idx, operator.attrgetter("borders"), summary)
        counts = t.add("counts", idx, operator.attrgetter("counts"), summary)
        t.add("keys", idx, operator.attrgetter("keys"), counts)
        if stats is not None:
            rows = t.add("stats", idx, operator.attrgetter("stats"), summary)
            t.add("bstats", idx, stats_mod.border_rows, rows, counts)
        if graph is not None:
            t.add("lcontacts", idx, operator.attrgetter("contacts"), summary)


def checksums(prints: list[int], *, at: np.ndarray) -> np.ndarray:
    """The chunks' checksums as one array: a row per chunk (raster order), its grid index
    (``at``) then its checksum."""
    return np.column_stack([at.astype(np.uint64), np.array(prints, np.uint64)])


def _prints_stage(t: Tasks, plan: ChunkPlan) -> Key:
    """Every chunk's checksum, in one small task (a few bytes a chunk)."""
    idxs = list(plan.indices())
    prints = [
        t.add("print", idx, operator.attrgetter("fingerprint"), t.key("summary", idx))
        for idx in idxs
    ]
    at = np.array(idxs, np.int64).reshape(-1, plan.ndim)
    return t.add("prints", (), checksums, prints, at=at)


def _pair_stage(t: Tasks, plan: ChunkPlan, connectivity: int) -> None:
    """Each chunk as a leaf of the merge tree, with its pairs: its forward neighbours' sides of
    each contact are cut out where those live (:func:`borders.contact`)."""
    steps = forward_steps(plan.ndim)
    ordinal = {idx: plan.ordinal(idx) for idx in plan.indices()}  # C order of the whole grid
    for idx in plan.indices():
        nbs = [(i, nb) for i, s in enumerate(steps) if (nb := plan.neighbour(idx, s)) is not None]
        contacts = [
            t.add(
                "contact",
                (*nb, i),
                borders.contact,
                t.key("borders", nb),
                step=steps[i],
                high=False,
            )
            for i, nb in nbs
        ]
        t.add(
            "leaf",
            idx,
            tree.leaf,
            t.key("borders", idx),
            contacts,
            ordinal=ordinal[idx],
            steps=[steps[i] for i, _ in nbs],
            ordinals=[ordinal[nb] for _, nb in nbs],
            connectivity=connectivity,
        )


def _up_the_tree(t: Tasks, merge_tree: tree.Tree, name: str, leaves: dict, make) -> None:
    """One task ``name`` per node of the merge tree, level by level up: ``make(level, node,
    children's keys)``. Its result is a pair: what the node keeps (``name_held``) and what it
    passes up (``name_part``); ``leaves``: per chunk index, the key of what the chunk passes."""
    below = leaves
    for lev in range(1, merge_tree.depth + 1):
        here = {}
        for node in merge_tree.nodes(lev):
            key = t.key(name, (lev, *node))
            t.dsk[key] = make(lev, node, [below[c] for c in merge_tree.children(lev, node)])
            t.add(f"{name}_held", (lev, *node), operator.itemgetter(0), key)
            if lev < merge_tree.depth:  # the top passes nothing
                here[node] = t.add(f"{name}_part", (lev, *node), operator.itemgetter(1), key)
        below = here


def _down_the_tree(t: Tasks, merge_tree: tree.Tree, name: str, make, only=None) -> dict:
    """One task ``name`` per node, level by level down from the top: ``make(level, node, key
    of what the parent handed down, None at the top)``, whose result the node's children share
    (``name_given``, :func:`tree.share`; only field ``only``, if given). Returns, per chunk
    index, the key of its share."""
    handed: dict = {}
    for lev in range(merge_tree.depth, 0, -1):
        for node in merge_tree.nodes(lev):
            key = t.key(name, (lev, *node))
            t.dsk[key] = make(lev, node, handed.get((lev, node)))
            for i, c in enumerate(merge_tree.children(lev, node)):
                given = t.add(f"{name}_given", (lev - 1, *c), tree.share, key, child=i, only=only)
                handed[(lev - 1, c)] = given
    return {c: key for (lev, c), key in handed.items() if lev == 0}


def _resolve_stage(t: Tasks, merge_tree: tree.Tree, plan: ChunkPlan) -> None:
    """Border labels joined up the merge tree, the roots of each node's exported components
    handed down (``down_given``); per chunk, its border labels' roots (``roots``)."""

    def up(lev, node, kids):
        lo, hi = merge_tree.box(lev, node)
        return task(tree.up, kids, lo=lo, hi=hi, grid=merge_tree.grid, wrap=merge_tree.wrap)

    leaves = {idx: t.key("leaf", idx) for idx in plan.indices()}
    _up_the_tree(t, merge_tree, "up", leaves, up)
    handed = _down_the_tree(
        t,
        merge_tree,
        "down",
        lambda lev, node, given: task(tree.down, t.key("up_held", (lev, *node)), given),
        only="root",  # where each was found in the parent's share is for its scatters alone
    )
    for idx in plan.indices():
        t.add("roots", idx, tree.values_at, handed[idx], t.key("keys", idx), field_name="root")


def _spread(t: Tasks, merge_tree: tree.Tree, name: str, leaves: dict, reducers) -> dict:
    """Rows keyed by root taken up the merge tree and each component's rows back down
    (:func:`tree.gather`, :func:`tree.scatter`); ``leaves``: per chunk index, the key of its
    rows. Returns per chunk index the key of what its level-1 node handed down to it."""

    def gather(lev, node, kids):
        # the roots of the node's components that reach its parent
        exported = t.key("down_given", (lev, *node)) if lev < merge_tree.depth else None
        return task(tree.gather, kids, exported, reducers=reducers)

    def scatter(lev, node, given):
        held = t.key(f"{name}_gather_held", (lev, *node))
        return task(tree.scatter, held, given, t.key("down", (lev, *node)))

    _up_the_tree(t, merge_tree, f"{name}_gather", leaves, gather)
    return _down_the_tree(t, merge_tree, f"{name}_scatter", scatter)


#: how many candidate lists one task of the largest_k reduction joins
TOP_FANIN = 16


def _stats_stage(t: Tasks, merge_tree, plan, stats: stats_mod.StatsOptions) -> tuple:
    """Border labels' statistics merged by root (``mstats``); with a size filter, the roots
    each chunk drops (with ``largest_k``, after a reduction of every chunk's largest to the k
    largest of all, ``top``). Returns per chunk index the inputs the numbering takes for the
    filter, and the key of the size-order lookup table (None: raster order)."""
    for idx in plan.indices():
        roots, rows = t.key("roots", idx), t.key("bstats", idx)
        t.add("srows", idx, tree.grouped, roots, rows, reducers=stats_mod.REDUCE)
    leaves = {idx: t.key("srows", idx) for idx in plan.indices()}
    merged = _spread(t, merge_tree, "stats", leaves, stats_mod.REDUCE)
    for idx in plan.indices():
        t.add("mstats", idx, tree.values_at, merged[idx], t.key("keys", idx))
    top = _top_stage(t, plan, stats) if stats.largest_k is not None else None
    drop = {}
    for idx in plan.indices():
        if stats.filtering:
            inputs = [t.key(n, idx) for n in ("stats", "counts", "roots", "mstats")]
            inputs += [top] if top is not None else []
            drop[idx] = (t.add("dropped", idx, stats_mod.dropped, *inputs, opts=stats),)
    reorder = None
    if stats.order == "size":
        reorder = t.add("reorder", (), stats_mod.size_order, top)
    return drop, reorder


def _top_stage(t: Tasks, plan, stats: stats_mod.StatsOptions) -> Key:
    """The ``largest_k`` largest components: each chunk's candidates, joined TOP_FANIN at a
    time until one task holds the k largest of all (O(k) per task)."""
    names = ("stats", "counts", "roots", "mstats")
    level = [
        t.add("cands", idx, stats_mod.candidates, *(t.key(n, idx) for n in names), opts=stats)
        for idx in plan.indices()
    ]
    depth = 0
    while len(level) > 1 or depth == 0:
        depth += 1
        level = [
            t.add("top", (depth, i), stats_mod.top_k, level[a : a + TOP_FANIN], k=stats.largest_k)
            for i, a in enumerate(range(0, len(level), TOP_FANIN))
        ]
    return level[0]


def _prefix_stage(t: Tasks, plan: ChunkPlan, drop: dict) -> tuple[str, dict]:
    """The raster-order exclusive prefix of the roots per row: level 1 groups the chunks of one
    chunk row (members along the last grid axis), level L groups level L-1's totals along grid
    axis ndim - L; level ndim's one total is the component count. Returns the count's layer
    name and per chunk index the task of its rows' offsets.

    This chain is the merge's critical path, a scheduler round trip per task, so the small steps
    run inside the tasks that need them: the chunks' row counts inside level 1, a level's totals
    inside the next level, the top level's prefix and each chunk's sum of its prefixes inside
    the tasks that use them. The lower levels' prefixes, as large as the chunks' row counts,
    stay tasks of their own, ready long before the top level is."""
    d = plan.ndim
    parts: dict[tuple[int, ...], Any] = {
        idx: task(
            numbering.corrected_counts,
            t.key("counts", idx),
            t.key("roots", idx),
            *drop.get(idx, ()),
            chunk=plan.chunk(idx),
        )
        for idx in plan.indices()
    }
    prefix: dict[tuple[int, ...], Any] = {}  # (level, member) -> its prefix: key or task
    for lev in range(1, d + 1):
        axis = d - lev
        totals = {}
        groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for member in parts:  # raster order; a chunk that holds no data counts nothing
            groups.setdefault(member[:axis], []).append(member)
        for grp, members in groups.items():
            level = t.add(f"level{lev}", grp, numbering.concat_offsets, [parts[m] for m in members])
            for i, m in enumerate(members):
                taken = (operator.getitem, (operator.getitem, level, 0), i)
                prefix[(lev, *m)] = t.add(f"offset{lev}", m, *taken) if lev < d else taken
            totals[grp] = (operator.getitem, level, 1)
        parts = totals
    count_name = t.key("count")[0]
    t.dsk[(count_name,)] = (int, parts[()])
    offsets = {
        idx: task(
            numbering.assemble_offsets,
            [prefix[(lev, *idx[: d - lev + 1])] for lev in range(1, d + 1)],
        )
        for idx in plan.indices()
    }
    return count_name, offsets


def _final_rows(finals: tuple[np.ndarray, np.ndarray]) -> tree.Rows:
    keys, values = finals
    return tree.Rows(keys.astype(np.int64, copy=False), {"final": values})


#: how the final labels of roots combine going up the tree: each root has its one, so any
#: reduction that keeps a lone value
_FINALS = {"final": np.maximum}


def _spec_stage(
    t: Tasks, merge_tree, plan: ChunkPlan, offsets: dict, drop: dict, reorder: Key | None
) -> None:
    """The final labels of border components, from the chunk that holds each root to every
    chunk the component touches (through the tree), and each chunk's lookup spec (renumbered
    through the table ``reorder``, if given)."""
    for idx in plan.indices():
        counts, roots, dropped = t.key("counts", idx), t.key("roots", idx), drop.get(idx, ())
        finals = task(
            numbering.border_finals, counts, roots, offsets[idx], *dropped, chunk=plan.chunk(idx)
        )
        t.add("finals", idx, _final_rows, finals)
    leaves = {idx: t.key("finals", idx) for idx in plan.indices()}
    finals = _spread(t, merge_tree, "finals", leaves, _FINALS)
    for idx in plan.indices():
        counts, roots, dropped = t.key("counts", idx), t.key("roots", idx), drop.get(idx, ())
        bfinals = t.add(
            "bfinals", idx, tree.values_at, finals[idx], t.key("keys", idx), field_name="final"
        )
        spec = (numbering.lut_spec, counts, roots, offsets[idx], bfinals, *dropped)
        if reorder is not None:
            spec = (numbering.reordered, spec, reorder)
        t.dsk[t.key("spec", idx)] = spec


def _contacts_stage(
    t: Tasks, merge_tree, plan: ChunkPlan, opts: contacts_mod.ContactsOptions, reorder
) -> list[Key]:
    """The region graph's rows: each chunk's own and across its forward borders, summed up the
    merge tree (:mod:`tilelabel.pipeline.contacts`). Returns the keys of the complete rows'
    columns, the chunks' (raster order) then the nodes' (level by level up)."""
    steps = forward_steps(plan.ndim)
    given = [] if reorder is None else [reorder]
    settings = {"spacing": opts.spacing, "value_dtype": opts.value_dtype}
    rows, leaves = [], {}
    for idx in plan.indices():
        nbs = [(i, nb) for i, s in enumerate(steps) if (nb := plan.neighbour(idx, s)) is not None]
        key = t.add(
            "cleaf",
            idx,
            contacts_mod.leaf,
            t.key("lcontacts", idx),
            t.key("spec", idx),
            t.key("borders", idx),
            [t.key("contact", (*nb, i)) for i, nb in nbs],
            [t.key("bfinals", nb) for _, nb in nbs],
            ordinal=plan.ordinal(idx),
            ordinals=[plan.ordinal(nb) for _, nb in nbs],
            steps=[steps[i] for i, _ in nbs],
            connectivity=opts.connectivity,
            ndim=plan.ndim,
        )
        done = t.add("cleaf_done", idx, operator.itemgetter(0), key)
        rows.append(t.add("ccols", idx, contacts_mod.columns, done, *given, **settings))
        leaves[idx] = t.add("cleaf_part", idx, operator.itemgetter(1), key)

    def up(lev, node, kids):
        lo, hi = merge_tree.box(lev, node)
        top = lev == merge_tree.depth
        exported = None if top else t.key("finals_scatter_given", (lev, *node))
        return task(contacts_mod.up, kids, exported, lo=lo, hi=hi, grid=merge_tree.grid)

    _up_the_tree(t, merge_tree, "cup", leaves, up)
    for lev in range(1, merge_tree.depth + 1):
        for node in merge_tree.nodes(lev):
            done = t.key("cup_held", (lev, *node))
            rows.append(
                t.add("ccols", (lev, *node), contacts_mod.columns, done, *given, **settings)
            )
    return rows


def _table_stage(t: Tasks, plan: ChunkPlan, spacing: tuple[float, ...] | None) -> None:
    """Each chunk's rows of the statistics table: the components rooted in it."""
    for idx in plan.indices():
        inputs = [t.key(n, idx) for n in ("stats", "counts", "roots", "mstats", "spec")]
        t.add("table", idx, stats_mod.chunk_table, *inputs, spacing=spacing)
