import numpy as np
import pytest
import zarr

from tilelabel.synth import random_block, random_volume, write_random_zarr


def numpy_block(shape, offset, block_shape, density, g, seed):
    """The generator as first written, in whole-array numpy: the volumes every benchmark and
    session digest was made from, which the numba generator must reproduce bit for bit."""

    def splitmix64(z):
        with np.errstate(over="ignore"):
            z = z + np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            return z ^ (z >> np.uint64(31))

    cells = [(s + g - 1) // g for s in shape]
    idx = [
        np.arange(o, o + b, dtype=np.int64) // g for o, b in zip(offset, block_shape, strict=True)
    ]
    flat = np.zeros(tuple(len(i) for i in idx), dtype=np.uint64)
    stride = 1
    for axis in range(len(shape) - 1, -1, -1):
        shp = [1] * len(shape)
        shp[axis] = -1
        flat = flat + (idx[axis].astype(np.uint64) * np.uint64(stride)).reshape(shp)
        stride *= cells[axis]
    h = splitmix64(flat ^ splitmix64(np.uint64(seed) + np.zeros(1, np.uint64)))
    u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return (u < density).astype(np.uint8)


@pytest.mark.parametrize(
    "shape, offset, block, density, g, seed",
    [
        ((13, 17, 11), (0, 0, 0), (13, 17, 11), 0.3, 1, 0),
        ((13, 17, 11), (5, 2, 7), (6, 9, 4), 0.3, 3, 4),
        ((4096, 4096, 4096), (3968, 128, 4000), (16, 24, 96), 0.2, 1, 4096),
        ((2048, 2048, 2048), (1000, 2000, 7), (9, 48, 33), 0.05, 2, 2048),
        ((300, 500), (17, 250), (100, 250), 0.5, 1, 7),
        ((301, 499), (0, 0), (301, 499), 0.4, 4, 2**40),
        ((64, 64, 64), (0, 0, 0), (64, 64, 64), 0.0, 1, 1),
        ((64, 64, 64), (0, 0, 0), (64, 64, 64), 1.0, 1, 1),
    ],
)
def test_blocks_equal_the_first_generator(shape, offset, block, density, g, seed):
    got = random_block(shape, offset, block, density, g, seed)
    assert got.dtype == np.uint8 and got.shape == block
    np.testing.assert_array_equal(got, numpy_block(shape, offset, block, density, g, seed))


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
