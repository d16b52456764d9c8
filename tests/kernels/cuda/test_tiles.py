"""Cutting blocks into storage tiles as a chunked store lays them out (NumPy here; the GPU
encoder runs the same code on CuPy, tested in test_nvcomp)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tilelabel.kernels.cuda.tiles import tile_grid, tile_slabs


@pytest.mark.parametrize(
    "shape, tile",
    [
        ((8, 12, 16), (4, 4, 8)),  # whole tiles
        ((9, 13, 5), (4, 4, 8)),  # partial tiles on every axis, one wider than the block
        ((7, 10, 6), (7, 10, 6)),  # one tile: the block itself
        ((30, 17), (8, 5)),
        ((1, 40), (3, 16)),
    ],
)
def test_tiles_are_the_stores_chunks(shape, tile):
    rng = np.random.default_rng(sum(shape))
    block = rng.integers(0, 5, shape, dtype=np.uint32)
    block[: min(shape[0], tile[0])] = 0  # a slab of all-zero tiles
    grid = tile_grid(shape, tile)
    padded = np.zeros([g * t for g, t in zip(grid, tile, strict=True)], np.uint32)
    padded[tuple(slice(0, s) for s in shape)] = block
    seen = []
    for indices, tiles, nonzero in tile_slabs(block, tile, np):
        assert tiles.flags.c_contiguous and tiles.shape == (len(indices), *tile)
        for k, idx in enumerate(indices):
            want = padded[tuple(slice(i * t, (i + 1) * t) for i, t in zip(idx, tile, strict=True))]
            np.testing.assert_array_equal(tiles[k], want)
            assert bool(nonzero[k]) == bool(want.any())
        seen += indices
    assert seen == list(itertools.product(*map(range, grid)))  # C order, each once


def test_tile_of_another_rank_is_refused():
    with pytest.raises(ValueError, match="does not fit"):
        tile_grid((4, 4), (2, 2, 2))
