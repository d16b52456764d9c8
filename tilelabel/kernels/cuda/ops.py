"""Small array operations on a run's critical path (CUDA C in ``ops.cu``), in place of CuPy's
elementwise kernels, which NVRTC compiles in every fresh process: these ship compiled
(:mod:`.shipped`). Each runs on the current CuPy stream; CuPy is imported only when one runs.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tilelabel.kernels.cuda.compile import CTYPE, kernels

#: C++ spelling of an unsigned type of each width, for operations that only move bytes
WIDTH = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
#: C++ spelling of each value type a comparison with zero or a statistic reads
VALUE = {
    np.dtype(np.bool_): "unsigned char",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int8): "signed char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int16): "short",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int32): "int",
    np.dtype(np.uint64): "unsigned long long",
    np.dtype(np.int64): "long long",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}
#: the types :func:`full` fills
FILL = {np.dtype(np.int32): "int", np.dtype(np.uint64): "unsigned long long"}
_BYTES = ("tiles_gather", "tiles_scatter", "strided_copy", "gather")


def instantiations() -> dict[str, set[str]]:
    """Every name expression of ``ops.cu`` (:mod:`.shipped`)."""
    names = {"pack_bits", "unpack_bits", "pack_frames", "fingerprint"}
    names |= {f"fill<{t}>" for t in FILL.values()}
    names |= {f"nonzero<{v}>" for v in set(VALUE.values())}
    names |= {f"{k}<{w}>" for k, w in itertools.product(_BYTES, WIDTH.values())}
    names |= {f"lut_take<{t}, {w}>" for t, w in itertools.product(CTYPE.values(), WIDTH.values())}
    names |= {
        f"keep_values<{t}, {w}>" for t, w in itertools.product(CTYPE.values(), WIDTH.values())
    }
    return {"ops": names}


def _fn(name: str):
    return kernels("ops", (name,))[name]


def _flat(n: int) -> tuple:
    """(grid, block) of a grid-stride loop over ``n`` items."""
    return (max(min(-(-n // 256), 1 << 20), 1),), (256,)


def _words(a: Any) -> Any:
    """``a`` viewed as unsigned integers of its width."""
    return a.view(f"u{a.dtype.itemsize}")


def full(shape, value, dtype) -> Any:
    """``cupy.full`` for the types of :data:`FILL`."""
    import cupy as cp

    dtype = np.dtype(dtype)
    out = cp.empty(shape, dtype)
    if out.size:
        _fn(f"fill<{FILL[dtype]}>")(*_flat(out.size), (out, np.int64(out.size), dtype.type(value)))
    return out


def pack_bits(fg: Any) -> Any:
    """0/1 voxels, 8 to a byte in numpy's bit order (``numpy.packbits`` of the flat array)."""
    import cupy as cp

    fg = cp.ascontiguousarray(fg)
    out = cp.empty((fg.size + 7) // 8, np.uint8)
    _fn("pack_bits")(*_flat(out.size), (fg, np.int64(fg.size), out))
    return out


def unpack_bits(packed: Any, shape) -> Any:
    """The inverse of :func:`pack_bits`: a uint8 array of 0/1 of ``shape``."""
    import cupy as cp

    out = cp.empty(tuple(shape), np.uint8)
    packed = cp.ascontiguousarray(cp.asarray(packed))
    _fn("unpack_bits")(*_flat(out.size), (packed, np.int64(out.size), out))
    return out


def lut_take(labels: Any, lut: Any) -> Any:
    """``lut[labels]``, labels of uint32 or uint64 (a host ``lut`` is copied over)."""
    import cupy as cp

    lut = cp.asarray(lut)
    labels = cp.ascontiguousarray(cp.asarray(labels))
    if labels.dtype not in CTYPE or lut.dtype.itemsize not in WIDTH:
        return cp.take(lut, labels)
    out = cp.empty(labels.shape, lut.dtype)
    name = f"lut_take<{CTYPE[labels.dtype]}, {WIDTH[lut.dtype.itemsize]}>"
    args = (labels, np.int64(labels.size), _words(cp.ascontiguousarray(lut)), _words(out))
    _fn(name)(*_flat(out.size), args)
    return out


def keep_values(values: Any, labels: Any, keep: np.ndarray) -> Any:
    """``values`` where ``keep[labels]`` is set, else 0 (labels of uint32 or uint64; ``keep``
    a host bool table, copied over)."""
    import cupy as cp

    values = cp.ascontiguousarray(cp.asarray(values))
    labels = cp.ascontiguousarray(cp.asarray(labels))
    table = cp.asarray(np.ascontiguousarray(keep).view(np.uint8))
    if labels.dtype not in CTYPE:
        return cp.where(table[labels] != 0, values, values.dtype.type(0))
    out = cp.empty(values.shape, values.dtype)
    if out.size:
        name = f"keep_values<{CTYPE[labels.dtype]}, {WIDTH[values.dtype.itemsize]}>"
        args = (_words(values), labels, np.int64(out.size), table, _words(out))
        _fn(name)(*_flat(out.size), args)
    return out


def gather(values: Any, index: Any) -> Any:
    """``values.reshape(-1)[index]`` (a host ``index`` of raster indices is copied over)."""
    import cupy as cp

    values = cp.ascontiguousarray(values)
    index = cp.asarray(np.asarray(index, np.int64) if isinstance(index, np.ndarray) else index)
    out = cp.empty(index.shape, values.dtype)
    if out.size:
        name = f"gather<{WIDTH[values.dtype.itemsize]}>"
        args = (_words(values), index.astype(np.int64, copy=False), np.int64(out.size))
        _fn(name)(*_flat(out.size), (*args, _words(out)))
    return out


def nonzero(values: Any) -> Any:
    """``values != 0`` as a C-contiguous uint8 array of 0/1."""
    import cupy as cp

    values = cp.ascontiguousarray(values)
    if values.dtype not in VALUE:
        return (values != 0).view(np.uint8)
    out = cp.empty(values.shape, np.uint8)
    _fn(f"nonzero<{VALUE[values.dtype]}>")(*_flat(out.size), (values, np.int64(out.size), out))
    return out


def contiguous(a: Any) -> Any:
    """``cupy.ascontiguousarray`` of a view of up to 4 axes."""
    import cupy as cp

    if a.flags.c_contiguous or a.ndim > 4 or a.dtype.itemsize not in WIDTH:
        return cp.ascontiguousarray(a)
    out = cp.empty(a.shape, a.dtype)
    if not a.size:
        return out
    item = a.dtype.itemsize
    shape = (1,) * (4 - a.ndim) + tuple(a.shape)
    strides = (0,) * (4 - a.ndim) + tuple(s // item for s in a.strides)
    # the view's first element, as the kernel's base pointer: a raw pointer of its width
    base = cp.ndarray((1,), _words(out).dtype, a.data)
    args = (base, *map(np.int64, shape), *map(np.int64, strides), _words(out))
    _fn(f"strided_copy<{WIDTH[item]}>")(*_flat(out.size), args)
    return out


def _tile_geometry(shape, tile) -> tuple:
    """(D, H, W, TD, TH, TW, GH, GW, tiles) of a 1- to 3-axis block's storage tiles."""
    pad = 3 - len(shape)
    D, H, W = (1,) * pad + tuple(int(s) for s in shape)
    TD, TH, TW = (1,) * pad + tuple(int(t) for t in tile)
    GD, GH, GW = -(-D // TD), -(-H // TH), -(-W // TW)
    return D, H, W, TD, TH, TW, GH, GW, GD * GH * GW


def tiles_gather(block: Any, tile, stride: int) -> Any:
    """Every storage tile of a C-contiguous block of up to 3 axes, in C order of the tile grid,
    as ``(tiles, stride)`` elements: each tile in C order, zero past the block's edge and in the
    padding (``stride`` >= the tile's elements)."""
    import cupy as cp

    D, H, W, TD, TH, TW, GH, GW, n = _tile_geometry(block.shape, tile)
    out = cp.empty((n, stride), block.dtype)
    geometry = tuple(map(np.int64, (D, H, W, TD, TH, TW, GH, GW, n, stride)))
    name = f"tiles_gather<{WIDTH[block.dtype.itemsize]}>"
    _fn(name)(*_flat(out.size), (_words(cp.ascontiguousarray(block)), *geometry, _words(out)))
    return out


def tiles_scatter(tiles: Any, index, out: Any, tile) -> None:
    """Write the tiles ``tiles`` (``(n, stride)`` elements, tile ``k`` being tile ``index[k]``
    of the tile grid in C order) into the C-contiguous block ``out``, less what lies past its
    edge."""
    import cupy as cp

    D, H, W, TD, TH, TW, GH, GW, _ = _tile_geometry(out.shape, tile)
    index = cp.asarray(np.asarray(index, np.int64))
    n, stride = tiles.shape
    geometry = tuple(map(np.int64, (n, stride, D, H, W, TD, TH, TW, GH, GW)))
    name = f"tiles_scatter<{WIDTH[out.dtype.itemsize]}>"
    _fn(name)(*_flat(n * TD * TH * TW), (_words(tiles), index, *geometry, _words(out)))


def pack_frames(frames: Any, stride: int, sizes: Any, offsets: np.ndarray, total: int) -> Any:
    """Frames of ``sizes[k]`` bytes at ``frames[k * stride:]`` one after another (at the host
    ``offsets``), as one uint8 array of ``total`` bytes."""
    import cupy as cp

    out = cp.empty(max(total, 1), np.uint8)
    n = len(offsets)
    if n:
        args = (frames, np.int64(stride), sizes, cp.asarray(offsets.astype(np.int64)), out)
        _fn("pack_frames")((n,), (256,), args)
    return out[:total]


#: blocks of the checksum's grid: each adds its sum to the result once
_FINGERPRINT_BLOCKS = 1024


def fingerprint(block: Any) -> int:
    """:func:`tilelabel.kernels.cpu.fingerprint.fingerprint` of a device array, on the device."""
    import cupy as cp

    data = contiguous(block).reshape(-1).view(np.uint8)
    out = cp.zeros(1, np.uint64)
    if data.size:
        blocks = max(min(-(-data.size // (8 * 256)), _FINGERPRINT_BLOCKS), 1)
        _fn("fingerprint")((blocks,), (256,), (data, np.int64(data.size), out))
    return int(out.get()[0])
