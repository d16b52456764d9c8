"""Random test volumes in the style of YACCLAB's density/granularity sets (BUF/BKE paper, Sec. 6).

A volume of granularity ``g`` is a grid of g x g (x g) cells, each foreground with probability
``density``. Every cell's value comes from a counter-based hash of (seed, cell index), so any block
of the volume can be generated on its own and equals the same block of the whole volume: chunked
generation of volumes larger than memory gives the same data for any chunking.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def _check(shape, density, granularity) -> None:
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be within [0, 1], got {density}")
    if granularity < 1:
        raise ValueError(f"granularity must be >= 1, got {granularity}")
    if len(shape) not in (2, 3) or any(int(s) < 1 for s in shape):
        raise ValueError(f"shape must be 2D or 3D with positive sizes, got {tuple(shape)}")


def random_block(
    shape: tuple[int, ...],
    offset: tuple[int, ...],
    block_shape: tuple[int, ...],
    density: float,
    granularity: int = 1,
    seed: int = 0,
) -> np.ndarray:
    """The block ``[offset, offset + block_shape)`` of the volume ``random_volume(shape, ...)``."""
    _check(shape, density, granularity)
    g = int(granularity)
    cells = [(int(s) + g - 1) // g for s in shape]
    idx = [
        (np.arange(o, o + b, dtype=np.int64) // g) for o, b in zip(offset, block_shape, strict=True)
    ]
    flat = np.zeros(tuple(len(i) for i in idx), dtype=np.uint64)
    stride = 1
    for axis in range(len(shape) - 1, -1, -1):
        shp = [1] * len(shape)
        shp[axis] = -1
        flat = flat + (idx[axis].astype(np.uint64) * np.uint64(stride)).reshape(shp)
        stride *= cells[axis]
    with np.errstate(over="ignore"):
        h = _splitmix64(flat ^ _splitmix64(np.uint64(seed) + np.zeros(1, np.uint64)))
    # top 53 bits -> uniform double in [0, 1)
    u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return (u < density).astype(np.uint8)


def random_volume(
    shape: tuple[int, ...], density: float, granularity: int = 1, seed: int = 0
) -> np.ndarray:
    """A whole random volume (uint8 of 0/1) held in memory."""
    return random_block(tuple(shape), (0,) * len(shape), tuple(shape), density, granularity, seed)


def write_random_zarr(
    url: str,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    density: float,
    granularity: int = 1,
    seed: int = 0,
    overwrite: bool = False,
    zarr_format: int = 3,
    threads: int | None = None,
) -> None:
    """Write ``random_volume(shape, ...)`` to a new zarr array, one storage chunk at a time.

    Memory stays at a few chunks whatever the volume size.
    """
    import itertools
    import os
    from concurrent.futures import ThreadPoolExecutor

    import zarr

    from tilelabel.cores import usable_cores

    _check(shape, density, granularity)
    if len(chunks) != len(shape) or any(int(c) < 1 for c in chunks):
        raise ValueError(f"chunks {tuple(chunks)} must give one positive size per axis of {shape}")
    if not overwrite and os.path.exists(url):
        raise ValueError(f"output {url} already exists; pass --overwrite to replace it")
    arr = zarr.create_array(
        url,
        shape=shape,
        chunks=chunks,
        dtype="uint8",
        fill_value=0,
        zarr_format=zarr_format,
        overwrite=overwrite,
        attributes={
            "tilelabel_synth": {"density": density, "granularity": granularity, "seed": seed}
        },
    )
    grid = [range(0, s, c) for s, c in zip(shape, chunks, strict=True)]

    def one(offset: tuple[int, ...]) -> None:
        bs = tuple(min(c, s - o) for c, s, o in zip(chunks, shape, offset, strict=True))
        sl = tuple(slice(o, o + b) for o, b in zip(offset, bs, strict=True))
        arr[sl] = random_block(shape, offset, bs, density, granularity, seed)

    with ThreadPoolExecutor(threads or usable_cores()) as pool:
        for _ in pool.map(one, itertools.product(*grid)):
            pass
