"""``skimage.measure.label``, ``regionprops`` and ``regionprops_table`` with tilelabel underneath:
a drop-in for code that only swaps the import.

1. :func:`label` keeps scikit-image's semantics: ``connectivity=None`` is full connectivity,
   ``background`` (default 0) is not labeled, an integer image is labeled *per value* (touching
   voxels of different values are different components), ``return_num`` adds the count; bool in,
   ``int32`` out, else ``int64`` (scikit-image's dtypes), any rank.
2. :func:`regionprops_table` measures a label image it is given (a watershed's, a model's, one of
   :func:`label`'s): every nonzero value is one region, connected or not, with tilelabel's
   statistics kernels (the GPU's for CuPy, chunk by chunk for dask) and scikit-image's column
   names, ``spacing`` and ``offset`` included.
3. :func:`regionprops` gives scikit-image's list of region objects
   (:class:`tilelabel.regions.RegionProperties`): the base quantities from one statistics pass
   as in 2., every other property scikit-image's own on the region's crop.

numpy in, numpy out; CuPy in, CuPy out (labels) or numpy columns (tables); dask in, lazy labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilelabel import dispatch
from tilelabel.ndimage import labels_of

if TYPE_CHECKING:
    from tilelabel.regions import RegionProperties

__all__ = ["label", "regionprops", "regionprops_table", "PROPERTIES", "RegionProperties"]


def __getattr__(name: str) -> Any:
    # the region class subclasses scikit-image's: imported when asked for, as scikit-image is
    # needed by regionprops alone
    if name == "RegionProperties":
        from tilelabel.regions import RegionProperties

        return RegionProperties
    raise AttributeError(f"module 'tilelabel.measure' has no attribute {name!r}")


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
    cache: bool = True,
    separator: str = "-",
    extra_properties: Any = None,
    spacing: Any = None,
    offset: Any = None,
) -> dict[str, np.ndarray]:
    """The ``properties`` of every region (nonzero value) of ``label_image``, as
    scikit-image's ``regionprops_table``: a dict of numpy columns, rows in ascending label
    order, ``spacing`` scaling the physical ones (area, centroid, the inertia tensor and what
    derives from it), ``offset`` (the image's origin, one integer per axis) added to the
    centroid as :func:`regionprops` adds it. Regions need not be connected; 2D and 3D images.

    The properties of :data:`PROPERTIES` come from one statistics pass over the whole image
    (the GPU's for CuPy, chunk by chunk for dask). Any other property, and
    ``extra_properties``, is scikit-image's own on each region's crop, through the region
    objects of :func:`regionprops` (the ``measure`` extra; ``cache`` is theirs)."""
    from tilelabel.pipeline import stats as stats_mod

    props = [properties] if isinstance(properties, str) else list(properties)
    if extra_properties is not None or any(p not in PROPERTIES for p in props):
        return _table_of_regions(
            label_image, intensity_image, props, cache, separator, extra_properties, spacing,
            offset,
        )  # fmt: skip
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
    origin = _offset(offset, ndim)
    if dispatch.is_dask(label_image):
        values, rows = _measure_dask(label_image, intensity_image)
    else:
        values, rows = _measure(label_image, intensity_image)
    cols = stats_mod.to_columns(values, rows, spacing)
    for i in range(ndim):
        cols[f"centroid-{i}"] = cols[f"centroid-{i}"] + origin[i]
    out: dict[str, np.ndarray] = {}
    for p in props:
        for name, col in cols.items():
            base, _, index = name.partition("-")
            if base == p and (index or name == p):
                out[name.replace("-", separator)] = col
    return out


def _table_of_regions(
    label_image, intensity_image, props, cache, separator, extra_properties, spacing, offset
) -> dict[str, np.ndarray]:
    """:func:`regionprops_table` through :func:`regionprops`'s objects, as scikit-image's
    ``regionprops_table`` makes its columns (its ``_props_to_dict``; for an image of no
    region, the columns of a one-voxel region, emptied)."""
    from skimage.measure._regionprops import _props_to_dict

    def objects(labels, intensity):
        return regionprops(
            labels, intensity, cache, extra_properties=extra_properties, spacing=spacing,
            offset=offset,
        )  # fmt: skip

    regions = objects(label_image, intensity_image)
    names = props + [f.__name__ for f in extra_properties or ()]
    if regions:
        return _props_to_dict(regions, properties=names, separator=separator)
    ndim = len(label_image.shape)
    one = np.zeros((3,) * ndim, int)
    one[(1,) * ndim] = 1
    if intensity_image is not None:
        shape = one.shape + tuple(intensity_image.shape[ndim:])
        intensity_image = np.zeros(shape, np.dtype(intensity_image.dtype))
    out = _props_to_dict(objects(one, intensity_image), properties=names, separator=separator)
    return {k: v[:0] for k, v in out.items()}


def _offset(offset: Any, ndim: int) -> np.ndarray:
    """``offset`` checked as scikit-image checks it: one value per axis (None: zeros)."""
    if offset is None:
        return np.zeros((ndim,), dtype=int)
    origin = np.asarray(offset)
    if origin.ndim != 1 or origin.size != ndim:
        raise ValueError(
            "Offset should be an array-like of integers of shape (label_image.ndim,); "
            f"{offset} was provided."
        )
    return origin


# -- regionprops ---------------------------------------------------------------------------------


def regionprops(
    label_image: Any,
    intensity_image: Any = None,
    cache: bool = True,
    *,
    extra_properties: Any = None,
    spacing: Any = None,
    offset: Any = None,
) -> list[RegionProperties]:
    """scikit-image's ``regionprops``: one :class:`~tilelabel.regions.RegionProperties` per
    positive label of ``label_image`` (2D or 3D integers), in ascending order, with
    scikit-image's arguments, checks, property names, values and dtypes; properties are computed
    when first read, and kept with ``cache``.

    One statistics pass over the whole image (the GPU's for CuPy, chunk by chunk for dask, as
    :func:`regionprops_table`) gives every region's ``label``, ``slice``, ``num_pixels``,
    ``area``, ``area_bbox``, ``centroid``, ``centroid_local``, ``inertia_tensor``,
    ``inertia_tensor_eigvals`` and, with an intensity image of the labels' shape, integer or
    float32/64, ``intensity_mean``, ``intensity_min``, ``intensity_max`` and ``intensity_std``
    (from sums of squares: where a region's mean is many times its spread, the std has fewer
    exact digits than numpy's). scikit-image's formulas derive ``bbox``, ``axis_major_length``,
    ``axis_minor_length``, ``eccentricity``, ``equivalent_diameter_area``, ``extent`` and
    ``orientation`` from those. Every other property (``image`` and what needs it: the
    ``moments*``, ``coords*``, ``image_convex`` / ``area_convex`` / ``solidity``,
    ``image_filled`` / ``area_filled``, ``euler_number``, ``feret_diameter_max``,
    ``perimeter*``, ``centroid_weighted*``, ``image_intensity``, ``intensity_median``, the
    intensity of a multichannel image, ``extra_properties``) is scikit-image's own on the
    region's crop, its bounding box of the label and intensity images, which alone is copied
    from the GPU or computed from the dask array.

    ``spacing`` and ``offset`` are scikit-image's: ``offset`` shifts ``centroid`` and
    ``coords*``, not ``bbox`` or ``slice``. Unlike scikit-image's, they are checked even where
    the image has no region.

    Notes
    -----
    The properties, scikit-image's names and types, and where each comes from: *pass* (the
    statistics pass), *derived* (scikit-image's formula on the pass's values) or *crop*
    (scikit-image's own, on the region's crop):

    **area** : float; pass
    **area_bbox** : float; pass
    **area_convex** : float; crop
    **area_filled** : float; crop
    **axis_major_length** : float; derived
    **axis_minor_length** : float; derived
    **bbox** : tuple; derived
    **centroid** : array; pass
    **centroid_local** : array; pass
    **centroid_weighted** : array; crop
    **centroid_weighted_local** : array; crop
    **coords** : (K, 2) ndarray; crop
    **coords_scaled** : (K, 2) ndarray; crop
    **eccentricity** : float; derived
    **equivalent_diameter_area** : float; derived
    **euler_number** : int; crop
    **extent** : float; derived
    **feret_diameter_max** : float; crop
    **image** : (H, J) ndarray; crop
    **image_convex** : (H, J) ndarray; crop
    **image_filled** : (H, J) ndarray; crop
    **image_intensity** : (H, J) ndarray; crop
    **inertia_tensor** : ndarray; pass
    **inertia_tensor_eigvals** : tuple; pass
    **intensity_max** : float; pass
    **intensity_mean** : float; pass
    **intensity_median** : float; crop
    **intensity_min** : float; pass
    **intensity_std** : float; pass
    **label** : int; pass
    **moments** : (3, 3) ndarray; crop
    **moments_central** : (3, 3) ndarray; crop
    **moments_hu** : tuple; crop
    **moments_normalized** : (3, 3) ndarray; crop
    **moments_weighted** : (3, 3) array; crop
    **moments_weighted_central** : (3, 3) ndarray; crop
    **moments_weighted_hu** : tuple; crop
    **moments_weighted_normalized** : (3, 3) ndarray; crop
    **num_pixels** : int; pass
    **orientation** : float; derived
    **perimeter** : float; crop
    **perimeter_crofton** : float; crop
    **slice** : tuple of slices; pass
    **solidity** : float; crop
    """
    from tilelabel import regions
    from tilelabel.pipeline import stats as stats_mod

    if dispatch.kind(label_image) == "numpy":
        label_image = np.asarray(label_image)
    ndim = label_image.ndim
    if ndim not in (2, 3):
        raise TypeError("Only 2-D and 3-D images supported.")
    if not np.issubdtype(label_image.dtype, np.integer):
        if np.issubdtype(label_image.dtype, bool):
            raise TypeError(
                "Non-integer image types are ambiguous: use skimage.measure.label to label the "
                "connected components of label_image, or label_image.astype(np.uint8) to "
                "interpret the True values as a single label."
            )
        raise TypeError("Non-integer label_image types are ambiguous")
    origin = _offset(offset, ndim)
    scale = regions.normalized_spacing(spacing, ndim)
    inten = regions.stats_intensity(label_image, intensity_image)
    if dispatch.is_dask(label_image):
        values, rows = _measure_dask(label_image, inten)
    else:
        values, rows = _measure(label_image, inten)
    keep = values > 0  # scikit-image's regions: the positive labels
    if not keep.any():
        return []
    values, rows = values[keep], {f: v[keep] for f, v in rows.items()}
    cols = stats_mod.to_columns(values, rows, tuple(float(s) for s in scale))
    stats = regions.Statistics.of(cols, ndim, None if inten is None else inten.dtype)
    lo, hi = rows["lo"].tolist(), rows["hi"].tolist()
    return [
        regions.RegionProperties(
            tuple(slice(a, b + 1) for a, b in zip(lo[i], hi[i], strict=True)),
            int(value),
            label_image,
            intensity_image,
            cache,
            extra_properties=extra_properties,
            spacing=scale,
            offset=origin,
            statistics=stats,
            row=i,
        )
        for i, value in enumerate(values.tolist())
    ]


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
