"""The input checksum a resumed run compares: defined on bytes, changed by any edit or move."""

from __future__ import annotations

import numpy as np
import pytest

from tilelabel.kernels.cpu.fingerprint import GOLDEN, _mix, fingerprint


def reference(block: np.ndarray) -> int:
    """The module's definition, word by word in Python."""
    data = np.ascontiguousarray(block).reshape(-1).view(np.uint8).tobytes()
    data += b"\0" * (-len(data) % 8)
    words = np.frombuffer(data, "<u8").tolist()
    mask = (1 << 64) - 1
    return sum(_mix((w + (i + 1) * GOLDEN) & mask) for i, w in enumerate(words)) & mask


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((0,), np.uint8),
        ((5,), np.uint8),
        ((3, 7, 5), np.uint8),
        ((16, 16), np.uint16),
        ((9, 11), np.float32),
        ((4, 4, 4), np.int64),
        ((7, 3), np.bool_),
    ],
)
def test_the_checksum_is_its_definition(shape, dtype):
    rng = np.random.default_rng(0)
    block = (rng.random(shape) * 100).astype(dtype)
    assert fingerprint(block) == reference(block)
    assert fingerprint(np.asfortranarray(block)) == fingerprint(block)  # C order, whatever held


def test_a_mirror_image_or_one_changed_voxel_changes_it():
    rng = np.random.default_rng(1)
    block = (rng.random((32, 32, 32)) < 0.3).astype(np.uint8)
    mirrored = block[::-1].copy()
    assert mirrored.sum() == block.sum()
    assert fingerprint(mirrored) != fingerprint(block)
    edited = block.copy()
    edited[5, 6, 7] ^= 1
    assert fingerprint(edited) != fingerprint(block)
    assert fingerprint(np.zeros(8, np.uint8)) != fingerprint(np.zeros(9, np.uint8))
