"""cc3d's functions with tilelabel underneath: ``import tilelabel.cc3d as cc3d`` is the only
change a user of connected-components-3d makes.

Names, signatures, defaults, output dtypes and numbering are cc3d's:

1. :func:`connected_components` labels each distinct nonzero value on its own (``binary_image``
   or bool input: nonzero is foreground; ``delta``: neighbours whose values differ by at most
   ``delta`` join), in raster order of the components' first voxels, in Fortran order for a
   Fortran-ordered array. The output dtype is cc3d's automatic one (uint16 while the runs of
   foreground are fewer than 2^16 - 1, then uint32, then uint64) unless ``out_dtype`` says.
2. :func:`dust`, :func:`largest_k`, :func:`statistics` and :func:`each` work on its labels as
   cc3d's do; :func:`contacts` and :func:`region_graph` give the touching pairs of labels,
   :func:`voxel_connectivity_graph` and :func:`color_connectivity_graph` the voxel graph.
3. :func:`connected_components_stack` labels a volume handed over as a sequence of slabs
   through a zarr array, chunk by chunk (cc3d's writes a crackle file instead).

numpy in, numpy out; :func:`connected_components`, :func:`dust` and :func:`largest_k` take
CuPy arrays (on the GPU) and dask arrays (chunk by chunk) too. A numpy array is labeled on
every usable core (:mod:`tilelabel.kernels.cpu.slabs`). Where cc3d 4.1.1 strays from its own
rule, this module keeps the rule: binary 2D images (cc3d splits some components and labels some
background), 2D images at 8-connectivity with ``delta`` > 0, and the contact counts at an
image's edge at 8 and 26 (cc3d counts some voxel pairs there more than once). Not supported:
``out_file`` (a memory map of the output; :func:`tilelabel.label_zarr` writes volumes larger
than memory) and ``max_labels`` (accepted, as cc3d ignores it too).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal, overload

import numpy as np

from tilelabel import dispatch

__all__ = [
    "DimensionError",
    "connected_components",
    "dust",
    "largest_k",
    "statistics",
    "each",
    "connected_components_stack",
    "estimate_provisional_labels",
    "contacts",
    "region_graph",
    "voxel_connectivity_graph",
    "color_connectivity_graph",
]

Connectivity = Literal[4, 6, 8, 18, 26]
_OUT_DTYPES = (np.uint16, np.uint32, np.uint64)


class DimensionError(ValueError):
    """An array of a rank cc3d does not label (it labels 1D, 2D and 3D arrays)."""


def _connectivity(ndim: int, connectivity: int, periodic: bool = False) -> int:
    """cc3d's connectivity for an array of rank ``ndim``, as a neighbour count of that rank: a
    2D array takes the 3D names too (6 is 4; 18 and 26 are 8)."""
    c = int(connectivity)
    if ndim == 3:
        if c not in (6, 18, 26):
            raise ValueError(
                f"Only 6, 18, and 26 connectivities are supported for 3D images. Got: {c}"
            )
    elif c not in (4, 8, 6, 18, 26):
        raise ValueError(
            f"Only 4, 8, and 6, 18, 26 connectivities are supported for 2D images. Got: {c}"
        )
    if periodic and c in (18, 26) and ndim == 3:
        raise ValueError(f"periodic_boundary is not yet implemented for {c}-connectivity.")
    return c if ndim == 3 else (4 if c in (4, 6) else 8)


def _oriented(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """``x`` as a C-ordered 2D or 3D array (a 1D one a row of a 3D one, as cc3d takes it), and
    whether it came in Fortran order (then it is its transpose: cc3d numbers a
    Fortran-ordered array in Fortran order)."""
    if x.ndim == 0 or x.ndim > 3:
        raise DimensionError(f"Only 1D, 2D, and 3D arrays supported. Got: {x.ndim}")
    fortran = x.ndim > 1 and x.flags.f_contiguous and not x.flags.c_contiguous
    work = x.T if fortran else np.ascontiguousarray(x)
    return (work.reshape(1, 1, -1) if work.ndim == 1 else work), fortran  # 1D: as cc3d, 3D


def _restored(labels: np.ndarray, shape: tuple[int, ...], fortran: bool) -> np.ndarray:
    """Labels of :func:`_oriented`'s array in the input's shape and order."""
    return labels.T if fortran else labels.reshape(shape)


def estimate_provisional_labels(data: np.ndarray) -> tuple[int, int, int]:
    """cc3d's estimate of the provisional labels of ``data``: ``(runs, first, last)``, the runs
    of one value along its rows (the last axis of a C-ordered array, the first of a
    Fortran-ordered one) and the first and last rows that hold foreground (-1 where none)."""
    from tilelabel.kernels.cpu.ops import count_runs

    x = np.asarray(data)
    # cc3d's own order is Fortran's: an array that is both (one axis past 1) is read so too
    work, _ = _oriented(x.T if x.ndim > 1 and x.flags.f_contiguous else x)
    rows = np.flatnonzero((work != 0).any(axis=-1).reshape(-1))
    if rows.size == 0:
        return 0, -1, -1
    return count_runs(work), int(rows[0]), int(rows[-1])


def _out_dtype(
    out_dtype: Any, work: np.ndarray, binary: bool, n: int, conn: int, shape: tuple[int, ...]
) -> np.dtype:
    if out_dtype is not None:
        dt = np.dtype(out_dtype)
        if dt not in [np.dtype(d) for d in _OUT_DTYPES]:
            raise ValueError(
                f"Explicitly defined out_dtype ({dt}) must be one of: np.uint16, np.uint32, "
                "np.uint64"
            )
        if n > np.iinfo(dt).max:
            raise ValueError(f"{n} components do not fit out_dtype {dt}")
        return dt
    # cc3d's choice: by its estimate of provisional labels, the runs of one value; for a
    # binary image, a bound of its shape alone
    from tilelabel.kernels.cpu.ops import count_runs

    def estimate(limit: int) -> int:
        return _binary_bound(shape, conn) if binary else count_runs(work, False, limit)

    if max(estimate(0xFFFF), n) < 0xFFFF:
        return np.dtype(np.uint16)
    if work.size < 0xFFFFFFFF or max(estimate(0xFFFFFFFF), n) < 0xFFFFFFFF:
        return np.dtype(np.uint32)
    return np.dtype(np.uint64)


def _binary_bound(shape: tuple[int, ...], conn: int) -> int:
    """cc3d 4.1.1's bound on the labels of a binary image, which sets its output dtype: the
    voxels of the shape rounded up to even sides, over 2, 4 or 8 (connectivity 6, 18, 26), plus
    1; in 2D over 2 or 4 (8 and 18, 26), in 1D over 2 (26); else the voxels themselves.
    ``shape``: the input's, ``conn``: the connectivity as given. Found by matching cc3d's
    dtypes over shapes either side of 2^16."""
    even = int(np.prod([s + (s & 1) for s in shape], dtype=np.int64))
    divisor = {1: {26: 2}, 2: {8: 2, 18: 2, 26: 4}, 3: {6: 2, 18: 4, 26: 8}}[len(shape)]
    if conn not in divisor:
        return int(np.prod(shape, dtype=np.int64))
    return even // divisor[conn] + 1


@overload
def connected_components(
    data: Any,
    max_labels: int = ...,
    connectivity: Connectivity = ...,
    return_N: Literal[False] = ...,
    delta: float = ...,
    out_dtype: Any = ...,
    out_file: Any = ...,
    periodic_boundary: bool = ...,
    binary_image: bool = ...,
) -> np.ndarray: ...
@overload
def connected_components(
    data: Any,
    max_labels: int = ...,
    connectivity: Connectivity = ...,
    *,
    return_N: Literal[True],
    delta: float = ...,
    out_dtype: Any = ...,
    out_file: Any = ...,
    periodic_boundary: bool = ...,
    binary_image: bool = ...,
) -> tuple[np.ndarray, int]: ...
def connected_components(
    data: Any,
    max_labels: int = -1,
    connectivity: Connectivity = 26,
    return_N: bool = False,
    delta: float = 0,
    out_dtype: Any = None,
    out_file: Any = None,
    periodic_boundary: bool = False,
    binary_image: bool = False,
):
    """Label the connected components of ``data``, as ``cc3d.connected_components``.

    Each distinct nonzero value is a class of its own (bool input or ``binary_image``: nonzero
    is foreground); with ``delta`` > 0, neighbours join where their values differ by at most
    ``delta``. Components are numbered 1..N in raster order of their first voxel (Fortran
    order for a Fortran-ordered array). ``connectivity``: 4 or 8 in 2D (6 is 4, 18 and 26 are
    8), 6, 18 or 26 in 3D; ``periodic_boundary`` wraps every axis (4, 8 and 6 only, as cc3d).
    ``max_labels`` is ignored, as cc3d ignores it. Returns the labels (and with ``return_N``
    their count). A CuPy array is labeled on the GPU, a dask array chunk by chunk (uint32 or
    uint64 unless ``out_dtype`` says).
    """
    if out_file is not None:
        raise NotImplementedError(
            "out_file (a memory-mapped output) is not supported: tilelabel.label_zarr writes "
            "labels larger than memory to a zarr array"
        )
    if delta < 0:
        raise ValueError(f"delta must be at least 0, got {delta}")
    if dispatch.kind(data) != "numpy":
        return _connected_lazy(
            data, connectivity, return_N, delta, out_dtype, periodic_boundary, binary_image
        )
    x = np.asarray(data)
    if x.size == 0:
        labels = np.zeros(x.shape, np.dtype(out_dtype or np.uint16))
        return (labels, 0) if return_N else labels
    work, fortran = _oriented(x)
    conn = _connectivity(work.ndim, connectivity, periodic_boundary)
    binary = bool(binary_image) or x.dtype == np.bool_
    labels, n = _label(work, conn, delta, binary, periodic_boundary)
    dt = _out_dtype(out_dtype, work, binary, n, int(connectivity), x.shape)
    labels = _restored(labels.astype(dt, copy=False), x.shape, fortran)
    return (labels, n) if return_N else labels


def _label(
    work: np.ndarray, conn: int, delta: float, binary: bool, periodic: bool
) -> tuple[np.ndarray, int]:
    """``(labels, n)`` of a C-ordered 2D or 3D array, cc3d's way."""
    from tilelabel.api import label

    wrap = tuple(range(work.ndim)) if periodic else None
    if binary:
        return label(work, conn, backend="cpu", wrap_axes=wrap)
    if delta > 0 or work.dtype.kind == "f":  # floats: NaN is a component of each voxel
        from tilelabel.kernels.cpu.continuous import label_delta

        if periodic:
            raise NotImplementedError(
                "periodic_boundary is supported for integer input with delta 0 only"
            )
        return label_delta(work, conn, delta)
    return label(work, conn, backend="cpu", multilabel=True, wrap_axes=wrap)


def _connected_lazy(data, connectivity, return_N, delta, out_dtype, periodic, binary_image):
    """:func:`connected_components` of a CuPy or dask array, through :func:`tilelabel.label`."""
    from tilelabel.api import label

    if data.ndim not in (2, 3):
        raise DimensionError(f"Only 2D and 3D CuPy or dask arrays are supported. Got: {data.ndim}")
    conn = _connectivity(data.ndim, connectivity, periodic)
    binary = bool(binary_image) or data.dtype == np.bool_
    continuous = not binary and (delta > 0 or data.dtype.kind == "f")
    if continuous and periodic:
        raise NotImplementedError("periodic_boundary is not yet implemented continuous data.")
    wrap = tuple(range(data.ndim)) if periodic else None
    dtype = "auto" if out_dtype is None else str(np.dtype(out_dtype))
    if dtype == "uint16":
        dtype = "auto"
    step = float(delta) if continuous else None
    labels, n = label(data, conn, multilabel=not binary, delta=step, wrap_axes=wrap, dtype=dtype)
    if out_dtype is not None:
        labels = labels.astype(np.dtype(out_dtype))
    return (labels, n) if return_N else labels


def _counts(labels: np.ndarray) -> np.ndarray:
    """Voxels per label value 0..max of a label image (non-negative integers)."""
    flat = np.ascontiguousarray(labels).reshape(-1)
    if flat.dtype.kind == "i":
        flat = flat.view(f"u{flat.dtype.itemsize}")
    return np.bincount(flat, minlength=1) if flat.size else np.zeros(1, np.int64)


def _mask(labels: np.ndarray, drop: np.ndarray) -> np.ndarray:
    """Where ``labels`` holds a value whose entry in the bool table ``drop`` is set."""
    from tilelabel.kernels.cpu.ops import apply_lut

    flat = np.ascontiguousarray(labels)
    return apply_lut(flat, drop.view(np.uint8)).view(np.bool_).reshape(labels.shape)


def _as_unsigned(img: np.ndarray) -> np.ndarray:
    """cc3d's view of a signed image: unsigned of its width (bool and unsigned as they are)."""
    if img.dtype.kind == "i":
        return img.view(f"u{img.dtype.itemsize}")
    return img


@overload
def dust(
    img: np.ndarray,
    threshold: Any,
    connectivity: Connectivity = ...,
    in_place: bool = ...,
    binary_image: bool = ...,
    precomputed_ccl: bool = ...,
    invert: bool = ...,
    return_N: Literal[False] = ...,
) -> np.ndarray: ...
@overload
def dust(
    img: np.ndarray,
    threshold: Any,
    connectivity: Connectivity = ...,
    in_place: bool = ...,
    binary_image: bool = ...,
    precomputed_ccl: bool = ...,
    invert: bool = ...,
    *,
    return_N: Literal[True],
) -> tuple[np.ndarray, int]: ...
def dust(
    img: np.ndarray,
    threshold: Any,
    connectivity: Connectivity = 26,
    in_place: bool = False,
    binary_image: bool = False,
    precomputed_ccl: bool = False,
    invert: bool = False,
    return_N: bool = False,
):
    """Set to 0 the connected components of ``img`` smaller than ``threshold`` voxels (a
    ``(lower, upper)`` pair: those outside ``[lower, upper)``), keeping the others' values, as
    ``cc3d.dust``; ``invert`` keeps only those instead. ``precomputed_ccl``: ``img`` is
    labels already. With ``return_N``, also the number of components kept. A CuPy array is
    dusted on the GPU, a dask array chunk by chunk (lazily; ``in_place`` does not apply)."""
    if dispatch.kind(img) != "numpy":
        return _dust_lazy(img, threshold, connectivity, in_place, binary_image, precomputed_ccl,
                          invert, return_N)  # fmt: skip
    orig = img.dtype
    out = _as_unsigned(img)
    if not in_place:
        out = np.copy(out)
    if precomputed_ccl:
        labels, n = out, int(out.max(initial=0))
    else:
        labels, n = connected_components(
            out, connectivity=connectivity, return_N=True, binary_image=bool(binary_image)
        )
    sizes = _counts(labels)
    sizes = np.pad(sizes, (0, max(n + 1 - sizes.size, 0)))
    ids = np.arange(sizes.size)
    if isinstance(threshold, tuple | list):
        drop = ~((threshold[0] <= sizes) & (sizes < threshold[1]))
    else:
        drop = sizes < threshold
    drop &= (ids >= 1) & (ids <= n)
    dropped = int(np.count_nonzero(drop))
    kept = dropped if invert else n - dropped
    if dropped == 0:
        if invert:
            out = np.zeros(out.shape, dtype=out.dtype, order="F")
        return (out, kept) if return_N else out
    if invert:
        drop = ~drop
    out[_mask(labels, drop)] = 0
    out = out.view(orig)
    return (out, kept) if return_N else out


def largest_k(
    img: np.ndarray,
    k: int,
    connectivity: Connectivity = 26,
    delta: float = 0,
    return_N: bool = False,
    binary_image: bool = False,
    precomputed_ccl: bool = False,
):
    """The ``k`` largest connected components of ``img``, as ``cc3d.largest_k``: numbered
    1..k from the smallest kept to the largest (ties as cc3d's ``np.argpartition`` breaks
    them); ``k == 1`` gives a bool mask. With ``return_N``, also the number kept. A CuPy
    array is labeled on the GPU, a dask array chunk by chunk (lazily; of equal sizes, the
    component whose first voxel comes first counts as the larger there)."""
    if k < 0:
        raise ValueError(f"k must be at least 0, got {k}")
    if dispatch.kind(img) != "numpy":
        return _largest_lazy(img, k, connectivity, delta, return_N, binary_image, precomputed_ccl)
    order = "C" if img.flags.c_contiguous else "F"
    if k == 0:
        return np.zeros(img.shape, dtype=np.uint16, order=order)
    if precomputed_ccl:
        labels, n = np.copy(img, order="F"), int(img.max(initial=0))
    else:
        labels, n = connected_components(
            img, connectivity=connectivity, return_N=True, delta=delta,
            binary_image=bool(binary_image),
        )  # fmt: skip
    if n <= k:
        return (labels, n) if return_N else labels
    counts = _counts(labels)
    counts = np.pad(counts, (0, max(n + 1 - counts.size, 0))).astype(np.uint32)
    if k == 1:
        out = labels == (np.argmax(counts[1:]) + 1)
        return (out, 1) if return_N else out
    keep = np.argpartition(counts[1:], len(counts) - k - 1)[-k:] + 1
    keep = sorted(keep, key=lambda i: counts[i])
    lut = np.zeros(counts.size, labels.dtype)
    lut[np.asarray(keep, np.int64)] = np.arange(1, len(keep) + 1)
    from tilelabel.kernels.cpu.ops import apply_lut

    out = apply_lut(np.ascontiguousarray(labels), lut).reshape(labels.shape)
    if not labels.flags.c_contiguous:
        out = np.asfortranarray(out)
    return (out, len(keep)) if return_N else out


def _largest_lazy(img, k, connectivity, delta, return_N, binary, precomputed):
    """:func:`largest_k` of a CuPy or dask array: where there are more than ``k`` components
    (a dask array's count computed first), :func:`tilelabel.label`'s ``largest_k`` numbered
    by size (1 the largest), turned to cc3d's numbering (1 the smallest kept)."""
    from tilelabel.api import label

    if precomputed:
        raise NotImplementedError("precomputed_ccl is supported for numpy arrays only")
    xp = dispatch.module(img)
    if k == 0:  # the array alone, as cc3d's (and the numpy path's), return_N or not
        return np.zeros_like(img, dtype=np.uint16)  # (numpy's function takes each type)
    conn = _connectivity(img.ndim, connectivity)
    multilabel = not binary and img.dtype != np.bool_
    continuous = multilabel and (delta > 0 or img.dtype.kind == "f")
    kwargs = {"multilabel": multilabel, "delta": float(delta) if continuous else None}
    labels, n = label(img, conn, **kwargs)
    n = int(n.compute()) if dispatch.is_dask(img) else int(n)
    if n > k:
        labels, _ = label(img, conn, largest_k=k, order="size", **kwargs)
        if k == 1:
            labels = labels == 1
        else:
            top = labels.dtype.type(k + 1)
            labels = xp.where(labels != 0, top - labels, xp.zeros((), labels.dtype))
        n = k
    return (labels, n) if return_N else labels


def _dust_lazy(img, threshold, connectivity, in_place, binary, precomputed, invert, return_N):
    """:func:`dust` of a CuPy or dask array: the components in the size range found by
    :func:`tilelabel.label`'s size filter (the labels' own sizes, for ``precomputed`` CuPy
    labels), the others' voxels set to 0 (or, with ``invert``, theirs)."""
    from tilelabel.api import label

    xp = dispatch.module(img)
    lo, hi = threshold if isinstance(threshold, tuple | list) else (threshold, None)
    lo = max(int(lo), 1)
    hi = None if hi is None else int(hi)
    if precomputed:
        if not dispatch.is_cupy(img):
            raise NotImplementedError("precomputed_ccl is supported for numpy and CuPy arrays")
        sizes = xp.bincount(img.reshape(-1).astype(xp.int64, copy=False))
        inside = (sizes >= lo) & (sizes < hi if hi is not None else True)
        inside[0] = False
        found = int(xp.count_nonzero(sizes[1:]))
        kept, n = inside[img], int(xp.count_nonzero(inside))
    else:
        conn = _connectivity(img.ndim, connectivity)
        multilabel = not binary and img.dtype != np.bool_
        labels, n = label(img, conn, multilabel=multilabel, min_size=lo,
                          max_size=None if hi is None else hi - 1)  # fmt: skip
        kept = labels != 0
        found = label(img, conn, multilabel=multilabel)[1] if invert and return_N else 0
    if invert:
        kept = (img != 0) & ~kept
        n = found - n
    if in_place and dispatch.is_cupy(img):
        img[~kept] = 0
        out = img
    else:
        out = xp.where(kept, img, xp.zeros((), img.dtype))
    return (out, n) if return_N else out


@overload
def statistics(out_labels: np.ndarray, no_slice_conversion: Literal[False] = ...) -> dict: ...
@overload
def statistics(out_labels: np.ndarray, no_slice_conversion: Literal[True]) -> dict: ...
def statistics(out_labels: np.ndarray, no_slice_conversion: bool = False) -> dict:
    """Voxel counts, bounding boxes and centroids of every label value 0..max of
    ``out_labels``, background included, as ``cc3d.statistics``: ``voxel_counts`` (uint32),
    ``bounding_boxes`` (a tuple of slices per label, None where it is absent; or with
    ``no_slice_conversion`` an array of inclusive ``min, max`` per axis, the dtype's largest
    value and 0 where absent) and ``centroids`` (float64, NaN where absent)."""
    from tilelabel.kernels.cpu.stats import label_stats

    labels = np.asarray(out_labels)
    if labels.size == 0:
        return {"voxel_counts": None, "bounding_boxes": None, "centroids": None}
    if labels.ndim == 1:
        labels = labels.reshape(-1, 1)
    if labels.ndim not in (2, 3):
        raise DimensionError(f"Only 1D, 2D, and 3D arrays supported. Got: {labels.ndim}")
    flat = _as_unsigned(labels)
    n = int(flat.max(initial=0))
    # the background is a label too: the kernels' pass over labels 1..n+1
    shifted = flat.astype(np.uint64) + np.uint64(1)
    s = label_stats(shifted, n + 1)
    counts = s["count"][:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        centroids = s["csum"] / counts[:, None]
    box_dtype = np.uint16 if max(labels.shape) < (1 << 16) else np.uint32
    present = counts > 0
    lo = np.where(present[:, None], s["lo"], np.iinfo(box_dtype).max).astype(box_dtype)
    hi = np.where(present[:, None], s["hi"], 0).astype(box_dtype)
    boxes = np.stack([lo, hi], axis=2).reshape(n + 1, -1)
    out = {"voxel_counts": counts.astype(np.uint32), "bounding_boxes": boxes}
    out["centroids"] = centroids.astype(np.float64)
    if not no_slice_conversion:
        out["bounding_boxes"] = [
            tuple(slice(int(a), int(b) + 1) for a, b in zip(lo[i], hi[i], strict=True))
            if present[i]
            else None
            for i in range(n + 1)
        ]
    return out


def each(
    labels: np.ndarray, binary: bool = False, in_place: bool = False
) -> Iterator[tuple[int, np.ndarray]]:
    """``(label, image)`` for every nonzero label of ``labels`` in ascending order, as
    ``cc3d.each``: the image holds only that label (as bool with ``binary``, else its value
    in the labels' dtype), in the labels' memory order. ``in_place`` hands out one read-only
    buffer, rewritten for each label (much faster; copy what is kept)."""
    x = np.asarray(labels)
    order = "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
    flat = x.reshape(-1, order=order)
    where = np.argsort(flat, kind="stable")
    values = flat[where]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    ends = np.r_[starts[1:], values.size]
    dtype = np.bool_ if binary else x.dtype
    shared = np.zeros(x.shape, dtype, order=order) if in_place else None
    for s, e in zip(starts, ends, strict=True):
        if values[s] == 0:
            continue
        idx = where[s:e]
        img = shared if in_place else np.zeros(x.shape, dtype, order=order)
        view = img.reshape(-1, order=order)  # a view: the image is contiguous in that order
        img.flags.writeable = True
        view[idx] = True if binary else values[s]
        if in_place:
            img.flags.writeable = False
        yield int(values[s]), img
        if in_place:
            img.flags.writeable = True
            view[idx] = 0


def connected_components_stack(
    stacked_images: Iterable[np.ndarray],
    connectivity: Literal[6, 26] = 26,
    return_N: bool = False,
    binary_image: bool = False,
    *,
    out: str | None = None,
):
    """Label a volume larger than memory handed over as 3D slabs in order along the last axis
    (cc3d's z), as ``cc3d.connected_components_stack``: each slab is written into a zarr array
    (at ``out``, a path or URL, or a temporary directory) and the whole is labeled chunk by
    chunk by :func:`tilelabel.label_zarr`. Returns the labels as a zarr array (and with
    ``return_N`` their count), where cc3d returns a crackle array."""
    import tempfile

    import zarr

    from tilelabel.api import label_zarr

    if connectivity not in (6, 26):
        raise ValueError(f"Connectivity must be 6 or 26. Got: {connectivity}")
    base = out or tempfile.mkdtemp(prefix="tilelabel-stack-")
    src, dst = f"{base}/input.zarr", f"{base}/labels.zarr"
    arr = None
    z = 0
    for image in stacked_images:
        image = np.asarray(image)
        if image.ndim != 3:
            raise DimensionError(f"every slab must be 3D, got {image.ndim}D")
        if binary_image:
            image = image != 0
        if arr is None:
            arr = zarr.create_array(
                src, shape=image.shape, dtype=image.dtype, chunks=image.shape, overwrite=True
            )
        else:
            arr.resize(image.shape[:2] + (z + image.shape[2],))
        arr[:, :, z : z + image.shape[2]] = image
        z += image.shape[2]
    if arr is None:
        raise ValueError("stacked_images is empty")
    n = label_zarr(src, dst, connectivity=connectivity, multilabel=not binary_image, overwrite=True)
    labels = zarr.open_array(dst, mode="r")
    return (labels, n) if return_N else labels


def _contacts(labels: Any, connectivity: int, anisotropy: Any = None):
    """``(pairs, counts, areas)`` of a label image: NumPy on the CPU, CuPy on the GPU, dask
    chunk by chunk (:func:`_contacts_dask`)."""
    from tilelabel.kernels.cpu.contacts import contacts as kernel
    from tilelabel.kernels.cpu.contacts import totals

    kind = dispatch.kind(labels)
    x = labels if kind != "numpy" else np.asarray(labels)
    if x.ndim not in (2, 3):
        raise DimensionError(f"Only 2D and 3D arrays supported. Got: {x.ndim}")
    if x.ndim == 2 and int(connectivity) in (6, 18, 26):  # cc3d: a 3D image of one plane
        x = x[..., None]
    spacing = None if anisotropy is None else tuple(float(a) for a in anisotropy)[: x.ndim]
    conn = _connectivity(x.ndim, connectivity)
    if kind == "numpy":
        return kernel(x, conn, spacing)
    if kind == "cupy":
        from tilelabel.kernels.backends import get_backend

        pairs, classes = get_backend("cuda").contacts(x, conn)
        return (pairs, *totals(classes, spacing))
    return _contacts_dask(x, conn, spacing)


def _contacts_dask(x: Any, conn: int, spacing):
    """The contacts of a dask label image: the region graph of its labels' connected pieces
    (:func:`tilelabel.pipeline.lazy.contacts_dask`), each piece's value its label, summed per
    pair of values (pieces of one value touch only through the graph's own neighbours, and
    are no pair of cc3d's)."""
    from tilelabel.pipeline.lazy import contacts_dask
    from tilelabel.pipeline.local import Labeler

    if x.dtype.kind not in "biu":
        raise ValueError(f"labels must be of an integer or bool dtype, got {x.dtype}")
    backend = "cuda" if dispatch.is_cupy(x._meta) else "cpu"
    labeler = Labeler(backend, conn, multilabel=True)
    df = contacts_dask(x, labeler=labeler, connectivity=conn, spacing=spacing)
    df = df[df.value_a != df.value_b]
    a = np.minimum(df.value_a.to_numpy(), df.value_b.to_numpy())
    b = np.maximum(df.value_a.to_numpy(), df.value_b.to_numpy())
    kind = np.int64 if x.dtype.kind == "i" else np.uint64
    groups = df.assign(a=a, b=b).groupby(["a", "b"], sort=True)[["count", "area"]].sum()
    pairs = np.stack(
        [groups.index.get_level_values(0), groups.index.get_level_values(1)], axis=1
    ).astype(kind)
    return pairs.reshape(-1, 2), groups["count"].to_numpy(np.int64), groups["area"].to_numpy()


def contacts(
    labels: np.ndarray,
    connectivity: Connectivity = 26,
    surface_area: bool = True,
    anisotropy: tuple[float, ...] = (1, 1, 1),
) -> dict[tuple[int, int], float]:
    """The touching pairs of labels of ``labels`` and their contact, as ``cc3d.contacts``:
    ``{(a, b): value}`` with a < b, the value the face area between them (faces of voxels
    scaled by ``anisotropy``, one weight per axis; edges and corners weigh 0) or, without
    ``surface_area``, the number of touching voxel pairs under ``connectivity`` (each once:
    cc3d counts some pairs at the image's edge more than once at 8 and 26)."""
    pairs, counts, areas = _contacts(labels, connectivity, anisotropy if surface_area else None)
    values = areas if surface_area else counts.astype(np.float64)
    rows = zip(pairs.tolist(), values.tolist(), strict=True)
    return {(int(a), int(b)): float(v) for (a, b), v in rows}


def region_graph(labels: np.ndarray, connectivity: Connectivity = 26) -> set[tuple[int, int]]:
    """The pairs ``(a, b)``, a < b, of labels that touch under ``connectivity``, as
    ``cc3d.region_graph``."""
    pairs, _, _ = _contacts(labels, connectivity)
    return {(int(a), int(b)) for a, b in pairs.tolist()}


def voxel_connectivity_graph(data: np.ndarray, connectivity: Connectivity = 26) -> np.ndarray:
    """Per voxel, the bits of the neighbours of the same value, as
    ``cc3d.voxel_connectivity_graph`` (:mod:`tilelabel.kernels.cpu.graphs` gives the bits), in
    Fortran order whatever the input's, as cc3d returns it."""
    from tilelabel.kernels.cpu.graphs import voxel_connectivity_graph as kernel

    data = np.asarray(data)
    if data.ndim not in (1, 2, 3):
        raise DimensionError(f"Only 1D, 2D, and 3D arrays supported. Got: {data.ndim}")
    return np.asfortranarray(kernel(data, connectivity))


def color_connectivity_graph(vcg: np.ndarray, connectivity: Connectivity = 26, return_N=False):
    """The components of a voxel connectivity graph, as ``cc3d.color_connectivity_graph``:
    voxels joined where their bits say so, numbered by first voxel (and with ``return_N``,
    their count)."""
    from tilelabel.kernels.cpu.graphs import color_connectivity_graph as kernel

    vcg = np.asarray(vcg)
    if vcg.ndim not in (2, 3):
        raise DimensionError(f"Only 2D, and 3D arrays supported. Got: {vcg.ndim}")
    labels, n = kernel(vcg, connectivity)
    return (labels, n) if return_N else labels
