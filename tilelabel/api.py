"""The Python API: :func:`label` for in-memory and dask arrays, :func:`label_zarr` zarr to zarr,
:func:`regionprops` for the statistics of in-memory and dask arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack, overload

import numpy as np

from tilelabel import connectivity as conn_mod
from tilelabel import dispatch, periodic
from tilelabel.cores import usable_cores
from tilelabel.dtypes import check_values, label_dtype
from tilelabel.kernels.backends import get_backend, resolve_backend
from tilelabel.validate import check_input, check_no_nan

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

    from tilelabel.workflow.state import Result


def _prepare(
    x: Any,
    connectivity,
    structure,
    caller: str,
    multilabel: bool = False,
    delta: float | None = None,
) -> tuple[Any, int]:
    """The checks every in-memory entry point makes: an array, labelable, and its connectivity."""
    x = dispatch.array(x, caller)
    check_input(tuple(x.shape), x.dtype)
    if delta is not None:
        if not float(delta) >= 0:
            raise ValueError(f"delta must be a number >= 0, got {delta!r}")
    elif multilabel:
        check_values(x.dtype)
    return x, conn_mod.normalize(x.ndim, connectivity, structure)


def _in_memory(
    x,
    backend: str,
    conn: int,
    wrap: tuple[int, ...],
    algorithm,
    multilabel: bool = False,
    delta: float | None = None,
):
    """``(backend, x, labels, n)`` of a numpy or CuPy array (on the GPU for CuPy), joined
    across the ``wrap``ped axes (:mod:`tilelabel.pipeline.wrapped`; with ``multilabel``, voxels
    of one value; with ``delta``, voxels whose values differ by at most that)."""
    from tilelabel.pipeline.wrapped import lut as wrapped_lut

    if dispatch.is_cupy(x):
        if backend not in ("auto", "cuda"):
            raise ValueError(f"a CuPy array is labeled with backend 'cuda', not {backend!r}")
        be = get_backend("cuda")
    else:
        x = np.asarray(x)
        be = get_backend(resolve_backend(backend))
    bound = conn_mod.max_components(tuple(x.shape), conn, multilabel or delta is not None)
    if delta is not None:  # each NaN voxel a component of its own (cc3d's)
        labels, n = be.label_delta(x, conn, label_dtype(bound), delta)
    else:
        check_no_nan(x)
        # a host array labels on every usable core (cc3d and scipy take one)
        threads = 1 if dispatch.is_cupy(x) else usable_cores()
        labels, n = be.label(x, conn, label_dtype(bound), algorithm, multilabel, threads)
    struct = conn_mod.structure(x.ndim, conn)
    values = x if multilabel or delta is not None else None
    table, n = wrapped_lut(be, labels, n, wrap, struct, values, delta)
    if table is not None:
        labels = _through(be, labels, table)
    return be, x, labels, n


def _through(be, labels: Any, lut: np.ndarray) -> Any:
    """``lut[labels]`` on the labels' device (CuPy labels stay there)."""
    if dispatch.is_cupy(labels):
        xp = dispatch.module(labels)
        return xp.take(xp.asarray(lut), labels)
    return be.apply_lut(labels, lut)


def _size_filter(
    x,
    min_size,
    max_size,
    largest_k=None,
    order="raster",
    table: bool = False,
    intensity: bool = False,
    spacing=None,
):
    """The statistics options of the in-memory API for array ``x``: its values checked as the
    run options' (:mod:`tilelabel.options`), then together
    (:func:`tilelabel.pipeline.stats.options`)."""
    from tilelabel.options import checked
    from tilelabel.pipeline.stats import options

    given = checked(
        {
            "min_size": min_size,
            "max_size": max_size,
            "spacing": spacing,
            "largest_k": largest_k,
            "order": order,
        }
    )
    return options(
        table,
        given["min_size"],
        given["max_size"],
        intensity,
        given["spacing"],
        x.ndim,
        given["largest_k"],
        given["order"],
        chunked=dispatch.is_dask(x),
    )


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
    largest_k: int | None = None,
    order: str = "raster",
    wrap_axes: Any = None,
    multilabel: bool = False,
    delta: float | None = None,
):
    """Label the connected components of ``x`` (nonzero is foreground; with ``multilabel``,
    each distinct nonzero value is a class of its own; with ``delta``, neighbours join where
    their values differ by at most ``delta``).

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
    largest_k
        Keep only the k largest components (within the size range), as cc3d's ``largest_k``:
        of equal sizes, the one whose first voxel comes first counts as the larger.
    order
        ``"raster"`` (scipy's numbering, by first voxel) or ``"size"`` (the largest is 1; for a
        dask array only with ``largest_k``).
    wrap_axes
        Periodic boundaries (dask-image's name): the axes, as indices or the names ``z``,
        ``y``, ``x``, whose two end faces touch each other under the connectivity, edges and
        corners of the box included where several wrap (cc3d's ``periodic_boundary`` wraps
        them all). The numbering stays by first voxel.
    multilabel
        A component is a connected set of voxels of one value (``x`` of an integer or bool
        dtype), as ``cc3d.connected_components(x, connectivity=...)`` labels it.
    delta
        Continuous values: neighbours join where both are nonzero and their values differ by
        at most ``delta`` (``x`` bool, integer or float; every NaN voxel a component of its
        own), as ``cc3d.connected_components(x, connectivity=..., delta=delta)`` labels it.

    Returns
    -------
    (labels, n)
        Labels equal to ``scipy.ndimage.label(x != 0, structure)`` (with ``multilabel``,
        ``cc3d.connected_components``): 1..n in raster order of each component's first voxel.
        Numpy in, numpy out; CuPy in, CuPy out; dask in, a lazy dask array and a lazy 0-d
        dask array for the count.
    """
    x, conn = _prepare(x, connectivity, structure, "label", multilabel, delta)
    wrap = periodic.axes(x.ndim, wrap_axes)
    opts = _size_filter(x, min_size, max_size, largest_k, order)
    if dispatch.is_dask(x):
        from tilelabel.pipeline.lazy import label_dask
        from tilelabel.pipeline.local import Labeler

        continuous = delta is not None
        labeler = Labeler(
            resolve_backend(backend),
            conn,
            None if continuous else algorithm,
            multilabel or continuous,
            float(delta) if continuous else None,
        )
        return label_dask(
            x,
            labeler=labeler,
            dtype=dtype,
            min_size=min_size,
            max_size=max_size,
            largest_k=largest_k,
            order=order,
            wrap=wrap,
        )
    be, x, labels, n = _in_memory(x, backend, conn, wrap, algorithm, multilabel, delta)
    if opts is not None:
        count = be.label_stats(labels, n, (0,) * x.ndim)["count"][:, 0]
        from tilelabel.pipeline.stats import filter_lut

        lut = filter_lut(count, opts)
        n = int(lut.max(initial=0))
        labels = _through(be, labels, lut.astype(label_dtype(n, dtype)))
    if not dispatch.is_cupy(x):  # numpy in, numpy out, whichever device labeled it
        labels = be.to_host(labels)
    out = label_dtype(n, dtype)
    if labels.dtype != out:
        labels = labels.astype(out)
    return labels, n


class RunOptions(TypedDict, total=False):
    """The keyword options of :func:`label_zarr` besides ``stats`` and those only Python has:
    the options of a run (:class:`tilelabel.options.Options`, their one declaration, which
    checks each value; ``help(tilelabel.label_zarr)`` says what each means)."""

    connectivity: int | None
    multilabel: bool
    delta: float | None
    wrap_axes: Sequence[int | str] | str | int | None
    chunks: Sequence[int] | None
    backend: Literal["auto", "cpu", "cuda"]
    algorithm: str | None
    dtype: Literal["auto", "uint32", "uint64"]
    overwrite: bool
    force: bool
    resume: bool
    scheduler: str | None
    workers: int | None
    cluster: Mapping[str, Any] | None
    storage_options: Mapping[str, Any] | None
    contacts: str | None
    contacts_connectivity: int | None
    intensity: str | None
    spacing: Sequence[float] | None
    min_size: int | None
    max_size: int | None
    largest_k: int | None
    order: Literal["raster", "size"]
    dust: int | None
    invert: bool
    keep_labels: int | str | None
    keep_input: bool
    gpu_encode: bool | None
    channel: int | None
    timepoint: int | None
    ome_labels: str | None


@overload
def label_zarr(
    input: str,
    output: str | None = None,
    *,
    stats: Literal[True],
    return_result: Literal[False] = False,
    client: Client | None = None,
    structure: np.ndarray | None = None,
    progress: bool = False,
    **options: Unpack[RunOptions],
) -> tuple[int, pd.DataFrame]: ...


@overload
def label_zarr(
    input: str,
    output: str | None = None,
    *,
    return_result: Literal[True],
    stats: bool | str | None = None,
    client: Client | None = None,
    structure: np.ndarray | None = None,
    progress: bool = False,
    **options: Unpack[RunOptions],
) -> Result: ...


@overload
def label_zarr(
    input: str,
    output: str | None = None,
    *,
    stats: Literal[False] | str | None = None,
    return_result: Literal[False] = False,
    client: Client | None = None,
    structure: np.ndarray | None = None,
    progress: bool = False,
    **options: Unpack[RunOptions],
) -> int: ...


def label_zarr(
    input: str,
    output: str | None = None,
    *,
    stats: bool | str | None = None,
    return_result: bool = False,
    client: Client | None = None,
    structure: np.ndarray | None = None,
    progress: bool = False,
    **options: Unpack[RunOptions],
) -> int | tuple[int, pd.DataFrame] | Result:
    """Label the zarr array ``input`` into a new zarr array ``output``.

    The output equals ``scipy.ndimage.label`` of the whole volume, voxel for voxel: labels
    1..count in raster order of each component's first voxel, whatever the chunking, the
    cluster and the backend. It runs on a dask cluster: the one of ``client``, ``scheduler`` or
    ``cluster``, or the active client; else in this process's threads where the volume fits
    this process (with ``cuda``: the first GPU), or else on a local cluster started for the run
    (of GPU workers with ``cuda``).

    Returns the component count; ``(count, DataFrame)`` with ``stats=True``; with
    ``return_result``, a :class:`tilelabel.Result` (count, voxels, seconds, dtype, backend,
    table and the seconds of each phase).
    """
    from tilelabel.options import Options
    from tilelabel.workflow.run import label_zarr as run

    result = run(
        Options(input=input, output=output, stats=stats, **options),
        client=client,
        structure=structure,
        progress=progress,
    )
    if return_result:
        return result
    return (result.components, result.table) if stats is True else result.components


#: ``label_zarr``'s parameters that only Python can pass (no flag, no config key)
_PYTHON_ONLY = {
    "return_result": "Return the run's ``Result`` rather than the count.",
    "client": "A ``distributed.Client`` to run on (it is left running).",
    "structure": "One of scipy's standard structuring elements, as an alternative to "
    "``connectivity``.",
    "progress": "Show a progress bar per phase.",
}


def _document_label_zarr() -> None:
    """``label_zarr``'s Parameters section, made from the options' one declaration."""
    from tilelabel import options

    label_zarr.__doc__ += "\n" + options.parameters_doc(_PYTHON_ONLY) + "\n"


_document_label_zarr()


def regionprops(
    x: Any,
    connectivity: int | None = None,
    structure: np.ndarray | None = None,
    *,
    intensity: Any = None,
    min_size: int | None = None,
    max_size: int | None = None,
    spacing: tuple[float, ...] | None = None,
    largest_k: int | None = None,
    order: str = "raster",
    backend: str = "auto",
    algorithm: str | None = None,
    wrap_axes: Any = None,
    multilabel: bool = False,
):
    """Statistics of the connected components of ``x``, one row per label, as a pandas DataFrame.

    The rows follow the labels of :func:`label` with the same arguments (1..n, filtered by
    ``min_size``, ``max_size`` and ``largest_k`` and numbered by ``order`` like there).
    Columns, those of scikit-image's ``regionprops_table`` with ``spacing`` (default 1 per
    axis): ``label``, ``area`` (physical volume), ``num_pixels`` (voxel count), ``bbox-*`` (min
    corner, then exclusive max corner, in voxels; with a ``spacing`` also ``bbox_scaled-*``,
    physical), ``centroid-*``, ``inertia_tensor-i-j``, ``inertia_tensor_eigvals-*``,
    ``axis_major_length``, ``axis_minor_length``; with ``intensity`` (an array of the same
    shape) also ``intensity_sum``, ``intensity_mean``, ``intensity_min``, ``intensity_max`` and
    ``intensity_std``; with ``multilabel`` (each nonzero value a class of its own, as in
    :func:`label`) also ``value``, each component's value in ``x``. A numpy or CuPy array is
    computed in one piece; a dask array chunk by chunk through the pipeline (sums are combined
    across chunk borders, never recomputed from the labels). For zarr volumes use
    ``label_zarr(..., stats=...)``. ``wrap_axes``: periodic boundaries, as in :func:`label`; a
    component's ``bbox-*`` and ``centroid-*`` are then those of its voxels in the volume's own
    coordinates, so a component that crosses the wrapped faces has a box spanning both ends of
    the axis (:data:`tilelabel.periodic.STATISTICS`).
    """
    from tilelabel.pipeline import stats as stats_mod

    x, conn = _prepare(x, connectivity, structure, "regionprops", multilabel)
    wrap = periodic.axes(x.ndim, wrap_axes)
    if intensity is not None and tuple(intensity.shape) != tuple(x.shape):
        raise ValueError(f"intensity shape {tuple(intensity.shape)} differs from {tuple(x.shape)}")
    opts = _size_filter(
        x, min_size, max_size, largest_k, order, True, intensity is not None, spacing
    )
    if dispatch.is_dask(x):
        import dask.array as da

        from tilelabel.pipeline.lazy import regionprops_dask
        from tilelabel.pipeline.local import Labeler

        if intensity is not None and not dispatch.is_dask(intensity):
            intensity = da.from_array(np.asarray(intensity), chunks=x.chunks)
        labeler = Labeler(resolve_backend(backend), conn, algorithm, multilabel)
        return regionprops_dask(
            x,
            labeler=labeler,
            intensity=intensity,
            min_size=min_size,
            max_size=max_size,
            spacing=opts.spacing,
            largest_k=largest_k,
            order=order,
            wrap=wrap,
        )
    be, x, labels, n = _in_memory(x, backend, conn, wrap, algorithm, multilabel)
    stats, first = be.label_stats_first(labels, n, (0,) * x.ndim, intensity, moments=True)
    if multilabel:
        from tilelabel.pipeline.local import value_at

        stats["value"] = value_at(be, x, first)[:, None]
    return stats_mod.to_frame(stats_mod.table_of(stats, opts))
