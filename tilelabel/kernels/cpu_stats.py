"""Per-label statistics of a labeled chunk in one pass (numba): the CPU side of ``label_stats``.

The pass keeps one *pending* component in registers (the CPU form of HA4's aggregation before
memory): a voxel of the current label, or of the background, costs a compare and a few
branch-free updates (count, x sum, x range, intensity); y and z enter once per row; the per-label
arrays are read and written only when another label turns up. Big components therefore cost
almost nothing beyond reading the labels, and random noise no branch mispredictions.

Types: counts, boxes and coordinate sums are int64 and exact. A chunk's local coordinate sums
stay far below 2**63; the pipeline adds ``offset * count`` to make them global, which stays exact
while a component's coordinate sum along an axis is below 2**63 (for example any component of a
volume with fewer than 2**63 / (largest coordinate) voxels: a full 50,000^3 volume still fits).
Intensity sums, mins and maxes are float64 (exact for integer intensities below 2**53 per sum).
"""

from __future__ import annotations

import numba
import numpy as np

_BIG = np.iinfo(np.int64).max


@numba.njit(cache=True, nogil=True, inline="always")
def _flush(i, c, sz, sy, sx, lz, ly, lx, hz, hy, hx, count, lo, hi, csum):
    count[i] += c
    csum[i, 0] += sz
    csum[i, 1] += sy
    csum[i, 2] += sx
    lo[i, 0] = min(lo[i, 0], lz)
    lo[i, 1] = min(lo[i, 1], ly)
    lo[i, 2] = min(lo[i, 2], lx)
    hi[i, 0] = max(hi[i, 0], hz)
    hi[i, 1] = max(hi[i, 1], hy)
    hi[i, 2] = max(hi[i, 2], hx)


@numba.njit(cache=True, nogil=True)
def _geom(L, count, lo, hi, csum):
    # one pending component in registers: voxels of the current label (or background) cost a
    # compare and a few branch-free updates; y and z are folded in once per row; the per-label
    # arrays are touched only when another label turns up
    D, H, W = L.shape
    cur = L.dtype.type(0)
    c = sz = sy = sx = 0
    lz = ly = lx = _BIG
    hz = hy = hx = -1
    for z in range(D):
        for y in range(H):
            row = L[z, y]
            rc = 0
            for x in range(W):
                lab = row[x]
                m = lab == cur
                rc += m
                sx += x if m else 0
                lx = min(lx, x if m else _BIG)
                hx = max(hx, x if m else -1)
                if lab != cur and lab != 0:
                    if rc:
                        c += rc
                        sy += rc * y
                        sz += rc * z
                        ly, hy, lz, hz = min(ly, y), max(hy, y), min(lz, z), max(hz, z)
                    if cur != 0:
                        _flush(np.int64(cur) - 1, c, sz, sy, sx, lz, ly, lx, hz, hy, hx,
                               count, lo, hi, csum)  # fmt: skip
                    cur = lab
                    rc, c, sx, sy, sz = 1, 0, x, 0, 0
                    lx, hx, ly, hy, lz, hz = x, x, _BIG, -1, _BIG, -1
            if rc:
                c += rc
                sy += rc * y
                sz += rc * z
                ly, hy, lz, hz = min(ly, y), max(hy, y), min(lz, z), max(hz, z)
    if cur != 0:
        _flush(np.int64(cur) - 1, c, sz, sy, sx, lz, ly, lx, hz, hy, hx, count, lo, hi, csum)


@numba.njit(cache=True, nogil=True)
def _geom_intensity(L, V, count, lo, hi, csum, isum, imin, imax):
    # as _geom, with the intensity sum, min and max of the pending component in registers too
    D, H, W = L.shape
    cur = L.dtype.type(0)
    c = sz = sy = sx = 0
    lz = ly = lx = _BIG
    hz = hy = hx = -1
    s, mn, mx = 0.0, np.inf, -np.inf
    for z in range(D):
        for y in range(H):
            row = L[z, y]
            vrow = V[z, y]
            rc = 0
            for x in range(W):
                lab = row[x]
                v = np.float64(vrow[x])
                m = lab == cur
                rc += m
                sx += x if m else 0
                lx = min(lx, x if m else _BIG)
                hx = max(hx, x if m else -1)
                s += v if m else 0.0
                mn = min(mn, v if m else np.inf)
                mx = max(mx, v if m else -np.inf)
                if lab != cur and lab != 0:
                    if rc:
                        c += rc
                        sy += rc * y
                        sz += rc * z
                        ly, hy, lz, hz = min(ly, y), max(hy, y), min(lz, z), max(hz, z)
                    if cur != 0:
                        i = np.int64(cur) - 1
                        _flush(i, c, sz, sy, sx, lz, ly, lx, hz, hy, hx, count, lo, hi, csum)
                        isum[i] += s
                        imin[i] = min(imin[i], mn)
                        imax[i] = max(imax[i], mx)
                    cur = lab
                    rc, c, sx, sy, sz = 1, 0, x, 0, 0
                    lx, hx, ly, hy, lz, hz = x, x, _BIG, -1, _BIG, -1
                    s, mn, mx = v, v, v
            if rc:
                c += rc
                sy += rc * y
                sz += rc * z
                ly, hy, lz, hz = min(ly, y), max(hy, y), min(lz, z), max(hz, z)
    if cur != 0:
        i = np.int64(cur) - 1
        _flush(i, c, sz, sy, sx, lz, ly, lx, hz, hy, hx, count, lo, hi, csum)
        isum[i] += s
        imin[i] = min(imin[i], mn)
        imax[i] = max(imax[i], mx)


def empty_stats(n: int, ndim: int, intensity: bool) -> dict[str, np.ndarray]:
    """Identity elements of every field for ``n`` labels (what a label with no voxel has)."""
    big = np.iinfo(np.int64).max
    out = {
        "count": np.zeros((n, 1), np.int64),
        "lo": np.full((n, ndim), big, np.int64),
        "hi": np.full((n, ndim), -1, np.int64),
        "csum": np.zeros((n, ndim), np.int64),
    }
    if intensity:
        out["isum"] = np.zeros((n, 1), np.float64)
        out["imin"] = np.full((n, 1), np.inf)
        out["imax"] = np.full((n, 1), -np.inf)
    return out


def to_global(stats: dict[str, np.ndarray], offset) -> dict[str, np.ndarray]:
    """Chunk-local coordinates to global ones, in place: boxes shift, sums gain offset * count."""
    off = np.asarray(offset, np.int64)
    if off.any():
        stats["lo"] += off
        stats["hi"] += off
        stats["csum"] += stats["count"] * off
    return stats


def label_stats(labels: np.ndarray, n: int, offset=None, intensity=None) -> dict[str, np.ndarray]:
    """Statistics of labels 1..n of ``labels`` (2D or 3D, every label present at least once).

    Returns a dict of (n, k) arrays: ``count`` (n, 1) int64; ``lo`` / ``hi`` (n, ndim) int64, the
    inclusive box; ``csum`` (n, ndim) int64, coordinate sums; with ``intensity`` (an array of the
    same shape) also ``isum``, ``imin``, ``imax`` (n, 1) float64. Coordinates are shifted by
    ``offset`` (a chunk's position in the volume).
    """
    labels = np.asarray(labels)
    ndim = labels.ndim
    if ndim not in (2, 3):
        raise ValueError(f"label_stats takes 2D or 3D labels, got {ndim}D")
    out = empty_stats(n, 3, intensity is not None)
    L = np.ascontiguousarray(labels).reshape((1,) * (3 - ndim) + labels.shape)
    if n and L.size:
        cnt = out["count"].reshape(-1)
        if intensity is None:
            _geom(L, cnt, out["lo"], out["hi"], out["csum"])
        else:
            V = np.asarray(intensity)
            if V.shape != labels.shape:
                raise ValueError(f"intensity shape {V.shape} differs from labels {labels.shape}")
            if V.dtype == np.bool_:
                V = V.view(np.uint8)
            V = np.ascontiguousarray(V).reshape(L.shape)
            _geom_intensity(
                L,
                V,
                cnt,
                out["lo"],
                out["hi"],
                out["csum"],
                out["isum"].reshape(-1),
                out["imin"].reshape(-1),
                out["imax"].reshape(-1),
            )
    if ndim == 2:
        for name in ("lo", "hi", "csum"):
            out[name] = np.ascontiguousarray(out[name][:, 1:])
    if offset is not None:
        to_global(out, offset)
    return out
