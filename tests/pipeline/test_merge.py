"""The border merge on its own: contacts, pairs and resolve against scipy on the whole volume."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import ndimage

from tilelabel.connectivity import structure
from tilelabel.pipeline import merge
from tilelabel.pipeline.local import summarize
from tilelabel.pipeline.plan import forward_steps, plan_for_storage
from tilelabel.synth import random_volume


def merged_roots(img: np.ndarray, chunks: tuple[int, ...], conn: int):
    """Summaries of every chunk, then pairs and resolve as the pipeline's graph runs them."""
    plan = plan_for_storage(img.shape, (1,) * img.ndim, chunks)
    idxs = list(plan.indices())
    summaries = {}
    for idx in idxs:
        open_faces = tuple((idx[a] > 0, idx[a] < plan.grid[a] - 1) for a in range(img.ndim))
        summaries[idx] = summarize(
            img[plan.slices(idx)],
            str(idx),
            plan.offset(idx),
            img.shape,
            open_faces,
            "cpu",
            conn,
            None,
        )
    ordinal = {idx: i for i, idx in enumerate(idxs)}
    pairs = []
    for idx in idxs:
        nbs = [(s, nb) for s in forward_steps(img.ndim) if (nb := plan.neighbour(idx, s))]
        contacts = [
            (s, merge.contact(summaries[nb][0], s, high=False), ordinal[nb]) for s, nb in nbs
        ]
        pairs.append(merge.chunk_pairs(summaries[idx][0], ordinal[idx], contacts, conn))
    keys = [summaries[idx][1].keys for idx in idxs]
    return keys, merge.resolve(pairs, *keys), pairs


@pytest.mark.parametrize(
    "shape, chunks, conn",
    [
        ((24, 20, 18), (8, 10, 9), 26),
        ((24, 20, 18), (8, 10, 9), 18),
        ((24, 20, 18), (8, 5, 6), 6),
        ((40, 36), (10, 12), 8),
        ((40, 36), (7, 12), 4),
    ],
)
def test_roots_are_the_first_voxels_of_the_whole_volumes_components(shape, chunks, conn):
    for density in (0.3, 0.6):
        img = random_volume(shape, density, 1, seed=sum(shape) + int(density * 10))
        ref, _ = ndimage.label(img, structure(img.ndim, conn))
        flat = ref.reshape(-1)
        labels, first = np.unique(flat, return_index=True)
        first_of = dict(zip(labels.tolist(), first.tolist(), strict=True))
        keys, roots, _ = merged_roots(img, chunks, conn)
        assert sum(k.size for k in keys) > 0
        for k, r in zip(keys, roots, strict=True):
            expected = np.array([first_of[flat[key]] for key in k], np.int64)
            np.testing.assert_array_equal(r, expected)


def test_contact_names_border_labels_by_position():
    img = np.zeros((4, 6), np.uint8)
    img[0, 0] = img[2, 1] = 1  # two labels of the left chunk (columns 0-2) on its top face
    img[1:3, 2] = 1  # the second one also touches the right chunk's side
    img[0, 3] = img[3, 4] = 1  # two labels of the right chunk; only the first touches the left
    left = summarize(
        img[:, :3], "left", (0, 0), img.shape, ((False, False), (False, True)), "cpu", 8, None
    )
    right = summarize(
        img[:, 3:], "right", (0, 3), img.shape, ((False, False), (True, False)), "cpu", 8, None
    )
    # left: label 2 (first voxel (1, 2)) is its only border label; right: label 1 at (0, 3)
    np.testing.assert_array_equal(left[0].ids, [2])
    np.testing.assert_array_equal(right[0].ids, [1])
    np.testing.assert_array_equal(merge.contact(left[0], (0, 1), high=True), [0, 1, 1, 0])
    np.testing.assert_array_equal(merge.contact(right[0], (0, 1), high=False), [1, 0, 0, 0])
    # diagonal contact (1, 2)-(0, 3) under 8-connectivity: position 0 of chunk 0, 0 of chunk 1
    pairs = merge.chunk_pairs(
        left[0], 0, [((0, 1), merge.contact(right[0], (0, 1), high=False), 1)], 8
    )
    np.testing.assert_array_equal(pairs, [[0, 1 << merge.POSITION_BITS]])
    assert merge.chunk_pairs(left[0], 0, [((0, 1), np.zeros(4, np.uint32), 1)], 8).size == 0
    roots = merge.resolve([pairs], left[1].keys, right[1].keys)
    # keys: (1, 2) -> 8 on the left, (0, 3) -> 3 on the right; the smaller is the root of both
    assert left[1].keys.tolist() == [8] and right[1].keys.tolist() == [3]
    assert roots[0].tolist() == [3] and roots[1].tolist() == [3]


def test_pairs_given_twice_resolve_the_same():
    img = np.ones((6, 6, 6), np.uint8)  # one component through every face, edge and corner
    keys, roots, pairs = merged_roots(img, (3, 3, 3), 26)
    assert all(np.all(r == 0) for r in roots)  # the root is voxel 0 for every chunk
    again = merge.resolve(pairs + pairs, *keys)
    for r, a in zip(roots, again, strict=True):
        np.testing.assert_array_equal(r, a)


def _pairs_by_pass(a, b, shift):
    """(a[p], b[p + shift]) where both are foreground, one pass over the whole overlap."""
    sa = tuple(slice(max(0, -s), n - max(0, s)) for s, n in zip(shift, a.shape, strict=True))
    sb = tuple(slice(max(0, s), n - max(0, -s)) for s, n in zip(shift, b.shape, strict=True))
    la, lb = a[sa].reshape(-1), b[sb].reshape(-1)
    both = (la != 0) & (lb != 0)
    return set(zip(la[both].tolist(), lb[both].tolist(), strict=True))


@pytest.mark.parametrize("shape", [(), (1,), (7,), (5, 9), (1, 6), (3, 4, 5)])
@pytest.mark.parametrize("density", [0.0, 0.1, 0.6, 1.0])
def test_shifted_pairs_equal_a_pass_per_shift(shape, density):
    rng = np.random.default_rng(len(shape) * 10 + int(density * 10))
    a, b = (
        np.where(rng.random(shape) < density, rng.integers(1, 50, shape), 0).astype(np.uint32)
        for _ in range(2)
    )
    shifts = list(itertools.product((-1, 0, 1), repeat=len(shape)))
    la, lb = merge._shift_pairs(a, b, shifts)
    assert la.dtype == lb.dtype == np.uint32 and la.shape == lb.shape
    want = set().union(*(_pairs_by_pass(a, b, s) for s in shifts))
    assert set(zip(la.tolist(), lb.tolist(), strict=True)) == want
    for shift in shifts:  # one shift alone, too
        la, lb = merge._shift_pairs(a, b, [shift])
        assert set(zip(la.tolist(), lb.tolist(), strict=True)) == _pairs_by_pass(a, b, shift)
