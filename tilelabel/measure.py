"""``skimage.measure.label`` and ``skimage.measure.regionprops_table`` with tilelabel underneath: a
drop-in for code that only swaps the import.

1. :func:`label` keeps scikit-image's semantics: ``connectivity=None`` is full connectivity,
   ``background`` (default 0) is not labeled, an integer image is labeled *per value* (touching
   voxels of different values are different components), ``return_num`` adds the count; bool in,
   ``int32`` out, else ``int64`` (scikit-image's dtypes), any rank.
2. :func:`regionprops_table` measures a label image it is given (a watershed's, a model's, one of
   :func:`label`'s): every nonzero value is one region, connected or not, with tilelabel's
   statistics kernels (the GPU's for CuPy, chunk by chunk for dask) and scikit-image's column
   names, ``spacing`` included.

numpy in, numpy out; CuPy in, CuPy out (labels) or numpy columns (tables); dask in, lazy labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilelabel import dispatch
from tilelabel.ndimage import labels_of

__all__ = ["label", "regionprops_table", "PROPERTIES"]


def _structure(ndim: int, connectivity: int | None) -> np.ndarray:
    from scipy import ndimage

    if ndim == 0:
        return np.ones((), bool)
    conn = ndim if connectivity is None else int(connectivity)
    if not 1 <= conn <= ndim:
        raise ValueError(f"connectivity for a {ndim}D image must be in 1..{ndim}, got {conn}")
    return ndimage.generate_binary_structure(ndim, conn)


def label(
    label_image: Any,
    background: Any = None,
    return_num: bool = False,
    connectivity: int | None = None,
):
    """Label the connected regions of an integer (or bool) array, as scikit-image's ``label``:
    regions of one value each, ``background`` (default 0) left 0, ``connectivity`` 1..ndim
    (None: ndim, full); labels 1..n in raster order of their first voxels.

    Returns the labels (``int32`` for bool input, else ``int64``), and with ``return_num`` also
    their count. A dask array gives a lazy array (and a lazy count), labeled chunk by chunk
    where the input is binary, 2D or 3D.
    """
    if dispatch.is_dask(label_image):
        return _label_dask(label_image, background, return_num, connectivity)
    x = label_image if dispatch.is_cupy(label_image) else np.asarray(label_image)
    s = _structure(x.ndim, connectivity)
    out = np.dtype(np.int32) if x.dtype == np.bool_ else np.dtype(np.int64)
    b = 0 if background is None else background
    if x.dtype == np.bool_:  # scikit-image's rule: only background 1 (True) turns it around
        b = background == 1
    if _binary(x, b):  # background and one value: any kernel serves
        labels, n = labels_of(x != b, s)
    else:
        labels, n = labels_of(_values(x, b), s, by_value=True)
        labels = dispatch.like(labels, x)
    labels = labels.astype(out)
    return (labels, n) if return_num else labels


def _binary(x, b) -> bool:
    """Whether ``x`` holds background ``b`` and at most one other value."""
    if x.dtype == np.bool_:
        return True
    values = dispatch.to_host(x).ravel()
    other = values[values != b]
    return other.size == 0 or bool((other == other[0]).all())


def _values(x, b) -> np.ndarray:
    """``x`` as int64 codes, 0 for background ``b`` and one positive code per other value (the
    general labeler's background is 0 whatever the caller's)."""
    host = dispatch.to_host(x)
    codes = np.unique(host, return_inverse=True)[1].reshape(host.shape).astype(np.int64) + 1
    codes[host == b] = 0
    return codes


def _label_dask(x, background, return_num, connectivity):
    import dask.array as da

    if x.dtype == np.bool_ and background in (None, 0) and x.ndim in (2, 3):
        from tilelabel.api import label as tl_label

        labels, n = tl_label(x, connectivity=connectivity or x.ndim, dtype="uint32")
        labels = labels.astype(np.int32)
    else:  # values or ranks the chunked pipeline does not take: the whole array in one task
        import dask

        whole = x.rechunk(x.shape) if x.size else x
        done = dask.delayed(lambda a: label(a, background, True, connectivity), pure=True)(whole)
        dtype = np.int32 if x.dtype == np.bool_ else np.int64
        labels = da.from_delayed(done[0], x.shape, dtype).rechunk(x.chunks)
        n = da.from_delayed(done[1], (), np.int64)
    return (labels, n) if return_num else labels


# -- regionprops_table ---------------------------------------------------------------------------

#: the properties tilelabel measures (scikit-image's names); the table's columns follow them
PROPERTIES = (
    "label",
    "area",
    "num_pixels",
    "bbox",
    "centroid",
    "inertia_tensor",
    "inertia_tensor_eigvals",
    "axis_major_length",
    "axis_minor_length",
    "intensity_mean",
    "intensity_min",
    "intensity_max",
    "intensity_std",
)
_INTENSITY = ("intensity_mean", "intensity_min", "intensity_max", "intensity_std")


def regionprops_table(
    label_image: Any,
    intensity_image: Any = None,
    properties: tuple[str, ...] | list[str] = ("label", "bbox"),
    *,
    separator: str = "-",
    spacing: Any = None,
    **unsupported: Any,
) -> dict[str, np.ndarray]:
    """The ``properties`` (:data:`PROPERTIES`) of every region (nonzero value) of
    ``label_image``, as scikit-image's ``regionprops_table``: a dict of numpy columns, rows in
    ascending label order, ``spacing`` scaling the physical ones (area, centroid, the inertia
    tensor and what derives from it). Regions need not be connected; 2D and 3D images."""
    from tilelabel.pipeline import stats as stats_mod

    if unsupported:
        raise TypeError(f"regionprops_table() does not take {', '.join(sorted(unsupported))}")
    props = [properties] if isinstance(properties, str) else list(properties)
    bad = [p for p in props if p not in PROPERTIES]
    if bad:
        raise ValueError(
            f"tilelabel measures {', '.join(PROPERTIES)}; not {', '.join(map(repr, bad))}"
        )
    if intensity_image is None and any(p in _INTENSITY for p in props):
        raise AttributeError("No intensity image specified.")
    ndim = len(label_image.shape)
    if ndim not in (2, 3):
        raise ValueError(f"regionprops_table takes 2D or 3D label images, got {ndim}D")
    if np.dtype(label_image.dtype).kind not in "biu":
        raise TypeError("Non-integer image types are ambiguous")
    if intensity_image is not None and tuple(intensity_image.shape) != tuple(label_image.shape):
        raise ValueError("Label and intensity image shapes must match")
    if spacing is not None:
        spacing = tuple(float(s) for s in np.broadcast_to(np.asarray(spacing, float), (ndim,)))
    if dispatch.is_dask(label_image):
        values, rows = _measure_dask(label_image, intensity_image)
    else:
        values, rows = _measure(label_image, intensity_image)
    cols = stats_mod.to_columns(values, rows, spacing)
    out: dict[str, np.ndarray] = {}
    for p in props:
        for name, col in cols.items():
            base, _, index = name.partition("-")
            if base == p and (index or name == p):
                out[name.replace("-", separator)] = col
    return out


def _measure(label_image, intensity) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The region values of an in-memory label image and their statistics rows."""
    from tilelabel.kernels.backends import get_backend

    cupy = dispatch.is_cupy(label_image)
    xp = dispatch.module(label_image)
    values, codes = xp.unique(xp.asarray(label_image), return_inverse=True)
    values = dispatch.to_host(values)
    codes = codes.reshape(label_image.shape)
    if values.size and values[0] == 0:  # background: code 0 already
        values = values[1:]
    else:  # no background: codes 1..m
        codes = codes + 1
    be = get_backend("cuda" if cupy else "cpu")
    n = int(values.size)
    codes = codes.astype(np.uint32 if n < 2**32 else np.uint64)
    inten = None if intensity is None else (intensity if cupy else np.asarray(intensity))
    rows = be.label_stats(codes, n, (0,) * codes.ndim, inten, moments=True)
    return values.astype(np.int64), rows


def _measure_dask(label_image, intensity) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Statistics rows of each chunk, keyed by region value, summed across chunks."""
    import dask
    import dask.array as da

    from tilelabel.pipeline import stats as stats_mod
    from tilelabel.pipeline import tree

    if intensity is not None:
        intensity = da.asarray(intensity).rechunk(label_image.chunks)

    def block_rows(block, inten, offset):
        values, rows = _measure(block, inten)
        from tilelabel.kernels.cpu.stats import to_global

        return tree.Rows(values, to_global(rows, offset))

    starts = [np.cumsum((0, *c[:-1])) for c in label_image.chunks]
    parts = []
    blocks = label_image.to_delayed().ravel()
    iblocks = intensity.to_delayed().ravel() if intensity is not None else [None] * len(blocks)
    for i, (b, ib) in enumerate(zip(blocks, iblocks, strict=True)):
        idx = np.unravel_index(i, label_image.numblocks)
        offset = tuple(int(s[j]) for s, j in zip(starts, idx, strict=True))
        parts.append(dask.delayed(block_rows)(b, ib, offset))
    combined = dask.delayed(tree.combine)(parts, stats_mod.REDUCE)
    result = combined.compute()
    return result.keys, result.values
