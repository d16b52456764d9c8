"""What a run reads: a zarr array, or the selected plane of an OME-Zarr image's full
resolution (:class:`Volume`); where it writes is :mod:`.outputs`."""

from __future__ import annotations

from dataclasses import dataclass

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

    def stored_chunks(self) -> np.ndarray | None:
        """The indices of the storage chunks that hold data, the rest being all :attr:`fill`
        (:func:`.arrays.stored_chunks`); None: any may hold data."""
        return arrays.stored_chunks(self.array, self.lead)

    @property
    def fill(self) -> np.generic | None:
        """The value of the chunks not stored where it is not 0 (:func:`.arrays.fill_value`)."""
        return arrays.fill_value(self.array)

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
