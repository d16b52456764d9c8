"""Cutting a block into storage tiles, as a chunked store lays them out, on any array module.

A block (a processing chunk) covers a whole number of storage chunks, except at the volume's
far edges. A store keeps each storage chunk as one C-ordered run of bytes, edge chunks padded
to the full chunk shape with the fill value (zero here). :func:`tile_slabs` hands out those runs,
one slab of tiles (the tiles that share their first index) at a time; all-zero tiles are flagged,
since a store keeps no chunk that is all fill value.

Works on NumPy and CuPy arrays alike (``xp`` is the array's module).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tile_grid(shape: tuple[int, ...], tile: tuple[int, ...]) -> tuple[int, ...]:
    """Tiles per axis (the last one along an axis may be partial)."""
    if len(shape) != len(tile) or any(t < 1 for t in tile):
        raise ValueError(f"tile shape {tile} does not fit a block of shape {shape}")
    return tuple(_cdiv(s, t) for s, t in zip(shape, tile, strict=True))


def _any_nonzero(tiles: Any) -> Any:
    return tiles.reshape(tiles.shape[0], -1).any(axis=1)


def tile_slabs(
    block: Any,
    tile: tuple[int, ...],
    xp: Any,
    nonzero: Callable[[Any], Any] = _any_nonzero,
) -> Iterator[tuple[list, Any, Any]]:
    """For each slab of tiles along axis 0: ``(indices, tiles, nonzero)``.

    ``indices``: the tile index (within the block) of each tile of the slab, in C order;
    ``tiles``: a C-contiguous array of shape ``(len(indices), *tile)``, tile ``i`` being the
    store's bytes for ``indices[i]``; ``nonzero``: an array (on the block's device), true where
    the tile holds a nonzero value, as the ``nonzero`` function gives it for ``tiles``.
    """
    shape = tuple(block.shape)
    tile = tuple(int(t) for t in tile)
    grid = tile_grid(shape, tile)
    t0, rest = tile[0], tile[1:]
    padded = tuple(g * t for g, t in zip(grid[1:], rest, strict=True))
    # a slab (t0, G1*t1, G2*t2, ...) viewed as (t0, G1, t1, G2, t2, ...), then transposed to
    # (G1, G2, ..., t0, t1, t2, ...): tile after tile, each in C order
    split = [t0]
    for g, t in zip(grid[1:], rest, strict=True):
        split += [g, t]
    n = len(rest)
    order = [1 + 2 * k for k in range(n)] + [0] + [2 + 2 * k for k in range(n)]
    indices = list(itertools.product(*map(range, grid[1:])))
    for i in range(grid[0]):
        slab = block[i * t0 : (i + 1) * t0]
        if slab.shape[0] != t0 or tuple(slab.shape[1:]) != padded:
            full = xp.zeros((t0, *padded), dtype=block.dtype)
            full[tuple(slice(0, s) for s in slab.shape)] = slab
            slab = full
        tiles = xp.ascontiguousarray(slab.reshape(split).transpose(order))
        tiles = tiles.reshape((-1, *tile))
        yield [(i, *rest_idx) for rest_idx in indices], tiles, nonzero(tiles)
