"""Random test volumes in the style of YACCLAB's density/granularity sets (BUF/BKE paper, Sec. 6).

A volume of granularity ``g`` is a grid of g x g (x g) cells, each foreground with probability
``density``. Every cell's value comes from a counter-based hash of (seed, cell index), so any block
of the volume can be generated on its own and equals the same block of the whole volume: chunked
generation of volumes larger than memory gives the same data for any chunking.
"""

from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True)
def _splitmix64(x: np.uint64) -> np.uint64:
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


@numba.njit(cache=True, nogil=True)
def _fill(out, offset, cells, g, key, density):
    """``out[i, j, k]`` = foreground of cell ``(offset + (i, j, k)) // g`` of a grid of ``cells``:
    one pass without temporaries, many times faster than whole-array numpy (and threads of
    ``write_random_zarr`` run in parallel, not one at a time through numpy's allocations)."""
    scale = 1.0 / 9007199254740992.0  # 2^-53
    for i in range(out.shape[0]):
        c0 = np.uint64((offset[0] + i) // g)
        for j in range(out.shape[1]):
            c01 = (c0 * np.uint64(cells[1]) + np.uint64((offset[1] + j) // g)) * np.uint64(cells[2])
            for k in range(out.shape[2]):
                h = _splitmix64(np.uint64(c01 + np.uint64((offset[2] + k) // g)) ^ key)
                # top 53 bits -> uniform double in [0, 1)
                out[i, j, k] = np.float64(h >> np.uint64(11)) * scale < density


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
    lead = (1,) * (3 - len(shape))  # a 2D volume is one plane of a 3D grid
    cells = np.array(lead + tuple((int(s) + g - 1) // g for s in shape), dtype=np.int64)
    out = np.empty(lead + tuple(int(b) for b in block_shape), dtype=np.uint8)
    key = np.uint64(_splitmix64(np.uint64(seed)))  # numba returns a Python int
    _fill(out, np.array((0,) * len(lead) + tuple(offset), dtype=np.int64), cells, g, key, density)
    return out.reshape(tuple(block_shape))


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


@numba.njit(cache=True, nogil=True)
def _cell_hash(key, c0, c1, c2, salt):
    h = _splitmix64(np.uint64(c0) * np.uint64(0x100000001B3) ^ key)
    h = _splitmix64(h ^ (np.uint64(c1) * np.uint64(0xC2B2AE3D27D4EB4F)))
    return _splitmix64(h ^ np.uint64(c2) ^ (np.uint64(salt) << np.uint64(56)))


@numba.njit(cache=True, nogil=True)
def _seeds(lo, hi, cell, key, ids, background, planar):
    """Seed position (z, y, x) and value of every cell from ``lo`` to ``hi`` (inclusive)."""
    unit = 1.0 / 9007199254740992.0  # 2^-53
    n = hi - lo + 1
    pos = np.empty((n[0], n[1], n[2], 3), np.float64)
    val = np.empty((n[0], n[1], n[2]), np.uint64)
    for i in range(n[0]):
        for j in range(n[1]):
            for k in range(n[2]):
                a, b, c = lo[0] + i, lo[1] + j, lo[2] + k
                for d in range(3):
                    h = _cell_hash(key, a, b, c, d + 1) >> np.uint64(11)
                    pos[i, j, k, d] = ((a, b, c)[d] + h * unit) * cell
                if planar:
                    pos[i, j, k, 0] = 0.0
                bg = (_cell_hash(key, a, b, c, 4) >> np.uint64(11)) * unit < background
                val[i, j, k] = 0 if bg else _cell_hash(key, a, b, c, 5) % ids + 1
    return pos, val


@numba.njit(cache=True, nogil=True, parallel=True)
def _fill_cells(out, offset, cell, lo, pos, val, planar):
    """Each voxel takes the value of the nearest seed among the 3 x 3 x 3 cells of ``cell``
    voxels around its own (3 x 3 in 2D)."""
    reach = 0 if planar else 1
    for i in numba.prange(out.shape[0]):
        z = offset[0] + i
        for j in range(out.shape[1]):
            y = offset[1] + j
            for k in range(out.shape[2]):
                x = offset[2] + k
                best = 1e300
                value = np.uint64(0)
                for dz in range(-reach, reach + 1):
                    a = z // cell + dz - lo[0]
                    for dy in range(-1, 2):
                        b = y // cell + dy - lo[1]
                        for dx in range(-1, 2):
                            c = x // cell + dx - lo[2]
                            d = (pos[a, b, c, 0] - z) ** 2 + (pos[a, b, c, 1] - y) ** 2
                            d += (pos[a, b, c, 2] - x) ** 2
                            if d < best:
                                best = d
                                value = val[a, b, c]
                out[i, j, k] = value


def voronoi_seeds(
    n: int, cell: int = 16, ids: int = 4096, background: float = 0.1, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The seeds of ``voronoi_labels((n, n, n), cell, ids, background, seed)``: the position
    (z, y, x) and value of every cell that a voxel's nearest seed may lie in, from cell -1 to
    the one past the volume along each axis (arrays of shape (m, m, m, 3) and (m, m, m)), for
    those who make the volume on another device."""
    key = np.uint64(_splitmix64(np.uint64(seed)))
    lo = np.full(3, -1, np.int64)
    hi = np.full(3, (n - 1) // cell + 1, np.int64)
    return _seeds(lo, hi, cell, key, np.uint64(ids), background, False)


def voronoi_labels(
    shape: tuple[int, ...],
    cell: int = 16,
    ids: int = 4096,
    background: float = 0.1,
    seed: int = 0,
    dtype=np.uint32,
    offset: tuple[int, ...] | None = None,
    block_shape: tuple[int, ...] | None = None,
) -> np.ndarray:
    """A segmentation-like multi-label volume: Voronoi cells of one seed per ``cell``-voxel grid
    cell, each holding a value of 1..``ids`` (so cells of one value may touch, or lie apart) or,
    with probability ``background``, 0. Like :func:`random_block`, the block ``[offset, offset +
    block_shape)`` (default: the whole volume) equals that block of the whole volume."""
    if len(shape) not in (2, 3) or cell < 1 or ids < 1 or not 0.0 <= background <= 1.0:
        raise ValueError("voronoi_labels takes a 2D or 3D shape, cell >= 1, ids >= 1, 0..1")
    offset = (0,) * len(shape) if offset is None else tuple(offset)
    block_shape = tuple(shape) if block_shape is None else tuple(block_shape)
    lead = (1,) * (3 - len(shape))
    out = np.empty(lead + block_shape, np.uint64)
    key = np.uint64(_splitmix64(np.uint64(seed)))
    start = np.array((0,) * len(lead) + offset, np.int64)
    planar = len(shape) == 2
    lo = start // cell - 1
    hi = (start + np.array(out.shape) - 1) // cell + 1
    pos, val = _seeds(lo, hi, int(cell), key, np.uint64(ids), float(background), planar)
    _fill_cells(out, start, int(cell), lo, pos, val, planar)
    return out.reshape(block_shape).astype(dtype)
