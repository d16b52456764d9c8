import numpy as np
import pytest
import zarr

from tilelabel.synth import random_block, random_volume, write_random_zarr


def test_blocks_equal_the_whole_volume():
    whole = random_volume((13, 17, 11), 0.3, 3, seed=4)
    block = random_block((13, 17, 11), (5, 2, 7), (6, 9, 4), 0.3, 3, seed=4)
    np.testing.assert_array_equal(block, whole[5:11, 2:11, 7:11])


def test_density_and_granularity():
    v = random_volume((256, 256), 0.2, 1, seed=1)
    assert abs(v.mean() - 0.2) < 0.01
    g = random_volume((64, 64), 0.5, 4, seed=2)
    cells = g.reshape(16, 4, 16, 4)
    assert (cells == cells[:, :1, :, :1]).all()  # constant within each 4x4 cell
    assert not np.array_equal(
        random_volume((32, 32), 0.5, seed=1), random_volume((32, 32), 0.5, seed=2)
    )


def test_write_random_zarr(tmp_path):
    write_random_zarr(str(tmp_path / "v.zarr"), (20, 30), (8, 16), 0.4, 2, seed=3, zarr_format=2)
    arr = zarr.open_array(str(tmp_path / "v.zarr"))
    assert arr.chunks == (8, 16) and arr.metadata.zarr_format == 2
    np.testing.assert_array_equal(arr[...], random_volume((20, 30), 0.4, 2, seed=3))
    with pytest.raises(ValueError, match="already exists"):
        write_random_zarr(str(tmp_path / "v.zarr"), (20, 30), (8, 16), 0.4)
    with pytest.raises(ValueError, match="density"):
        random_volume((4, 4), 1.5)
