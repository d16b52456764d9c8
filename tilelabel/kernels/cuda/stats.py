"""Per-label statistics on the GPU (CUDA C in ``kernels/cuda/stats.cu``).

One pass over the labels (and intensity): warps aggregate runs of equal labels in registers and
keep one pending component per warp before any global atomic (see ``stats.cu``). Returns the same
host arrays as :func:`tilelabel.kernels.cpu.stats.label_stats`. Each (label type, intensity type)
instantiation is compiled on first use and kept per device (:mod:`.compile`); CuPy is
imported only when a kernel runs.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from tilelabel.kernels.cpu.stats import empty_stats, to_global
from tilelabel.kernels.cuda import ops
from tilelabel.kernels.cuda.compile import CTYPE, kernels

#: the intensity types the kernel reads (a bool image is read as its uint8 view)
_VALUE = {dtype: c for dtype, c in ops.VALUE.items() if dtype != np.bool_}
_SIGN = np.uint64(1 << 63)


def _name(t: str, v: str, has_i: bool, has_m: bool) -> str:
    flags = ", ".join("true" if f else "false" for f in (has_i, has_m))
    return f"label_stats<{t}, {v}, {flags}>"


def _kernel(t: str, v: str, has_i: bool, has_m: bool):
    name = _name(t, v, has_i, has_m)
    return kernels("stats", (name,))[name]


def instantiations() -> dict[str, set[str]]:
    """Every name expression the statistics can launch (:mod:`.shipped`): without an intensity
    image the value type is ``unsigned char``."""
    names = {_name(t, "unsigned char", False, m) for t in CTYPE.values() for m in (False, True)}
    for t, v, m in itertools.product(CTYPE.values(), _VALUE.values(), (False, True)):
        names.add(_name(t, v, True, m))
    return {"stats": names}


@functools.cache
def _warps(device: int) -> int:
    """Warps that keep a device busy: 64 per multiprocessor."""
    import cupy as cp

    return 64 * cp.cuda.Device(device).attributes["MultiProcessorCount"]


def _decode(keys: np.ndarray) -> np.ndarray:
    """Order-preserving uint64 keys (``ord_key`` in stats.cu) back to float64."""
    keys = keys.astype(np.uint64)
    pos = (keys & _SIGN) != 0
    bits = np.where(pos, keys ^ _SIGN, ~keys)
    return bits.view(np.float64)


def _intensity_device(intensity, shape):
    import cupy as cp

    from tilelabel.kernels.cuda.transfer import upload

    v = upload(intensity)
    if tuple(v.shape) != tuple(shape):
        raise ValueError(f"intensity shape {tuple(v.shape)} differs from labels {tuple(shape)}")
    if v.dtype == np.bool_:
        v = v.view(np.uint8)
    elif np.dtype(v.dtype) not in _VALUE:
        v = v.astype(np.float64)
    return cp.ascontiguousarray(v)


def label_stats_device(
    labels, n: int, offset=None, intensity=None, moments: bool = False
) -> dict[str, np.ndarray]:
    """Statistics of labels 1..n of a CuPy (or numpy) label array, as host numpy arrays (the
    fields of :func:`tilelabel.kernels.cpu.stats.label_stats`)."""
    import cupy as cp

    L = cp.ascontiguousarray(cp.asarray(labels))
    ndim = L.ndim
    if ndim not in (2, 3):
        raise ValueError(f"label_stats takes 2D or 3D labels, got {ndim}D")
    has_i = intensity is not None
    V = _intensity_device(intensity, L.shape) if has_i else None
    if n == 0 or L.size == 0:
        out = empty_stats(n, ndim, has_i, moments)
        return out if offset is None else to_global(out, offset)
    if np.dtype(L.dtype) not in CTYPE:
        L = L.astype(np.uint64)
    D, H, W = (1, *L.shape) if ndim == 2 else L.shape
    rows = D * H
    warps = min(rows, _warps(cp.cuda.Device().id))
    per = -(-rows // warps)
    warps = -(-rows // per)
    threads = 256
    blocks = -(-warps * 32 // threads)

    count = cp.zeros(n, np.uint64)
    csum = cp.zeros((3, n), np.int64)
    lo = ops.full((3, n), np.iinfo(np.int32).max, np.int32)
    hi = ops.full((3, n), -1, np.int32)
    if has_i:
        isum = cp.zeros(n, np.float64)
        imin = ops.full(n, np.iinfo(np.uint64).max, np.uint64)
        imax = cp.zeros(n, np.uint64)
        vname = _VALUE[np.dtype(V.dtype)]
    else:
        isum = imin = imax = cp.empty(1, np.uint64)
        V = cp.empty(1, np.uint8)
        vname = "unsigned char"
    m2 = cp.zeros((6, n), np.int64) if moments else cp.empty(1, np.int64)
    isq = cp.zeros(n, np.float64) if moments and has_i else cp.empty(1, np.float64)
    i64 = np.int64
    _kernel(CTYPE[np.dtype(L.dtype)], vname, has_i, moments)(
        (blocks,),
        (threads,),
        (L, V, i64(H), i64(W), i64(rows), i64(per), i64(n), count, csum, lo, hi, isum, imin, imax)
        + (m2, isq),
    )
    axes = slice(1, 3) if ndim == 2 else slice(0, 3)
    out = {
        "count": cp.asnumpy(count).astype(np.int64).reshape(n, 1),
        "lo": np.ascontiguousarray(cp.asnumpy(lo[axes]).T.astype(np.int64)),
        "hi": np.ascontiguousarray(cp.asnumpy(hi[axes]).T.astype(np.int64)),
        "csum": np.ascontiguousarray(cp.asnumpy(csum[axes]).T),
    }
    if has_i:
        out["isum"] = cp.asnumpy(isum).reshape(n, 1)
        out["imin"] = _decode(cp.asnumpy(imin)).reshape(n, 1)
        out["imax"] = _decode(cp.asnumpy(imax)).reshape(n, 1)
    if moments:
        # 2D labels lie in plane z = 0: their pairs are the (y, x) ones
        pick = slice(3, 6) if ndim == 2 else slice(0, 6)  # a slice: no kernel to compile
        out["m2"] = np.ascontiguousarray(cp.asnumpy(m2[pick]).T)
        if has_i:
            out["isq"] = cp.asnumpy(isq).reshape(n, 1)
    if offset is None and not moments:
        return out
    return to_global(out, (0,) * ndim if offset is None else offset)
