import numpy as np
import pytest

from tilelabel.dtypes import UINT32_MAX, LabelOverflowError, label_dtype, row_count_dtype


def test_label_dtype():
    assert label_dtype(0) == np.uint32
    assert label_dtype(UINT32_MAX) == np.uint32
    assert label_dtype(UINT32_MAX + 1) == np.uint64
    assert label_dtype(5, "uint64") == np.uint64
    assert label_dtype(5, np.uint32) == np.uint32
    with pytest.raises(LabelOverflowError, match="do not fit in uint32"):
        label_dtype(UINT32_MAX + 1, "uint32")
    with pytest.raises(ValueError, match="dtype must be"):
        label_dtype(1, "int16")


@pytest.mark.parametrize(
    "row_length, dtype",
    [(1, np.uint8), (510, np.uint8), (511, np.uint16), (512, np.uint16), (131070, np.uint16)],
)
def test_row_count_dtype_holds_the_most_first_voxels_a_row_can_have(row_length, dtype):
    assert row_count_dtype(row_length) == dtype
    # every other voxel of the row, each a component of its own under any connectivity
    assert (row_length + 1) // 2 <= np.iinfo(dtype).max
    assert row_count_dtype(131071) == np.uint32
