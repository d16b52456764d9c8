"""What a run reads and where it writes: the input volume and the output it creates.

The input is a zarr array, or the selected plane of an OME-Zarr image's full resolution
(:class:`Volume`). The output is a new zarr array or a label image inside that OME-Zarr image
(:func:`open_output`); both are checked before any work and created only once the component
count is known, through one interface, so that a run does not ask which it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import zarr

from tilelabel.storage import arrays, ome


@dataclass(frozen=True)
class Volume:
    """The array a run labels."""

    array: zarr.Array
    #: where workers read it (normalised)
    url: str
    #: fixed leading indices: an OME-Zarr image's time point and channel
    lead: tuple[int, ...]
    image: ome.OmeImage | None
    storage_options: dict | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)[len(self.lead) :]

    @property
    def spacing(self) -> tuple[float, ...] | None:
        """An OME-Zarr image's voxel size along the labeled axes; None for a plain array."""
        return None if self.image is None else self.image.spacing

    @property
    def storage_chunks(self) -> tuple[int, ...]:
        """What one task may write without racing another: shards if sharded, else chunks."""
        return arrays.storage_chunks(self.array)[len(self.lead) :]

    def reader(self) -> arrays.ZarrSource:
        return arrays.ZarrSource(self.url, self.storage_options, self.lead)


def open_volume(
    url: str,
    storage_options: dict | None = None,
    channel: int | None = None,
    timepoint: int | None = None,
) -> Volume:
    """The input at ``url``: an OME-Zarr image's selected plane, or else a zarr array."""
    image = ome.open_image(url, storage_options, channel, timepoint)  # None: not OME-Zarr
    if image is not None:
        return Volume(image.array, image.array_url, image.index, image, storage_options)
    array = arrays.open_input(url, storage_options)
    return Volume(array, arrays.normalize_url(url), (), None, storage_options)


@dataclass(frozen=True)
class Created:
    """A created output: its level-0 array, where tasks write it, and the fixed leading
    indices of the labeled plane in it (an OME label image's t/c axes)."""

    array: zarr.Array
    url: str
    index: tuple[int, ...]


class Output(Protocol):
    def create(self, dtype: np.dtype, attributes: dict[str, Any]) -> Created: ...

    def fill(self, ex) -> None:
        """After the labels are written: anything made from them (an image's lower levels), on
        the run's executor."""

    def publish(self) -> None:
        """After the output is complete: what makes it visible to readers."""

    def remove(self) -> None:
        """What a failed run does: the output goes, with whatever was written of it."""


@dataclass(frozen=True)
class ArrayOutput:
    """A new zarr array laid out like the input."""

    url: str
    like: Volume
    overwrite: bool
    storage_options: dict | None = None

    def create(self, dtype: np.dtype, attributes: dict[str, Any]) -> Created:
        array = arrays.create_output(
            self.url,
            self.like.array,
            dtype,
            attributes,
            self.overwrite,
            self.storage_options,
            lead=len(self.like.lead),
        )
        return Created(array, arrays.normalize_url(self.url), ())

    def fill(self, ex) -> None:
        pass

    def publish(self) -> None:
        pass

    def remove(self) -> None:
        arrays.remove(self.url, self.storage_options)


@dataclass(frozen=True)
class LabelImageOutput:
    """A label image ``labels/<name>`` inside the input's OME-Zarr image (:mod:`.ome`)."""

    image: ome.OmeImage
    name: str
    overwrite: bool
    storage_options: dict | None = None

    @property
    def url(self) -> str:
        return self.image.labels_url(self.name)

    def create(self, dtype: np.dtype, attributes: dict[str, Any]) -> Created:
        array, url, index = ome.create_labels(
            self.image, self.name, dtype, attributes, self.overwrite, self.storage_options
        )
        return Created(array, url, index)

    def fill(self, ex) -> None:
        ome.fill_levels(ex, self.image, self.name, self.storage_options)

    def publish(self) -> None:
        ome.publish_labels(self.image, self.name, self.storage_options)

    def remove(self) -> None:
        arrays.remove(self.url, self.storage_options)


def open_output(
    volume: Volume,
    url: str | None,
    ome_labels: str | None,
    overwrite: bool,
    storage_options: dict | None = None,
) -> Output:
    """Where the labels of ``volume`` go, checked before any work: ``url``, or for an OME-Zarr
    image without ``url`` its ``labels/<ome_labels>``."""
    name = ome.output_name(volume.image, url, ome_labels)  # None: a plain zarr array
    if name is not None:
        ome.check_labels(volume.image, name, overwrite, storage_options)
        return LabelImageOutput(volume.image, name, overwrite, storage_options)
    arrays.check_output(url, volume.image.url if volume.image else volume.url, overwrite)
    return ArrayOutput(url, volume, overwrite, storage_options)
