"""The Python API: :func:`label` for in-memory and dask arrays, :func:`label_zarr` zarr to zarr."""

from __future__ import annotations

from typing import Any

import numpy as np

from tilelabel import connectivity as conn_mod
from tilelabel.dtypes import label_dtype
from tilelabel.kernels.backends import get_backend, resolve_backend
from tilelabel.validate import check_input


def _is_dask(x: Any) -> bool:
    return type(x).__module__.startswith("dask.array")


def _is_cupy(x: Any) -> bool:
    return type(x).__module__.startswith("cupy")


def _prepare(x: Any, connectivity, structure, caller: str) -> tuple[Any, int]:
    """The checks every in-memory entry point makes: an array, labelable, and its connectivity."""
    if isinstance(x, list | tuple):
        x = np.asarray(x)
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise TypeError(f"{caller}() takes a numpy, CuPy or dask array, got {type(x).__name__}")
    check_input(tuple(x.shape), x.dtype)
    return x, conn_mod.normalize(x.ndim, connectivity, structure)


def label(
    x: Any,
    connectivity: int | None = None,
    structure: np.ndarray | None = None,
    *,
    backend: str = "auto",
    algorithm: str | None = None,
    dtype: str = "auto",
    min_size: int | None = None,
    max_size: int | None = None,
):
    """Label the connected components of ``x`` (nonzero is foreground).

    Parameters
    ----------
    x
        A numpy, CuPy or dask array, 2D or 3D, of bool, integer or float type.
    connectivity
        scikit-image style rank (1..ndim) or a neighbour count (4/8 in 2D, 6/18/26 in 3D).
        The default is full connectivity (8 / 26), as is ``structure=None``.
    structure
        One of scipy's standard structuring elements, as an alternative to ``connectivity``.
    backend
        ``"cpu"``, ``"cuda"`` or ``"auto"`` (CuPy arrays always use ``"cuda"``; otherwise
        ``"auto"`` uses a GPU when one is usable).
    algorithm
        A kernel name from :func:`tilelabel.kernels.algorithms`; None picks the fastest known.
    dtype
        ``"auto"`` (uint32 unless the labels may not fit), ``"uint32"`` or ``"uint64"``.
    min_size, max_size
        Keep only components of at least ``min_size`` / at most ``max_size`` voxels (inclusive);
        the kept ones are numbered 1..n in the same raster order, which equals
        ``scipy.ndimage.label`` of the volume without the dropped components.

    Returns
    -------
    (labels, n)
        Labels equal to ``scipy.ndimage.label(x != 0, structure)``: 1..n in raster order of each
        component's first voxel. Numpy in, numpy out; CuPy in, CuPy out; dask in, a lazy dask
        array and a lazy 0-d dask array for the count.
    """
    from tilelabel.pipeline import stats as stats_mod

    opts = stats_mod.options(min_size=min_size, max_size=max_size)
    x, conn = _prepare(x, connectivity, structure, "label")
    if _is_dask(x):
        from tilelabel.pipeline.lazy import label_dask

        return label_dask(x, conn, resolve_backend(backend), algorithm, dtype, min_size, max_size)
    if _is_cupy(x):
        if backend not in ("auto", "cuda"):
            raise ValueError(f"a CuPy array is labeled with backend 'cuda', not {backend!r}")
        name = "cuda"
    else:
        x = np.asarray(x)
        name = resolve_backend(backend)
    if x.dtype.kind == "f" and bool((x != x).any()):
        raise ValueError("input contains NaN; NaN is neither foreground nor background")
    be = get_backend(name)
    bound = conn_mod.max_components(tuple(x.shape), conn)
    labels, n = be.label(x, conn, label_dtype(bound), algorithm)
    if opts is not None:
        count = be.label_stats(labels, n, (0,) * x.ndim)["count"][:, 0]
        lut = stats_mod.filter_lut(count, opts)
        n = int(lut.max(initial=0))
        lut = lut.astype(label_dtype(n, dtype))
        if _is_cupy(x):
            import cupy as cp

            labels = cp.take(cp.asarray(lut), labels)
        else:
            labels = be.apply_lut(labels, lut)
    if not _is_cupy(x):  # numpy in, numpy out, whichever device labeled it
        labels = be.to_host(labels)
    out = label_dtype(n, dtype)
    if labels.dtype != out:
        labels = labels.astype(out)
    return labels, n


def label_zarr(src, dst, **kwargs) -> int:
    """Label a zarr array into a new zarr array; returns the number of components.

    See :func:`tilelabel.pipeline.runner.label_zarr` for the parameters.
    """
    from tilelabel.pipeline.runner import label_zarr as run

    return run(src, dst, **kwargs)


def regionprops(
    x: Any,
    connectivity: int | None = None,
    structure: np.ndarray | None = None,
    *,
    intensity: Any = None,
    min_size: int | None = None,
    max_size: int | None = None,
    backend: str = "auto",
    algorithm: str | None = None,
):
    """Statistics of the connected components of ``x``, one row per label, as a pandas DataFrame.

    The rows follow the labels of :func:`label` with the same arguments (1..n, filtered by
    ``min_size`` / ``max_size`` like there). Columns, in scikit-image's ``regionprops_table``
    style: ``label``, ``area`` (voxel count), ``bbox-0`` .. ``bbox-{2*ndim-1}`` (min corner, then
    exclusive max corner), ``centroid-0`` .. ``centroid-{ndim-1}``; with ``intensity`` (an array
    of the same shape) also ``intensity_sum``, ``intensity_mean``, ``intensity_min`` and
    ``intensity_max``. A numpy or CuPy array is computed in one piece; a dask array chunk by
    chunk through the pipeline (statistics are combined across chunk borders, never recomputed
    from the labels). For zarr volumes use ``label_zarr(..., stats=...)``.
    """
    from tilelabel.pipeline import stats as stats_mod

    x, conn = _prepare(x, connectivity, structure, "regionprops")
    if intensity is not None and tuple(intensity.shape) != tuple(x.shape):
        raise ValueError(f"intensity shape {tuple(intensity.shape)} differs from {tuple(x.shape)}")
    opts = stats_mod.options(True, min_size, max_size, intensity is not None)
    if _is_dask(x):
        import dask.array as da

        from tilelabel.pipeline.lazy import regionprops_dask

        if intensity is not None and not _is_dask(intensity):
            intensity = da.from_array(np.asarray(intensity), chunks=x.chunks)
        return regionprops_dask(
            x, conn, resolve_backend(backend), algorithm, intensity, min_size, max_size
        )
    name = "cuda" if _is_cupy(x) else resolve_backend(backend)
    if not _is_cupy(x):
        x = np.asarray(x)
    if x.dtype.kind == "f" and bool((x != x).any()):
        raise ValueError("input contains NaN; NaN is neither foreground nor background")
    be = get_backend(name)
    bound = conn_mod.max_components(tuple(x.shape), conn)
    labels, n = be.label(x, conn, label_dtype(bound), algorithm)
    stats = be.label_stats(labels, n, (0,) * x.ndim, intensity)
    return stats_mod.to_frame(stats_mod.table_of(stats, opts))
