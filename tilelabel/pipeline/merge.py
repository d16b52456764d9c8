"""Equivalences across chunk borders and their resolution into components.

Every local label on a border is named by its key (the global raster index of its first voxel),
which is unique in the whole volume; union-find over keys with the smallest key as root makes
each component's root its first voxel, which is what the numbering needs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tilelabel.connectivity import structure
from tilelabel.pipeline.local import Borders

_EMPTY_PAIRS = np.empty((0, 2), np.int64)


def _contact(faces: list[np.ndarray | None], step: Sequence[int], high: bool) -> np.ndarray:
    """The voxels of a chunk that touch its neighbour at ``step`` (a face, edge or corner).

    ``high`` selects the side towards ``step`` (the earlier chunk of the pair); the later chunk
    uses the opposite side.
    """
    nz = [a for a, s in enumerate(step) if s]
    first = nz[0]
    side = (step[first] > 0) == high
    face = faces[2 * first + int(side)]
    assert face is not None, "contact with a closed face"
    index: list[int | slice] = []
    for a in range(len(step)):
        if a == first:
            continue
        if step[a]:
            index.append(-1 if (step[a] > 0) == high else 0)
        else:
            index.append(slice(None))
    return face[tuple(index)]


def _shift_pairs(
    a: np.ndarray, b: np.ndarray, shift: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Label pairs (a[p], b[p + shift]) over the overlap, where both are foreground."""
    sa = tuple(slice(max(0, -s), n - max(0, s)) for s, n in zip(shift, a.shape, strict=True))
    sb = tuple(slice(max(0, s), n - max(0, -s)) for s, n in zip(shift, b.shape, strict=True))
    la, lb = a[sa].reshape(-1), b[sb].reshape(-1)
    both = (la != 0) & (lb != 0)
    return la[both], lb[both]


def _to_keys(labels: np.ndarray, borders: Borders) -> np.ndarray:
    return borders.keys[np.searchsorted(borders.ids, labels.astype(np.int64))]


def _unique_pairs(la: np.ndarray, lb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (a, b) label pairs. A face holds ~100 contacts per distinct pair, so this runs
    before the key lookup, on both labels packed in one uint64 (a 1-D sort; ``unique(axis=0)``
    sorts rows through a void view, some 20 times slower and holding the GIL)."""
    if la.size == 0:
        return la, lb
    if la.dtype.itemsize <= 4 and lb.dtype.itemsize <= 4:
        packed = np.unique((la.astype(np.uint64) << np.uint64(32)) | lb.astype(np.uint64))
        return packed >> np.uint64(32), packed & np.uint64(0xFFFFFFFF)
    both = np.unique(np.stack([la.astype(np.uint64), lb.astype(np.uint64)], axis=1), axis=0)
    return both[:, 0], both[:, 1]


def chunk_pairs(
    mine: Borders, neighbours: Sequence[tuple[tuple[int, ...], Borders]], connectivity: int
) -> np.ndarray:
    """Equivalent key pairs between a chunk and its forward neighbours, shape (k, 2), unique."""
    ndim = len(neighbours[0][0]) if neighbours else 0
    if not neighbours:
        return _EMPTY_PAIRS
    struct = structure(ndim, connectivity)
    out = []
    for step, other in neighbours:
        a = _contact(mine.faces, step, high=True)
        b = _contact(other.faces, step, high=False)
        free = [ax for ax, s in enumerate(step) if s == 0]
        las, lbs = [], []
        for shift in itertools.product((-1, 0, 1), repeat=len(free)):
            offset = list(step)
            for ax, s in zip(free, shift, strict=True):
                offset[ax] = s
            if not struct[tuple(o + 1 for o in offset)]:
                continue
            la, lb = _shift_pairs(a, b, shift)
            las.append(la)
            lbs.append(lb)
        if not las:  # no neighbour of the structure lies across this edge or corner
            continue
        la, lb = _unique_pairs(np.concatenate(las), np.concatenate(lbs))
        if la.size:
            out.append(np.stack([_to_keys(la, mine), _to_keys(lb, other)], axis=1))
    if not out:
        return _EMPTY_PAIRS
    return np.unique(np.concatenate(out), axis=0)


def resolve(pairs: Sequence[np.ndarray], *chunk_keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """Union-find over all border pairs; for each chunk, the root key of each of its border keys.

    Memory here is O(border labels): only labels on chunk borders ever reach this task.
    """
    allpairs = np.concatenate([p for p in pairs if p.size] or [_EMPTY_PAIRS])
    nodes = np.unique(allpairs)
    if nodes.size:
        ids = np.searchsorted(nodes, allpairs)
        graph = coo_matrix(
            (np.ones(len(ids), np.int8), (ids[:, 0], ids[:, 1])), shape=(nodes.size, nodes.size)
        )
        _, comp = connected_components(graph, directed=False)
        # nodes are sorted, so the first node of each component is its smallest key: its root
        _, first = np.unique(comp, return_index=True)
        root_of = nodes[first][comp]
    else:
        root_of = nodes
    out = []
    for keys in chunk_keys:
        # border labels that touch nothing across the border are roots of themselves
        roots = keys.copy()
        if nodes.size:
            pos = np.minimum(np.searchsorted(nodes, keys), nodes.size - 1)
            found = nodes[pos] == keys
            roots[found] = root_of[pos[found]]
        out.append(roots)
    return tuple(out)
