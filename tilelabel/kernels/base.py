"""What a backend is: the protocols the pipeline asks of a device, and their shared defaults.

The pipeline hands host (numpy) blocks to a backend and gets host arrays back for everything it
has to send elsewhere (boundary planes, first-voxel indices, relabeled output). Labels in between
stay wherever the backend keeps them (host memory for ``cpu``, GPU memory for ``cuda``). A
backend subclasses :class:`Backend`, which composes the fused calls (``label_first``,
``label_stats_first``, ``label_stats_pass``) from the plain ones; a backend overrides those it
does in one pass.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import numpy as np


class Encoder(Protocol):
    """Compresses output chunks on the backend's device (an optional capability of a backend).

    A device that compresses faster than the host's codec pool takes that work off the host and
    copies back compressed bytes instead of labels.
    """

    def available(self, codec: str) -> bool:
        """Whether :meth:`encode_tiles` can compress with ``codec`` here (``"zstd"``)."""
        ...

    def ready(self, codec: str) -> bool:
        """Whether :meth:`encode_tiles` can compress with ``codec`` here without loading anything
        first (:meth:`warm` has finished in this process)."""
        ...

    def warm(self, codec: str) -> None:
        """Load what :meth:`encode_tiles` needs for ``codec`` ahead of its first call (a no-op
        where it is not :meth:`available`)."""
        ...

    def encode_tiles(
        self, labels: Any, lut: np.ndarray, tile: tuple[int, ...], codec: str
    ) -> dict[tuple[int, ...], memoryview]:
        """``lut[labels]`` cut into tiles of shape ``tile`` (see
        :func:`tilelabel.kernels.cuda.tiles.tile_slabs`), each nonzero one compressed with ``codec``
        into host bytes, keyed by its tile index within the block. Only where
        :meth:`available` says so."""
        ...


class Decoder(Protocol):
    """Decodes input chunks on the backend's device (an optional capability of a backend): the
    host reads a block's compressed storage chunks and the device does the rest."""

    def available(self, codec: str) -> bool:
        """Whether :meth:`decode_block` can decode ``codec`` (``"zstd"``) here."""
        ...

    def decode_block(self, raw: Any) -> Any:
        """The block a :class:`tilelabel.storage.RawBlock` holds, as a device array."""
        ...


class Backend(Protocol):
    name: str
    #: compresses output chunks on the device; None: zarr compresses them on the host
    encoder: Encoder | None
    #: decodes input chunks on the device; None: zarr decodes them on the host
    decoder: Decoder | None

    def label(
        self,
        block: np.ndarray,
        connectivity: int,
        dtype: np.dtype,
        algorithm: str | None = None,
        multilabel: bool = False,
        threads: int = 1,
    ) -> tuple[Any, int]:
        """Labels 1..n of ``block`` (nonzero is foreground; with ``multilabel`` each nonzero
        value is a class of its own) and n. ``threads``: host threads for this one block (the
        CPU's kernels label slabs of it at once; a GPU ignores it)."""
        ...

    def label_first(
        self,
        block: np.ndarray,
        connectivity: int,
        dtype: np.dtype,
        algorithm: str | None = None,
        multilabel: bool = False,
    ) -> tuple[Any, int, np.ndarray]:
        """``label`` and :meth:`first_indices` of its labels, in one pass where the kernels
        find the first voxels as they go (here: one after the other)."""
        labels, n = self.label(block, connectivity, dtype, algorithm, multilabel)
        return labels, n, self.first_indices(labels, n)

    def label_delta(
        self, block: np.ndarray, connectivity: int, dtype: np.dtype, delta: float
    ) -> tuple[Any, int]:
        """Labels 1..n of a continuous-valued ``block`` (cc3d's ``delta``: neighbours join where
        both are nonzero and their values differ by at most ``delta``,
        :func:`tilelabel.kernels.cpu.continuous.join_rule`) and n."""
        ...

    def foreground(self, block: np.ndarray) -> Any:
        """The block's foreground (nonzero) as uint8 where the backend labels: ``label`` takes
        it as is, and ``pack`` packs it."""
        ...

    def values(self, block: np.ndarray) -> Any:
        """A multi-label block where the backend labels, as unsigned values of its own width
        (:func:`tilelabel.dtypes.unsigned_values`): ``label(..., multilabel=True)`` takes it."""
        ...

    def pack(self, fg: Any) -> Any:
        """A foreground from :meth:`foreground`, one bit per voxel (an eighth of its bytes)."""
        ...

    def unpack(self, packed: Any, shape: tuple[int, ...]) -> Any:
        """The 0/1 uint8 foreground of ``shape`` that :meth:`pack` packed."""
        ...

    def first_indices(self, labels: Any, n: int) -> np.ndarray: ...

    def to_host(self, arr: Any) -> np.ndarray: ...

    def fingerprint(self, block: Any) -> int:
        """The checksum of a block's bytes (:mod:`tilelabel.kernels.cpu.fingerprint`), the same
        number whether the block is on the host or the backend's device."""
        ...

    def values_at(self, block: Any, flat: np.ndarray) -> np.ndarray:
        """The values of a block (on the host or this backend's device) at the raster indices
        ``flat``, as a host array."""
        return np.asarray(block).reshape(-1)[flat]

    def arrays(self) -> contextlib.AbstractContextManager[Any]:
        """The array module of this backend's device (NumPy, CuPy), for work beside the
        kernels: while in use, a device's work runs on the calling thread's stream."""
        ...

    def apply_lut(self, labels: Any, lut: Any, staging: bool = False) -> np.ndarray:
        """``lut[labels]`` as a host array (``lut`` on the host or on the device).
        ``staging``: the caller writes the result out and drops it, so a GPU backend may return
        page-locked memory (a faster copy back)."""
        ...

    def keep_values(self, values: Any, labels: Any, keep: np.ndarray) -> np.ndarray:
        """``values`` where ``keep[labels]`` is set, else 0, as a host array of ``values``'
        dtype (``keep``: a host bool table indexed by label)."""
        ...

    def contacts(
        self, labels: Any, connectivity: int, n: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The touching pairs of distinct labels of ``labels`` (background beyond its edges)
        under ``connectivity``: (m, 2) pairs a < b (in no order) and (m, ndim + 1) int64 voxel
        pairs per class, host arrays (:func:`tilelabel.kernels.cpu.contacts.contact_classes`).
        ``n``: the largest label, where known (a device sizes its work by it)."""
        ...

    def label_stats(
        self,
        labels: Any,
        n: int,
        offset: tuple[int, ...],
        intensity: np.ndarray | None = None,
        moments: bool = False,
    ) -> dict[str, np.ndarray]:
        """Per-label statistics of labels 1..n, as host arrays (see
        :func:`tilelabel.kernels.cpu.stats.label_stats` for the fields)."""
        ...

    def label_stats_first(
        self,
        labels: Any,
        n: int,
        offset: tuple[int, ...],
        intensity: np.ndarray | None = None,
        moments: bool = False,
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``(label_stats(...), first_indices(labels, n))``, in one pass where the device can
        (here: one after the other)."""
        stats = self.label_stats(labels, n, offset, intensity, moments)
        return stats, self.first_indices(labels, n)

    def label_stats_pass(
        self,
        block: np.ndarray,
        connectivity: int,
        dtype: np.dtype,
        algorithm: str | None,
        offset: tuple[int, ...],
        intensity: np.ndarray | None = None,
        moments: bool = False,
        multilabel: bool = False,
    ) -> tuple[Any, int, dict[str, np.ndarray], np.ndarray]:
        """``(labels, n, stats, first)``: ``label`` then ``label_stats_first``, or one pass where
        the algorithm computes the statistics as it labels (HA4's analysis on CUDA). ``block``
        as ``label`` takes it (here: ``label`` then ``label_stats_first``)."""
        labels, n = self.label(block, connectivity, dtype, algorithm, multilabel)
        return labels, n, *self.label_stats_first(labels, n, offset, intensity, moments)
