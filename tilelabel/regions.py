"""scikit-image's region objects over tilelabel's statistics: the class that
:func:`tilelabel.measure.regionprops` returns a list of.

:class:`RegionProperties` is a subclass of ``skimage.measure``'s own, so it has its property
names, attribute and ``region["name"]`` access, iteration, ``==``, deprecated names and
``extra_properties``. The base quantities come from one row of :class:`Statistics`, the
vectorized result of one statistics pass over the whole label image; scikit-image's own code
then derives the rest from them or, where the statistics cannot give a property, from the
region's crop (its bounding box of the label and intensity images), which alone is taken to the
host: a CuPy crop copied, a dask crop computed. This module imports scikit-image, so
``tilelabel.measure`` imports it only in :func:`~tilelabel.measure.regionprops` and when asked
for ``RegionProperties``: its other functions do without scikit-image.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    from skimage.measure._regionprops import RegionProperties as _SkimageRegion
    from skimage.measure._regionprops_utils import _normalize_spacing
except ImportError as e:  # scikit-image computes every property tilelabel does not
    raise ImportError(
        "tilelabel.measure.regionprops needs scikit-image: pip install 'tilelabel[measure]'"
    ) from e

from tilelabel import dispatch

__all__ = [
    "RegionProperties",
    "Statistics",
    "OWN",
    "DERIVED",
    "normalized_spacing",
    "stats_intensity",
]

#: the properties that a row of :class:`Statistics` gives (with the ``label`` and ``slice``
#: that the pass finds)
OWN = (
    "area",
    "area_bbox",
    "num_pixels",
    "centroid",
    "centroid_local",
    "inertia_tensor",
    "inertia_tensor_eigvals",
    "intensity_mean",
    "intensity_min",
    "intensity_max",
    "intensity_std",
)
#: scikit-image's formulas on the properties above: no crop either
DERIVED = (
    "bbox",
    "axis_major_length",
    "axis_minor_length",
    "eccentricity",
    "equivalent_diameter_area",
    "extent",
    "orientation",
)


@dataclass(frozen=True)
class Statistics:
    """Every region's row of one statistics pass, physical units (``spacing``), no offset.

    ``intensity`` holds the mean, min, max and std columns, or is None where the pass had no
    intensity (none given, a channel axis, or a dtype the kernels do not take); ``mean_type``
    is the scalar type of numpy's mean of that intensity (float32 for float32, else float64).
    """

    count: np.ndarray  # (n,) int64
    centroid: np.ndarray  # (n, ndim)
    tensor: np.ndarray  # (n, ndim, ndim)
    eigvals: np.ndarray  # (n, ndim), descending, clipped at 0
    intensity: dict[str, np.ndarray] | None = None
    mean_type: type = np.float64

    @classmethod
    def of(cls, cols: dict[str, np.ndarray], ndim: int, intensity_dtype: Any = None) -> Statistics:
        """From the named columns of :func:`tilelabel.pipeline.stats.to_columns`."""
        n = cols["label"].size
        tensor = np.stack(
            [cols[f"inertia_tensor-{i}-{j}"] for i in range(ndim) for j in range(ndim)], axis=-1
        ).reshape(n, ndim, ndim)
        intensity = None
        mean_type: type = np.float64
        if "intensity_mean" in cols:
            names = ("intensity_mean", "intensity_min", "intensity_max", "intensity_std")
            intensity = {k: cols[k] for k in names}
            if np.dtype(intensity_dtype).kind == "f":
                mean_type = np.dtype(intensity_dtype).type
        return cls(
            count=cols["num_pixels"],
            centroid=np.stack([cols[f"centroid-{i}"] for i in range(ndim)], axis=-1),
            tensor=tensor,
            eigvals=np.stack([cols[f"inertia_tensor_eigvals-{i}"] for i in range(ndim)], -1),
            intensity=intensity,
            mean_type=mean_type,
        )


def _host(x: Any) -> np.ndarray:
    """A crop as a numpy array: a dask crop computed, a CuPy crop copied to the host."""
    if dispatch.is_dask(x):
        x = x.compute()
    return dispatch.to_host(x)


def _statistic(method: Callable[[RegionProperties], Any]) -> property:
    """A property from the region's row, cached as scikit-image caches; scikit-image's own (from
    the crop) for a region built without statistics or where the row lacks it (``method``
    returns ``NotImplemented``), so that errors and fallbacks stay scikit-image's."""
    name = method.__name__
    inherited = getattr(_SkimageRegion, name)

    def get(self: RegionProperties) -> Any:
        if self._statistics is None:
            return inherited.fget(self)
        if self._cache_active and name in self._cache:
            return self._cache[name]
        value = method(self)
        if value is NotImplemented:
            value = inherited.fget(self)
        if self._cache_active:
            self._cache[name] = value
        return value

    return property(get, doc=inherited.__doc__)


class RegionProperties(_SkimageRegion):
    """scikit-image's ``RegionProperties`` whose base quantities are a row of
    :class:`Statistics` (:data:`OWN`, and :data:`DERIVED` from them), every other property
    scikit-image's own on the region's crop. Built without ``statistics`` it is scikit-image's
    class, but for crops of CuPy and dask images, which it takes to the host."""

    def __init__(
        self,
        slice: tuple[slice, ...],
        label: int,
        label_image: Any,
        intensity_image: Any,
        cache_active: bool,
        *,
        extra_properties: Any = None,
        spacing: Any = None,
        offset: Any = None,
        statistics: Statistics | None = None,
        row: int = 0,
    ) -> None:
        # set first: scikit-image's constructor looks up the extra properties' names
        self._statistics = statistics
        self._row = row
        super().__init__(
            slice,
            label,
            label_image,
            intensity_image,
            cache_active,
            extra_properties=extra_properties,
            spacing=spacing,
            offset=offset,
        )

    # -- the crop, on the host --

    @property
    def image(self) -> np.ndarray:
        if self._cache_active and "image" in self._cache:
            return self._cache["image"]
        image = _host(self._label_image[self.slice] == self.label)
        if self._cache_active:
            self._cache["image"] = image
        return image

    @property
    def image_intensity(self) -> np.ndarray:
        if self._intensity_image is None:
            raise AttributeError("No intensity image specified.")
        if self._cache_active and "image_intensity" in self._cache:
            return self._cache["image_intensity"]
        image = self.image if not self._multichannel else np.expand_dims(self.image, self._ndim)
        value = _host(self._intensity_image[self.slice]) * image
        if self._cache_active:
            self._cache["image_intensity"] = value
        return value

    image.__doc__ = _SkimageRegion.image.__doc__
    image_intensity.__doc__ = _SkimageRegion.image_intensity.__doc__

    # -- the statistics' row --

    @_statistic
    def num_pixels(self) -> np.int64:
        return self._statistics.count[self._row]

    @_statistic
    def area(self) -> Any:
        return self._statistics.count[self._row] * self._pixel_area

    @_statistic
    def area_bbox(self) -> Any:
        return math.prod(s.stop - s.start for s in self.slice) * self._pixel_area

    @_statistic
    def centroid(self) -> tuple:
        return tuple(self._statistics.centroid[self._row] + self._offset)

    @_statistic
    def centroid_local(self) -> np.ndarray:
        start = np.array([s.start for s in self.slice])
        return self._statistics.centroid[self._row] - start * self._spacing

    @_statistic
    def inertia_tensor(self) -> np.ndarray:
        return self._statistics.tensor[self._row].copy()

    @_statistic
    def inertia_tensor_eigvals(self) -> list:
        return list(self._statistics.eigvals[self._row])

    def _intensity(self, name: str) -> Any:
        """A column of the row's intensity, NotImplemented where the pass had none."""
        columns = self._statistics.intensity
        if columns is None or self._intensity_image is None:
            return NotImplemented
        value = columns[name][self._row]
        if name in ("intensity_mean", "intensity_std"):  # numpy's dtype for the mean
            return self._statistics.mean_type(value)
        return value

    @_statistic
    def intensity_mean(self) -> Any:
        return self._intensity("intensity_mean")

    @_statistic
    def intensity_min(self) -> Any:
        return self._intensity("intensity_min")

    @_statistic
    def intensity_max(self) -> Any:
        return self._intensity("intensity_max")

    @_statistic
    def intensity_std(self) -> Any:
        return self._intensity("intensity_std")


def normalized_spacing(spacing: Any, ndim: int) -> np.ndarray:
    """scikit-image's spacing (ones where None), checked with its messages."""
    return np.full(ndim, 1.0) if spacing is None else _normalize_spacing(spacing, ndim)


def stats_intensity(label_image: Any, intensity: Any) -> Any:
    """The intensity for the statistics pass, on the labels' device: None where the kernels do
    not take it (no image, another shape such as a channel axis, a dtype other than integers
    and float32/64), so that those properties stay scikit-image's."""
    if intensity is None or tuple(intensity.shape) != tuple(label_image.shape):
        return None
    dtype = np.dtype(intensity.dtype)
    if dtype.kind not in "biu" and dtype not in (np.float32, np.float64):
        return None
    if dispatch.is_cupy(label_image) != dispatch.is_cupy(intensity):
        host = intensity.compute() if dispatch.is_dask(intensity) else intensity
        host = dispatch.to_host(host)
        return dispatch.like(host, label_image) if dispatch.is_cupy(label_image) else host
    return intensity
