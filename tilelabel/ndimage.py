"""``scipy.ndimage.label`` (and ``dask_image.ndmeasure.label``, ``cupyx.scipy.ndimage.label``) with
tilelabel underneath: a drop-in for code that only swaps the import.

The peers' defaults hold: ``structure=None`` is the cross (face neighbours only, where
:func:`tilelabel.label` defaults to full connectivity), the labels are scipy's ``int32`` unless
``output`` says otherwise, any rank labels (0-d to n-d) and any centrosymmetric structure. numpy
in, numpy out; CuPy in, CuPy out; dask in, a lazy dask array and a lazy count (dask-image's
return). 2D and 3D arrays under scipy's standard structures go through tilelabel's kernels (the
GPU's for CuPy); other ranks and structures through a general CPU labeler
(:mod:`tilelabel.kernels.cpu.nd`), CuPy ones by way of the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage as _scipy

from tilelabel import dispatch

__all__ = ["label"]

#: scipy's (and so dask-image's) label dtype when no output is given
LABEL_DTYPE = np.dtype(np.int32)


def structure_of(ndim: int, structure: Any = None) -> np.ndarray:
    """scipy's checks of a structure (None: the cross), as a bool array."""
    if structure is None:
        return _scipy.generate_binary_structure(max(ndim, 1), 1) if ndim else np.ones((), bool)
    s = dispatch.to_host(structure).astype(bool)
    if s.ndim != ndim:
        raise RuntimeError("structure and input must have equal rank")
    if any(d != 3 for d in s.shape):
        raise ValueError("structure dimensions must be equal to 3")
    if not np.array_equal(s, s[(slice(None, None, -1),) * ndim]):
        raise ValueError("structure must be symmetric about its centre (centrosymmetric)")
    return s


def standard_rank(s: np.ndarray) -> int | None:
    """The rank r with ``s == generate_binary_structure(ndim, r)``, if there is one."""
    for rank in range(1, s.ndim + 1):
        if np.array_equal(s, _scipy.generate_binary_structure(s.ndim, rank)):
            return rank
    return None


def labels_of(
    values: Any, s: np.ndarray, by_value: bool = False, wrap: tuple[int, ...] = ()
) -> tuple[Any, int]:
    """``(labels, n)`` of an in-memory array (numpy or CuPy, on its device where the kernels
    serve it), raster-numbered, joined across the ``wrap``ped axes; labels in whatever dtype
    the path gives."""
    from tilelabel.api import label as tl_label

    rank = standard_rank(s) if s.ndim in (2, 3) else None
    if rank is not None and not by_value and all(d > 0 for d in values.shape):
        return tl_label(values, connectivity=rank, wrap_axes=wrap)
    from tilelabel.kernels.cpu.nd import label_nd

    host = dispatch.to_host(values)
    if host.dtype.kind == "c":
        raise TypeError("Complex type not supported")
    labels, n = label_nd(host, s, by_value)
    if wrap and labels.size:
        from tilelabel.kernels.backends import get_backend
        from tilelabel.pipeline.wrapped import lut

        table, n = lut(get_backend("cpu"), labels, n, wrap, s)
        if table is not None:
            labels = table[labels]
    return dispatch.like(labels, values), n


def _output_dtype(output: Any, n: int) -> np.dtype:
    if output is None:
        return LABEL_DTYPE if n <= np.iinfo(LABEL_DTYPE).max else np.dtype(np.int64)
    dtype = np.dtype(output)
    if dtype.kind in "iu" and n > np.iinfo(dtype).max:
        raise RuntimeError("insufficient bit-depth in requested output type")
    return dtype


def label(input: Any, structure: Any = None, output: Any = None, wrap_axes: Any = None):
    """Label the features (nonzero) of ``input``, as ``scipy.ndimage.label``.

    Parameters
    ----------
    input
        numpy, CuPy or dask array (or array-like) of any rank; nonzero is a feature.
    structure
        A centrosymmetric structuring element, 3 along every axis; None: the cross
        (``generate_binary_structure(ndim, 1)``).
    output
        None (``int32`` labels), a dtype, or an array of ``input``'s shape written in place (then
        only the count is returned; it may be ``input`` itself). Not for dask arrays.
    wrap_axes
        dask-image's periodic boundaries: the axes (indices) whose two end faces touch each
        other under the structure; where several wrap, the box's edges and corners touch too
        (cc3d's ``periodic_boundary``). None: none.

    Returns
    -------
    (labels, num_features), or num_features where ``output`` is an array. For a dask array, a
    lazy label array of ``int32`` and a lazy 0-d count, as ``dask_image.ndmeasure.label``.
    """
    from tilelabel.periodic import axes

    if dispatch.is_dask(input):
        return _label_dask(input, structure, output, axes(input.ndim, wrap_axes))
    x = input if dispatch.is_cupy(input) else np.asarray(input)
    if x.dtype.kind == "c":
        raise TypeError("Complex type not supported")
    s = structure_of(x.ndim, structure)
    wrap = axes(x.ndim, wrap_axes)
    into = output if isinstance(output, np.ndarray) or dispatch.is_cupy(output) else None
    if into is not None and tuple(into.shape) != tuple(x.shape):
        raise ValueError("output shape not correct")
    labels, n = labels_of(x != 0 if x.dtype != np.bool_ else x, s, wrap=wrap)
    if into is not None:
        if into.dtype.kind in "iu" and n > np.iinfo(into.dtype).max:
            raise RuntimeError("insufficient bit-depth in requested output type")
        into[...] = labels
        return n
    dtype = _output_dtype(output, n)
    return (labels if labels.dtype == dtype else labels.astype(dtype)), n


def _label_dask(x, structure, output, wrap: tuple[int, ...] = ()):
    """dask-image's ``label``: lazy labels (``int32``) and a lazy count; chunked through the
    pipeline where the kernels serve the rank and structure, else labeled whole (joined across
    the ``wrap``ped axes either way)."""
    import dask.array as da

    if output is not None:
        raise ValueError("output is not supported for a dask array")
    s = structure_of(x.ndim, structure)
    rank = standard_rank(s) if s.ndim in (2, 3) else None
    if rank is not None and all(d > 0 for d in x.shape):
        from tilelabel.api import label as tl_label

        labels, n = tl_label(x, connectivity=rank, dtype="uint32", wrap_axes=wrap)
        return labels.astype(LABEL_DTYPE), n.astype(np.int64)
    # other ranks and structures: the general labeler over the whole array, in one task
    import dask

    whole = x.rechunk(x.shape) if x.size else x
    done = dask.delayed(lambda a: label(a, s, wrap_axes=wrap), pure=True)(whole)
    labels = da.from_delayed(done[0], x.shape, LABEL_DTYPE)
    return labels.rechunk(x.chunks), da.from_delayed(done[1], (), np.int64)
