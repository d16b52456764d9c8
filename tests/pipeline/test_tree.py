"""The merge tree: its layout, the roots it hands each chunk, and what each node passes up."""

from __future__ import annotations

import itertools

import dask
import numpy as np
import pytest
from scipy import ndimage

from tilelabel.chunking import plan_for_storage
from tilelabel.connectivity import structure
from tilelabel.pipeline import tree
from tilelabel.pipeline.borders import POSITION_BITS
from tilelabel.pipeline.graph import Source, build
from tilelabel.pipeline.local import Labeler
from tilelabel.pipeline.stats import options
from tilelabel.synth import random_volume


@pytest.mark.parametrize("grid", [(1,), (7,), (1, 1, 1), (2, 3, 5), (8, 8), (4, 1, 9)])
def test_each_level_covers_the_grid_once_and_each_node_is_its_childrens_union(grid):
    t = tree.Tree(grid)
    assert t.shape(t.depth) == (1,) * len(grid)
    assert t.depth == 1 or t.shape(t.depth - 1) != (1,) * len(grid)
    cells = set(itertools.product(*(range(g) for g in grid)))

    def covered(level, node):
        lo, hi = t.box(level, node)
        return set(itertools.product(*(range(a, b) for a, b in zip(lo, hi, strict=True))))

    for level in range(t.depth + 1):
        seen: list = []
        for node in t.nodes(level):
            seen += covered(level, node)
            if level:
                below = [covered(level - 1, c) for c in t.children(level, node)]
                assert 1 <= len(below) <= 2 ** len(grid)
                assert set().union(*below) == covered(level, node)
                assert sum(map(len, below)) == len(covered(level, node))
        assert sorted(seen) == sorted(cells)


def merge_graph(img: np.ndarray, chunks: tuple[int, ...], conn: int, **kw):
    plan = plan_for_storage(img.shape, (1,) * img.ndim, chunks)
    source = Source(lambda idx: img[plan.slices(idx)])
    return plan, build(source=source, plan=plan, labeler=Labeler("cpu", conn), **kw)


def computed(graph, names_and_indices):
    with dask.config.set(scheduler="sync"):
        return dask.compute(*(graph.delayed(graph.key(n, i)) for n, i in names_and_indices))


@pytest.mark.parametrize(
    "shape, chunks, conn",
    [
        ((24, 20, 18), (8, 10, 9), 26),
        ((24, 20, 18), (8, 10, 9), 18),
        ((24, 20, 18), (8, 5, 6), 6),
        ((24, 20, 18), (3, 4, 5), 26),  # a tree of depth 3 over an 8x5x4 grid
        ((40, 36), (10, 12), 8),
        ((40, 36), (7, 12), 4),
        ((40, 36), (3, 2), 8),  # depth 5
        ((1, 61), (1, 4), 4),  # a row of 16 chunks: every node has two children
        ((5, 4), (5, 4), 8),  # one chunk, no border labels
    ],
)
def test_roots_are_the_first_voxels_of_the_whole_volumes_components(shape, chunks, conn):
    for density in (0.3, 0.6):
        img = random_volume(shape, density, 1, seed=sum(shape) + int(density * 10))
        ref, _ = ndimage.label(img, structure(img.ndim, conn))
        flat = ref.reshape(-1)
        labels, first = np.unique(flat, return_index=True)
        first_of = dict(zip(labels.tolist(), first.tolist(), strict=True))
        plan, graph = merge_graph(img, chunks, conn)
        idxs = list(plan.indices())
        got = computed(graph, [(n, i) for i in idxs for n in ("keys", "roots")])
        keys, roots = got[::2], got[1::2]
        assert plan.nchunks == 1 or sum(k.size for k in keys) > 0
        for k, r in zip(keys, roots, strict=True):
            expected = np.array([first_of[flat[key]] for key in k], np.int64)
            np.testing.assert_array_equal(r, expected)


def test_a_node_passes_up_only_the_labels_on_its_outer_faces():
    # 16x16 chunks of 8x8 pixels, many small components: depth 4, so the top node's children
    # are the four quarters of the image, and they pass up only the labels along the mid-lines
    img = random_volume((128, 128), 0.3, 1, seed=5)
    plan, graph = merge_graph(img, (8, 8), 8)
    t = tree.Tree(plan.grid)
    assert t.depth == 4
    leaves = computed(graph, [("leaf", i) for i in plan.indices()])
    for level in (1, 2, 3):
        nodes = list(t.nodes(level))
        parts = computed(graph, [("up_part", (level, *n)) for n in nodes])
        for node, part in zip(nodes, parts, strict=True):
            lo, hi = t.box(level, node)
            chunk = np.unravel_index(part.names >> POSITION_BITS, plan.grid)
            outward = np.zeros(part.names.size, bool)
            for axis in range(2):
                low = (chunk[axis] == lo[axis]) & (lo[axis] > 0)
                high = (chunk[axis] == hi[axis] - 1) & (hi[axis] < plan.grid[axis])
                outward |= low & (part.faces >> (2 * axis) & 1 == 1)
                outward |= high & (part.faces >> (2 * axis + 1) & 1 == 1)
            assert outward.all()
            # and every leaf label on those faces is there, with a rep no larger than its key
            inside = [
                leaf
                for idx, leaf in zip(plan.indices(), leaves, strict=True)
                if all(a <= i < b for i, a, b in zip(idx, lo, hi, strict=True))
            ]
            names = np.concatenate([leaf.names for leaf in inside])
            keys = np.concatenate([leaf.reps for leaf in inside])
            pos = np.searchsorted(names, part.names)
            assert np.all(part.reps <= keys[pos])
            # each pair leaves the node: one end inside, one outside
            ends = np.unravel_index(part.pairs >> POSITION_BITS, plan.grid)
            within = np.ones(part.pairs.shape, bool)
            for axis in range(2):
                within &= (ends[axis] >= lo[axis]) & (ends[axis] < hi[axis])
            assert np.all(within.sum(axis=1) == 1)
        top_inputs = sum(p.names.size for p in parts)  # the last: the quarters'
    border_labels = sum(leaf.names.size for leaf in leaves)
    # the quarters' labels along the mid-lines: on 2 of the 30 chunk sides along each axis
    assert 0 < top_inputs < border_labels / 8


def test_pairs_given_twice_resolve_the_same():
    img = np.ones((6, 6, 6), np.uint8)  # one component through every face, edge and corner
    plan, graph = merge_graph(img, (3, 3, 3), 26)
    leaves = computed(graph, [("leaf", i) for i in plan.indices()])
    twice = [
        tree.Part(p.names, p.reps, p.faces, np.concatenate([p.pairs, p.pairs])) for p in leaves
    ]
    t = tree.Tree(plan.grid)
    lo, hi = t.box(1, (0, 0, 0))
    joins, _ = tree.up(twice, lo=lo, hi=hi, grid=plan.grid)
    assert np.all(joins.values["root"] == 0)  # the root is voxel 0 for every label
    roots = computed(graph, [("roots", i) for i in plan.indices()])
    assert all(np.all(r == 0) for r in roots)


def test_rows_go_up_to_where_their_component_closes_and_back_down_complete():
    # a row of 6 chunks of 3 voxels (depth 3): voxels 0-4 are one component across chunks 0
    # and 1; 10 lies inside chunk 3; 12 is alone on chunk 4's low face; 14-17 are one
    # component across chunks 4 and 5
    img = np.zeros((1, 18), np.uint8)
    img[0, [0, 1, 2, 3, 4, 10, 12, 14, 15, 16, 17]] = 1
    plan, graph = merge_graph(img, (1, 3), 4, stats=options(True))
    got = computed(graph, [(n, i) for i in plan.indices() for n in ("keys", "roots", "mstats")])
    keys, roots, merged = got[::3], got[1::3], got[2::3]
    assert [k.tolist() for k in keys] == [[0], [3], [], [], [12, 14], [15]]
    assert [r.tolist() for r in roots] == [[0], [0], [], [], [12, 14], [14]]
    # voxel counts of each border label's whole component
    assert [m["count"][:, 0].tolist() for m in merged] == [[5], [5], [], [], [1, 4], [4]]


@pytest.mark.parametrize("seed", range(6))
def test_least_linked_is_the_least_node_of_each_component(seed):
    """Against scipy's connected components: random graphs, chains visited in a random order
    (the most rounds of hooking), self-loops, isolated nodes and no edges at all."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from tilelabel.pipeline.tree import least_linked

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 500))
    cases = [rng.integers(0, n, (int(rng.integers(0, 2 * n)), 2)), np.empty((0, 2), np.int64)]
    order = rng.permutation(n)
    cases.append(np.stack([order[:-1], order[1:]], axis=1))
    for ends in cases:
        graph = coo_matrix((np.ones(len(ends)), (ends[:, 0], ends[:, 1])), shape=(n, n))
        ncomp, comp = connected_components(graph, directed=False)
        least = np.full(ncomp, n)
        np.minimum.at(least, comp, np.arange(n))
        np.testing.assert_array_equal(least_linked(n, ends), least[comp])
