"""Backends: what the pipeline may ask of a device, without knowing which device it is.

The pipeline hands host (numpy) blocks to a backend and gets host arrays back for everything it
has to send elsewhere (boundary planes, first-voxel indices, relabeled output). Labels in between
stay wherever the backend keeps them (host memory for ``cpu``, GPU memory for ``cuda``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from typing import Any, Protocol

import numpy as np

from tilelabel.dtypes import unsigned_values
from tilelabel.kernels.registry import get_kernel


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here (for example ``cuda`` without a usable GPU)."""


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
        :func:`tilelabel.kernels.tiles.tile_slabs`), each nonzero one compressed with ``codec``
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
    ) -> tuple[Any, int]:
        """Labels 1..n of ``block`` (nonzero is foreground; with ``multilabel`` each nonzero
        value is a class of its own) and n."""
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
        find the first voxels as they go."""
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

    def arrays(self) -> contextlib.AbstractContextManager[Any]:
        """The array module of this backend's device (NumPy, CuPy), for work beside the
        kernels: while in use, a device's work runs on the calling thread's stream."""
        ...

    def apply_lut(self, labels: Any, lut: Any, staging: bool = False) -> np.ndarray:
        """``lut[labels]`` as a host array (``lut`` on the host or on the device).
        ``staging``: the caller writes the result out and drops it, so a GPU backend may return
        page-locked memory (a faster copy back)."""
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
        :func:`tilelabel.kernels.cpu_stats.label_stats` for the fields)."""
        ...

    def label_stats_first(
        self,
        labels: Any,
        n: int,
        offset: tuple[int, ...],
        intensity: np.ndarray | None = None,
        moments: bool = False,
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``(label_stats(...), first_indices(labels, n))``, in one pass where the device can."""
        ...

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
        as ``label`` takes it."""
        ...


def foreground(block: np.ndarray) -> np.ndarray:
    """Nonzero is foreground; the kernels take C-contiguous uint8 and read any nonzero byte as
    foreground, so such a block passes as it is."""
    if block.dtype == np.bool_:
        return np.ascontiguousarray(block).view(np.uint8)
    if block.dtype == np.uint8 and block.flags.c_contiguous:
        return block
    return (block != 0).view(np.uint8)


class CPUBackend:
    name = "cpu"
    encoder = None  # zarr's own codec pool is the host's encoder and decoder
    decoder = None

    def label(self, block, connectivity, dtype, algorithm=None, multilabel=False):
        kernel = get_kernel("cpu", block.ndim, connectivity, algorithm, multilabel)
        image = self.values(block) if multilabel else self.foreground(block)
        return kernel(image, np.dtype(dtype))

    def label_first(self, block, connectivity, dtype, algorithm=None, multilabel=False):
        labels, n = self.label(block, connectivity, dtype, algorithm, multilabel)
        return labels, n, self.first_indices(labels, n)

    def foreground(self, block):
        return foreground(np.asarray(block))

    def values(self, block):
        return unsigned_values(np.asarray(block))

    def pack(self, fg):
        return np.packbits(fg.reshape(-1))  # any nonzero byte packs as 1

    def unpack(self, packed, shape):
        count = int(np.prod(shape, dtype=np.int64))
        return np.unpackbits(packed, count=count).reshape(shape)

    def first_indices(self, labels, n):
        from tilelabel.kernels.cpu_ops import first_indices

        return first_indices(labels, n)

    def to_host(self, arr):
        return np.asarray(arr)

    def arrays(self):
        return contextlib.nullcontext(np)

    def apply_lut(self, labels, lut, staging=False):
        from tilelabel.kernels.cpu_ops import apply_lut

        return apply_lut(labels, lut)

    def label_stats(self, labels, n, offset, intensity=None, moments=False):
        from tilelabel.kernels.cpu_stats import label_stats

        return label_stats(labels, n, offset, intensity, moments)

    def label_stats_first(self, labels, n, offset, intensity=None, moments=False):
        from tilelabel.kernels.cpu_stats import label_stats_first

        return label_stats_first(labels, n, offset, intensity, moments)

    def label_stats_pass(
        self,
        block,
        connectivity,
        dtype,
        algorithm,
        offset,
        intensity=None,
        moments=False,
        multilabel=False,
    ):
        labels, n = self.label(block, connectivity, dtype, algorithm, multilabel)
        return labels, n, *self.label_stats_first(labels, n, offset, intensity, moments)


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU it can run on."""
    try:
        cupy = importlib.import_module("cupy")
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@functools.cache
def get_backend(name: str) -> Backend:
    """The backend object for ``cpu`` or ``cuda`` (``auto`` is resolved by the caller)."""
    if name == "cpu":
        return CPUBackend()
    if name == "cuda":
        if not cuda_available():
            raise BackendUnavailable(
                "backend 'cuda' was requested but no usable GPU was found "
                "(CuPy is not installed or sees no CUDA device)"
            )
        from tilelabel.kernels.gpu import CUDABackend

        return CUDABackend()
    raise ValueError(f"unknown backend {name!r}; use 'auto', 'cpu' or 'cuda'")


def resolve_backend(name: str) -> str:
    """``auto`` means ``cuda`` when a GPU is usable here, else ``cpu``."""
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"unknown backend {name!r}; use 'auto', 'cpu' or 'cuda'")
    return name
