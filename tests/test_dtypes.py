import numpy as np
import pytest

from tilelabel.dtypes import UINT32_MAX, LabelOverflowError, label_dtype


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
