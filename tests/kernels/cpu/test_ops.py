"""The CPU helpers around the kernels (:mod:`tilelabel.kernels.cpu.ops`)."""

from __future__ import annotations

import numpy as np
import pytest

from tilelabel.kernels.cpu.ops import count_runs


def runs_by_numpy(x: np.ndarray, binary: bool) -> int:
    fg = x != 0
    starts = fg.copy()
    starts[..., 1:] &= ~fg[..., :-1] if binary else x[..., 1:] != x[..., :-1]
    return int(np.count_nonzero(starts))


@pytest.mark.parametrize("seed", range(3))
def test_count_runs_per_row_of_one_value_or_of_foreground(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        shape = tuple(int(s) for s in rng.integers(1, 9, int(rng.integers(1, 4))))
        x = rng.integers(-1, 3, shape).astype(rng.choice([np.int8, np.uint16, np.float32]))
        for binary in (False, True):
            want = runs_by_numpy(x, binary)
            assert count_runs(x, binary) == want
            assert count_runs(x, binary, limit=2) == min(want, 2)
    assert count_runs(np.zeros((0, 4), bool)) == 0
    assert count_runs(np.array([[True, True, False, True]])) == 2


def test_keep_values_clears_the_voxels_of_labels_not_kept():
    from tilelabel.kernels.cpu.ops import keep_values

    rng = np.random.default_rng(4)
    labels = rng.integers(0, 6, (5, 7, 3)).astype(np.uint32)
    keep = np.array([False, True, False, True, True, False])
    for dtype in (np.int8, np.uint16, np.float32, np.bool_, np.int64):
        values = rng.integers(-3, 9, labels.shape).astype(dtype)
        got = keep_values(values, labels, keep)
        assert got.dtype == values.dtype
        np.testing.assert_array_equal(got, np.where(keep[labels], values, 0))
