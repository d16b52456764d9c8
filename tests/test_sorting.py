import numpy as np
import pytest

from tilelabel.sorting import runs, unique, unique_inverse


@pytest.mark.parametrize("dtype", [np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("size", [0, 1, 7, 5000])
def test_unique_matches_numpy(dtype, size):
    values = np.random.default_rng(size).integers(0, 50, size).astype(dtype)
    np.testing.assert_array_equal(unique(values), np.unique(values))
    uniq, first, inverse = unique_inverse(values)
    np.testing.assert_array_equal(uniq, np.unique(values))
    np.testing.assert_array_equal(values[first], uniq)
    np.testing.assert_array_equal(uniq[inverse], values)


def test_runs_marks_each_new_value():
    np.testing.assert_array_equal(
        runs(np.array([1, 1, 2, 5, 5, 5, 7])), [True, False, True, True, False, False, True]
    )
