"""Step 2, local labels: one chunk labeled on its own, and the small summary the rest needs.

A chunk's kernel numbers its labels 1..n in the chunk's raster order. What leaves the task is
its :class:`Summary`: the labels on its open faces (all that the border merge needs: edges and
corners are sub-slices of faces), the *key* of each label on them (the global raster index of its
first voxel; local raster order is global raster order restricted to the chunk, so keys come out
sorted), and per row the number of labels whose first voxel lies in it (all that the numbering
needs).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from dask.sizeof import sizeof

from tilelabel.chunking import Chunk
from tilelabel.dtypes import local_dtype, row_count_dtype
from tilelabel.kernels.backends import Backend, get_backend
from tilelabel.sorting import unique
from tilelabel.validate import check_no_nan

log = logging.getLogger("tilelabel")


@dataclass(frozen=True)
class Labeler:
    """How every chunk is labeled: the same backend, connectivity and algorithm in both passes,
    so that the writing pass numbers a chunk's labels as the labeling pass did."""

    backend: str
    connectivity: int
    algorithm: str | None = None
    #: each nonzero value a class of its own (cc3d's ``connected_components``), else nonzero is
    #: foreground
    multilabel: bool = False
    #: continuous values (cc3d's ``delta``, with ``multilabel``): neighbours join where their
    #: values differ by at most this; None: where they are equal
    delta: float | None = None

    def _kwargs(self, block: Any) -> dict[str, Any]:
        dtype = local_dtype(block.shape, self.connectivity, self.multilabel)
        kwargs = {"connectivity": self.connectivity, "dtype": dtype, "algorithm": self.algorithm}
        return kwargs | ({"multilabel": True} if self.multilabel else {})

    @property
    def by_value(self) -> bool:
        """Each label holds one value, which the border merge compares (not with ``delta``)."""
        return self.multilabel and self.delta is None

    def image(self, block: Any) -> Any:
        """What the kernels label, where the backend labels: the block's foreground as uint8,
        with ``multilabel`` its values (unsigned, of their own width), with ``delta`` the
        block as it is."""
        be = get_backend(self.backend)
        if self.delta is not None:
            return block
        return be.values(block) if self.multilabel else be.foreground(block)

    def label(self, block: Any) -> tuple[Any, int, Backend]:
        """``(labels, n, backend)`` of a block (host or the backend's device), in the narrowest
        label dtype the chunk allows, on the backend's device."""
        be = get_backend(self.backend)
        if self.delta is not None:
            dtype = local_dtype(block.shape, self.connectivity, True)
            return (*be.label_delta(block, self.connectivity, dtype, self.delta), be)
        labels, n = be.label(block, **self._kwargs(block))
        return labels, n, be

    def label_first(self, block: Any) -> tuple[Any, int, np.ndarray]:
        """``(labels, n, first)``: :meth:`label` and each label's first voxel (its raster index
        in the block, a host array), in one pass where the kernels find them as they go."""
        if self.delta is not None:
            labels, n, be = self.label(block)
            return labels, n, be.first_indices(labels, n)
        return get_backend(self.backend).label_first(block, **self._kwargs(block))

    def label_stats(
        self, block: Any, offset: tuple[int, ...], intensity: Any, moments: bool
    ) -> tuple[Any, int, dict[str, np.ndarray], np.ndarray]:
        """``(labels, n, stats, first)``: :meth:`label_first` and each label's statistics
        (:meth:`Backend.label_stats_pass`)."""
        if self.delta is not None:
            labels, n, be = self.label(block)
            return labels, n, *be.label_stats_first(labels, n, offset, intensity, moments)
        return get_backend(self.backend).label_stats_pass(
            block, offset=offset, intensity=intensity, moments=moments, **self._kwargs(block)
        )


@dataclass
class Borders:
    """What the border merge needs from a chunk: its faces and the keys of the labels on them
    (and with multi-label input, the value of each)."""

    #: ``faces[2 * axis + side]``: the chunk's labels on its low (side 0) or high (side 1) face
    #: along ``axis`` (None where no chunk lies beyond that face)
    faces: list[np.ndarray | None]
    #: sorted local ids of the labels that touch a face with a neighbour
    ids: np.ndarray
    #: each one's key: the global raster index of its first voxel
    keys: np.ndarray
    #: multi-label input: each one's value (unsigned, see :meth:`Labeler.image`); None: binary
    values: np.ndarray | None = None
    #: continuous input (``delta``): the values on each face, as ``faces``
    #: (:func:`continuous_faces`), and ``delta`` in their dtype
    value_faces: list[np.ndarray | None] | None = None
    delta: Any = None


@dataclass
class Counts:
    """What the numbering needs from a chunk."""

    n: int
    #: number of local labels whose first voxel lies in each row (shape: block shape minus x)
    row_counts: np.ndarray
    ids: np.ndarray
    keys: np.ndarray


@dataclass
class Summary:
    """What a chunk's labeling task hands on."""

    borders: Borders
    counts: Counts
    #: with statistics: every local label's row (:meth:`Backend.label_stats`), global coordinates
    stats: dict[str, np.ndarray] | None = None
    #: the checksum of the block's bytes (:meth:`Backend.fingerprint`), where asked for
    fingerprint: int | None = None
    #: with the region graph: the contacts among the chunk's own labels, (m, 2) int64 local
    #: ids, their voxel pairs per class and, with multi-label input, their values
    #: (:mod:`tilelabel.pipeline.contacts`)
    contacts: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None


def sizeof_fields(obj: object) -> int:
    """Bytes of a dataclass of arrays, for dask's scheduler, which without it counts only the
    object's own 56 bytes and, placing each task near the bytes it reads, would take a chunk's
    faces and row counts for free to move and gather every merge task on one worker."""
    return sys.getsizeof(obj) + sum(sizeof(value) for value in vars(obj).values())


for _cls in (Borders, Counts, Summary):
    sizeof.register(_cls)(sizeof_fields)


def materialize(block: Any, slices: tuple[slice, ...], labeler: Labeler | None = None) -> Any:
    """A task argument that is either the block itself or a reader to call inside the task.
    Where ``labeler``'s backend decodes on its device and the reader hands over its compressed
    chunks (a :class:`tilelabel.storage.ZarrSource`), they are decoded there: the block is then
    a device array, and the host has only read bytes."""
    if isinstance(block, np.ndarray):
        return block
    if labeler is not None:
        on_device = _read_on_device(block, slices, get_backend(labeler.backend))
        if on_device is not None:
            return on_device
    return np.asarray(block(slices))


def _read_on_device(reader: Any, slices: tuple[slice, ...], be: Backend) -> Any:
    """The block decoded on ``be``'s device, or None where it cannot be."""
    raw_of = getattr(reader, "raw", None)
    if be.decoder is None or raw_of is None:
        return None
    raw = raw_of(slices, be.decoder.available)
    if raw is None:
        return None
    try:
        return be.decoder.decode_block(raw)
    except Exception:  # a frame the device cannot decode: zarr reads it (and says if it is bad)
        log.debug("chunks at %s decoded on the host instead", slices, exc_info=True)
        return None


def to_global_keys(local_flat: np.ndarray, chunk: Chunk) -> np.ndarray:
    """Raster indices within a chunk to raster indices within the whole volume."""
    coords = np.unravel_index(local_flat, chunk.shape)
    return np.ravel_multi_index(
        tuple(c + o for c, o in zip(coords, chunk.offset, strict=True)), chunk.volume
    ).astype(np.int64)


def key_rows(keys: np.ndarray, chunk: Chunk) -> np.ndarray:
    """The chunk-local row (raster index over all axes but the last) of each global key."""
    coords = np.unravel_index(keys, chunk.volume)
    local = tuple(c - o for c, o in zip(coords[:-1], chunk.offset[:-1], strict=True))
    if len(local) == 0:
        return np.zeros(len(keys), np.int64)
    return np.ravel_multi_index(local, chunk.shape[:-1]).astype(np.int64)


def _borders(
    be: Backend, labels: Any, first: np.ndarray, chunk: Chunk, values: Any = None
) -> Borders:
    """The chunk's labels on its open faces, the labels there and their keys; with the
    multi-label ``values`` (the image the kernel labeled), the value of each label there."""
    faces, ids = open_faces(be, labels, chunk)
    border_values = None if values is None else value_at(be, values, first[ids - 1])
    return Borders(faces, ids, to_global_keys(first[ids - 1], chunk), border_values)


def _delta_borders(
    be: Backend, labels: Any, first: np.ndarray, chunk: Chunk, block: Any, labeler: Labeler
) -> Borders:
    """:func:`_borders` of a continuous-valued chunk: its values on its open faces too."""
    borders = _borders(be, labels, first, chunk)
    faces = face_planes(block, chunk, be.to_host)
    borders.value_faces, borders.delta = continuous_faces(faces, block.dtype, labeler.delta)
    return borders


def open_faces(
    be: Backend, labels: Any, chunk: Chunk
) -> tuple[list[np.ndarray | None], np.ndarray]:
    """The chunk's labels on its open faces (host arrays, None for a closed face; see
    :attr:`Borders.faces`) and the sorted labels found there."""
    faces = face_planes(labels, chunk, be.to_host)
    present = [f.reshape(-1) for f in faces if f is not None]
    ids = unique(np.concatenate(present)) if present else np.empty(0, np.uint64)
    return faces, ids[ids != 0].astype(np.int64)


def continuous_faces(
    faces: list[np.ndarray | None], dtype: np.dtype, delta: float
) -> tuple[list[np.ndarray | None], Any]:
    """Face planes of values (host arrays of ``dtype``) as the continuous rule compares them,
    and ``delta`` in their dtype (:func:`tilelabel.kernels.cpu.continuous.prepare`)."""
    from tilelabel.kernels.cpu.continuous import prepare

    _, d, _ = prepare(np.zeros(1, dtype), delta)
    return [None if f is None else prepare(f, delta)[0] for f in faces], d


def face_planes(
    arr: Any, chunk: Chunk, to_host: Callable[[Any], np.ndarray] = np.asarray
) -> list[np.ndarray | None]:
    """``arr``'s planes on the chunk's open faces, as :attr:`Borders.faces` (host arrays)."""
    ndim = len(chunk.shape)
    faces: list[np.ndarray | None] = []
    for axis in range(ndim):
        for side in (0, 1):
            if chunk.open_faces[axis][side]:
                sl = [slice(None)] * ndim
                sl[axis] = 0 if side == 0 else -1
                # a copy of its own: a view (the first axis's faces) would hold the chunk's
                # whole labels for as long as the face waits for its pairs, about a slab
                faces.append(np.array(to_host(arr[tuple(sl)]), order="C"))
            else:
                faces.append(None)
    return faces


@functools.lru_cache(maxsize=4)
def constant_block(
    labeler: Labeler, shape: tuple[int, ...], dtype: str, value: Any
) -> tuple[Any, int, np.ndarray, int, np.ndarray]:
    """``(labels, n, first, checksum, image)`` of a block of ``shape`` all ``value`` (of
    ``dtype``): labeled once per process and shape for every chunk that holds no stored data
    of a nonzero fill value; ``image``: the value the kernels labeled, as a 1-array."""
    block = np.full(shape, value, dtype)
    be = get_backend(labeler.backend)
    fg = labeler.image(block)
    labels, n, first = labeler.label_first(fg)
    if isinstance(labels, np.ndarray):
        labels.flags.writeable = False  # shared by every such chunk
    return labels, n, first, be.fingerprint(block), value_at(be, fg, first[:1])


def constant_labels(labeler: Labeler, shape: tuple[int, ...], value: np.generic):
    """:func:`constant_block` of a chunk of ``shape`` all ``value`` (a NumPy scalar)."""
    return constant_block(labeler, tuple(shape), value.dtype.str, value.item())


def value_at(be: Backend, values: Any, flat: np.ndarray) -> np.ndarray:
    """The values at raster indices ``flat`` of a block (host or the backend's device), as a
    host array."""
    return be.values_at(values, flat)


def summarize(
    block: np.ndarray,
    *,
    chunk: Chunk,
    labeler: Labeler,
    stats: bool = False,
    moments: bool = False,
    keys: bool = False,
    intensity: np.ndarray | None = None,
    keep: Callable[..., object] | None = None,
    fingerprint: bool = False,
    constant: np.generic | None = None,
    contacts: int | None = None,
) -> Summary:
    """Label one chunk and return what the merge and the numbering need from it.

    With ``stats``, also the statistics of every local label (over ``intensity`` if given; with
    ``moments``, their second moments too; with ``keys``, each one's key as field ``key``).
    ``keep(labels, n, pack)`` is handed the chunk's labels (device or host, the backend's own)
    and a function that packs its foreground to bits, for the writing pass to reuse either.
    With ``fingerprint``, the checksum of the block as read (a resumed run compares it).
    ``constant``: the chunk holds no stored data and is all this value (``block`` is then
    unused, and without statistics it is labeled as :func:`constant_block`). ``contacts``:
    the region graph's connectivity (:attr:`Summary.contacts`; None: no graph).
    """
    if constant is not None and not stats:
        return _constant_summary(chunk, labeler, constant, fingerprint)
    if labeler.delta is None:  # with delta, each NaN voxel is a component (cc3d's)
        check_no_nan(block, chunk.offset, chunk.where)  # visible only once data is read
    if intensity is not None and tuple(intensity.shape) != tuple(block.shape):
        raise ValueError(
            f"intensity block of shape {intensity.shape} in {chunk.where} differs from the "
            f"input's {block.shape}"
        )
    be = get_backend(labeler.backend)
    checksum = be.fingerprint(block) if fingerprint else None
    fg = labeler.image(block)  # on the device: labeled, and packed if kept
    table = None
    if stats:  # the statistics' pass finds the first voxels too
        labels, n, table, first = labeler.label_stats(fg, chunk.offset, intensity, moments)
        if labeler.by_value:  # the source value of each label, in the block's own dtype
            table["value"] = value_at(be, block, first)[:, None]
    else:
        labels, n, first = labeler.label_first(fg)
    if keep is not None:  # bits would lose a multi-label block's values: only labels are kept
        keep(labels, n, None if labeler.multilabel else functools.partial(be.pack, fg))
    values = fg if labeler.by_value else None  # the border labels' values come from it
    graph = None
    if contacts is not None:
        pairs, classes = be.contacts(labels, contacts, n)
        pairs = pairs.astype(np.int64, copy=False)
        at = None if values is None else first[pairs.reshape(-1) - 1]
        graph = (pairs, classes, None if at is None else value_at(be, values, at).reshape(-1, 2))
    if keys:
        table["key"] = to_global_keys(first, chunk)[:, None]
    if labeler.delta is not None:
        borders = _delta_borders(be, labels, first, chunk, fg, labeler)
    else:
        borders = _borders(be, labels, first, chunk, values)
    del labels, values, fg
    return Summary(borders, _counts(n, first, chunk, borders), table, checksum, graph)


def _constant_summary(
    chunk: Chunk, labeler: Labeler, constant: np.generic, fingerprint: bool
) -> Summary:
    """:func:`summarize` of a chunk all ``constant``, from its one labeling per process."""
    if labeler.delta is None:
        check_no_nan(np.full((1,) * len(chunk.shape), constant), chunk.offset, chunk.where)
    labels, n, first, checksum, image = constant_labels(labeler, chunk.shape, constant)
    faces, ids = open_faces(get_backend(labeler.backend), labels, chunk)
    values = np.repeat(image, ids.size) if labeler.by_value else None
    borders = Borders(faces, ids, to_global_keys(first[ids - 1], chunk), values)
    if labeler.delta is not None:
        planes = [None if f is None else np.full(f.shape, constant) for f in faces]
        value_faces, d = continuous_faces(planes, constant.dtype, labeler.delta)
        borders.value_faces, borders.delta = value_faces, d
    counts = _counts(n, first, chunk, borders)
    return Summary(borders, counts, None, checksum if fingerprint else None)


def _counts(n: int, first: np.ndarray, chunk: Chunk, borders: Borders) -> Counts:
    """What the numbering needs of a chunk of ``n`` labels whose first voxels are ``first``."""
    x = chunk.shape[-1]
    rows = int(np.prod(chunk.shape[:-1]))
    # first voxels come in raster order: a row's count is where the next row's labels start
    # less where its own do (a search lets go of the GIL, which a bincount holds)
    starts = np.searchsorted(first, np.arange(1, rows + 1, dtype=np.int64) * x)
    row_counts = np.diff(starts, prepend=0).astype(row_count_dtype(x))
    return Counts(n, row_counts.reshape(chunk.shape[:-1]), borders.ids, borders.keys)


def summary_task(
    block: Any,
    intensity: Any = None,
    *,
    chunk: Chunk,
    labeler: Labeler,
    stats: bool = False,
    moments: bool = False,
    keys: bool = False,
    keep: Callable[..., object] | None = None,
    fingerprint: bool = False,
    constant: np.generic | None = None,
    contacts: int | None = None,
) -> Summary:
    """The labeling pass's task: ``block`` and ``intensity`` are blocks or readers of them
    (:func:`materialize`); with ``constant``, no block is read unless statistics need one."""
    values = None if intensity is None else materialize(intensity, chunk.slices)
    if constant is not None and not stats:
        block = None
    return summarize(
        None if block is None else materialize(block, chunk.slices, labeler),
        chunk=chunk,
        labeler=labeler,
        stats=stats,
        moments=moments,
        keys=keys,
        intensity=values,
        keep=keep,
        fingerprint=fingerprint,
        constant=constant,
        contacts=contacts,
    )
