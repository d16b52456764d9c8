"""Where chunks touch: contacts, border pairs and the faces each border label touches."""

from __future__ import annotations

import itertools

import numba
import numpy as np
import pytest

from tests.conftest import summarize_block
from tilelabel.kernels.cpu.ops import shifted_pairs
from tilelabel.pipeline import borders


def test_contact_names_border_labels_by_position():
    img = np.zeros((4, 6), np.uint8)
    img[0, 0] = img[2, 1] = 1  # two labels of the left chunk (columns 0-2) on its top face
    img[1:3, 2] = 1  # the second one also touches the right chunk's side
    img[0, 3] = img[3, 4] = 1  # two labels of the right chunk; only the first touches the left
    left = summarize_block(img[:, :3], (0, 0), img.shape, ((False, False), (False, True)), 8)
    right = summarize_block(img[:, 3:], (0, 3), img.shape, ((False, False), (True, False)), 8)
    left, right = left.borders, right.borders
    # left: label 2 (first voxel (1, 2)) is its only border label; right: label 1 at (0, 3)
    np.testing.assert_array_equal(left.ids, [2])
    np.testing.assert_array_equal(right.ids, [1])
    np.testing.assert_array_equal(borders.contact(left, (0, 1), high=True), [0, 1, 1, 0])
    np.testing.assert_array_equal(borders.contact(right, (0, 1), high=False), [1, 0, 0, 0])
    # diagonal contact (1, 2)-(0, 3) under 8-connectivity: position 0 of chunk 0, 0 of chunk 1
    pairs = borders.chunk_pairs(
        left, 0, [((0, 1), borders.contact(right, (0, 1), high=False), 1)], 8
    )
    np.testing.assert_array_equal(pairs, [[0, 1 << borders.POSITION_BITS]])
    assert borders.chunk_pairs(left, 0, [((0, 1), np.zeros(4, np.uint32), 1)], 8).size == 0
    # the only open faces: the left chunk's high side, the right chunk's low side (axis 1)
    assert borders.face_mask(left).tolist() == [1 << 3]
    assert borders.face_mask(right).tolist() == [1 << 2]


def test_face_mask_marks_every_open_face_a_label_touches():
    img = np.zeros((5, 5, 5), np.uint8)
    img[0, 0, :] = 1  # a row along two faces (low z, low y) and across low and high x
    img[2, 2, 2] = 1  # inside: no border label
    img[4, 1:4, 4] = 1  # on the high z and high x faces
    every = ((True, True),) * 3
    mine = summarize_block(img, (5, 5, 5), (15, 15, 15), every, 26).borders
    assert mine.ids.size == 2
    bits = dict(zip(mine.ids.tolist(), borders.face_mask(mine).tolist(), strict=True))
    # label 1: the row (z 0, y 0): low z (bit 0), low y (bit 2), low and high x (bits 4, 5)
    assert bits[1] == 0b110101
    # label 3: z 4 (bit 1), x 4 (bit 5); y 1..3 touches neither y face
    assert bits[3] == 0b100010
    some = ((False, True), (False, False), (True, False))  # high z and low x open only
    mine = summarize_block(img, (5, 5, 5), (15, 15, 15), some, 26).borders
    bits = dict(zip(mine.ids.tolist(), borders.face_mask(mine).tolist(), strict=True))
    assert bits == {1: 1 << 4, 3: 1 << 1}


def _pairs_by_pass(a, b, shift, va=None, vb=None, delta=0):
    """(a[p], b[p + shift]) where both are foreground (and of one value, or of values at most
    ``delta`` apart), one pass over the whole overlap."""
    sa = tuple(slice(max(0, -s), n - max(0, s)) for s, n in zip(shift, a.shape, strict=True))
    sb = tuple(slice(max(0, s), n - max(0, -s)) for s, n in zip(shift, b.shape, strict=True))
    la, lb = a[sa].reshape(-1), b[sb].reshape(-1)
    both = (la != 0) & (lb != 0)
    if va is not None:
        both &= np.abs(va[sa].reshape(-1) - vb[sb].reshape(-1)) <= delta
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
    packed = shifted_pairs(a, b, shifts)
    assert packed.dtype == np.uint64 and np.all(packed[1:] > packed[:-1])  # sorted, distinct
    want = set().union(*(_pairs_by_pass(a, b, s) for s in shifts))
    assert _unpacked(packed) == want
    for shift in shifts:  # one shift alone, too
        assert _unpacked(shifted_pairs(a, b, [shift])) == _pairs_by_pass(a, b, shift)
    va, vb = (rng.integers(0, 3, shape).astype(np.uint16) for _ in range(2))  # multi-label
    want = set().union(*(_pairs_by_pass(a, b, s, va, vb) for s in shifts))
    assert _unpacked(shifted_pairs(a, b, shifts, va, vb)) == want
    va, vb = (rng.random(shape) * 3 for _ in range(2))  # continuous, delta 0.5
    want = set().union(*(_pairs_by_pass(a, b, s, va, vb, 0.5) for s in shifts))
    assert _unpacked(shifted_pairs(a, b, shifts, va, vb, np.float64(0.5))) == want


def _unpacked(packed):
    high, low = packed >> np.uint64(32), packed & np.uint64(0xFFFFFFFF)
    return set(zip(high.tolist(), low.tolist(), strict=True))


def test_warming_covers_the_types_a_merge_hands_the_kernels(monkeypatch):
    from tilelabel.kernels.cpu import ops as cpu_ops

    seen = {}

    def spy(name, kernel):
        def call(*args):
            seen.setdefault(name, set()).add(tuple(numba.typeof(a) for a in args))
            return kernel(*args)

        return call

    for name in ("_positions", "_shifted_pairs"):
        monkeypatch.setattr(cpu_ops, name, spy(name, getattr(cpu_ops, name)))
    cpu_ops.warm()
    warmed = dict(seen)
    seen.clear()
    img = np.zeros((6, 6, 6), np.uint8)
    img[1:5, 2:4, :] = 1
    every = ((True, True),) * 3
    mine, theirs = (
        summarize_block(img, (0, 0, 6 * k), (6, 6, 12), every, 26).borders for k in (0, 1)
    )
    contact = borders.contact(theirs, (0, 0, 1), high=False)
    assert borders.chunk_pairs(mine, 0, [((0, 0, 1), contact, 1)], 26).shape[0] > 0
    assert seen == warmed  # nothing that a run hands them is left to compile
