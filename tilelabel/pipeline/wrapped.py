"""The wrapped-axes join in memory: a whole labeled array's labels joined across its wrapped
faces (periodic boundaries, :mod:`tilelabel.periodic`).

The array is one chunk that neighbours itself: its faces are paired by the pipeline's own border
step (:func:`.borders.chunk_pairs`), the pairs resolved to each component's least label
(:func:`.tree.least_linked`), and the joined components numbered again by first voxel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilelabel.chunking import ChunkPlan, forward_steps
from tilelabel.dtypes import label_dtype
from tilelabel.pipeline.borders import chunk_pairs, contact
from tilelabel.pipeline.local import Borders, continuous_faces, face_planes, open_faces
from tilelabel.pipeline.tree import least_linked


def lut(
    be,
    labels: Any,
    n: int,
    wrap: tuple[int, ...],
    struct: np.ndarray,
    values: Any = None,
    delta: float | None = None,
):
    """``(table, count)``: for labels 1..n of a whole array (numbered by first voxel, on the
    backend ``be``'s device or the host), the lookup table (host, uint32 or uint64) that joins
    them across the ``wrap``ped axes' faces under the structure ``struct`` and numbers the
    joined components 1..count by first voxel; ``(None, n)`` where nothing joins. ``values``:
    the multi-label image, whose voxels join where equal, or with ``delta`` where they differ
    by at most that."""
    if not wrap or n == 0:
        return None, n
    shape = tuple(int(s) for s in labels.shape)
    plan = ChunkPlan(shape, tuple((s,) for s in shape), wrap=tuple(wrap))
    origin = (0,) * len(shape)
    faces, ids = open_faces(be, labels, plan.chunk(origin))
    own = None
    if delta is not None:  # continuous: the voxels' own values on the faces
        planes = face_planes(values, plan.chunk(origin), be.to_host)
        value_faces, d = continuous_faces(planes, values.dtype, delta)
        borders = Borders(faces, ids, ids, None, value_faces, d)
    elif values is not None:  # multi-label: the value of each label, from its face voxels
        own = np.zeros(ids.size, values.dtype)
        for face, vface in zip(faces, open_faces(be, values, plan.chunk(origin))[0], strict=True):
            if face is not None:
                fg = face != 0
                own[np.searchsorted(ids, face[fg])] = vface[fg]
    if delta is None:  # keys: labels are numbered by their first voxels
        borders = Borders(faces, ids, ids, own)
    steps = [s for s in forward_steps(len(shape)) if plan.neighbour(origin, s) is not None]
    contacts = [(s, contact(borders, s, high=False), 0) for s in steps]
    pairs = chunk_pairs(borders, 0, contacts, struct)  # chunk 0: names are positions in ids
    # each component's least position: its least label, the one whose first voxel is first
    root = least_linked(ids.size, pairs)
    moved = root != np.arange(ids.size)
    if not moved.any():
        return None, n
    kept = np.ones(n + 1, bool)
    kept[ids[moved]] = False
    table = np.cumsum(kept, dtype=label_dtype(n))
    table -= 1  # kept[0]: background stays 0
    table[ids[moved]] = table[ids[root[moved]]]
    return table, n - int(moved.sum())
