"""CPU kernels (numba, sequential per chunk), registered for the ``cpu`` backend.

- ``buf``: block-based union find, 2D 8- and 3D 26-connectivity (:mod:`.block`).
- ``bke``: block-based Komura equivalence, same connectivities (:mod:`.block`).
- ``uf``: pixel-based union find, every connectivity (:mod:`.pixel`).
- ``seg``: run-based union find, every connectivity (:mod:`.runs`).
- multi-label ``seg``: runs of equal values, every connectivity (:mod:`.multilabel`).

Every kernel follows the registry's contract: ``kernel(image, dtype) -> (labels, n)`` with labels
numbered exactly as ``scipy.ndimage.label`` numbers them (written into ``out=`` where given). The
numba functions are compiled once per label dtype (and cached on disk); shapes and connectivities
are runtime arguments. Any nonzero uint8 counts as foreground (the contract asks for 0/1, but a
stray value must not corrupt the forest).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from tilelabel.dtypes import unsigned_values
from tilelabel.kernels.cpu import block as _blk
from tilelabel.kernels.cpu import multilabel as _ml
from tilelabel.kernels.cpu import pixel as _pix
from tilelabel.kernels.cpu import runs as _runs
from tilelabel.kernels.registry import get_kernel, register

_LABEL_DTYPES = (np.dtype(np.uint32), np.dtype(np.uint64))

#: The forest stores flat voxel indices and a sentinel equal to the voxel count in the label
#: array, so a uint32 array can hold it only for fewer voxels than this; larger chunks are
#: labeled in a uint64 array and narrowed at the end (a module attribute so tests can lower it).
UINT32_FOREST_LIMIT = int(np.iinfo(np.uint32).max)


def _prepare(
    image: np.ndarray, dtype: np.dtype, ndim: int, multilabel: bool = False
) -> tuple[np.ndarray, np.dtype]:
    image = np.asarray(image)
    if image.ndim != ndim:
        raise ValueError(f"expected a {ndim}D image, got shape {image.shape}")
    dtype = np.dtype(dtype)
    if dtype not in _LABEL_DTYPES:
        raise ValueError(f"label dtype must be uint32 or uint64, got {dtype}")
    if multilabel:
        image = unsigned_values(image)
    elif image.dtype != np.uint8 or not image.flags.c_contiguous:
        image = np.ascontiguousarray(image != 0, dtype=np.uint8)
    return image, dtype


def _dims(image: np.ndarray) -> tuple[int, int, int]:
    if image.ndim == 2:
        return (1, *image.shape)
    return image.shape


def _run(
    image: np.ndarray,
    dtype: np.dtype,
    ndim: int,
    label_into: Callable[[np.ndarray, np.ndarray, tuple[int, int, int]], int],
    multilabel: bool = False,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    image, dtype = _prepare(image, dtype, ndim, multilabel)
    if image.size == 0:
        return (np.zeros(image.shape, dtype) if out is None else out), 0
    work = dtype
    if dtype == np.uint32 and image.size > UINT32_FOREST_LIMIT:
        work = np.dtype(np.uint64)
    given = out is not None and out.dtype == work and out.flags.c_contiguous
    labels = out if given else np.empty(image.shape, work)
    n = int(label_into(image.reshape(-1), labels.reshape(-1), _dims(image)))
    if work != dtype:
        if n > np.iinfo(dtype).max:
            raise OverflowError(f"{n} labels do not fit in {dtype}")
        labels = labels.astype(dtype)
    if out is not None and labels is not out:
        out[...] = labels
        labels = out
    return labels, n


# Each ``_*_into(...)`` gives ``label_into(img, L, dims) -> n``. The numba passes take every
# array from it: an array that numba allocates is code that it compiles on a first run.


def _uf_into(ndim: int, connectivity: int):
    nbr = _pix.FORWARD[(ndim, connectivity)]

    def label_into(img, L, dims):
        _pix.uf_scan(img, L, *dims, nbr)
        return _pix.uf_flatten(L)

    return label_into


def _seg_into(ndim: int, connectivity: int):
    dirs = _runs.DIRECTIONS[(ndim, connectivity)]

    def label_into(img, L, dims):
        nz, ny, nx = dims
        rows = np.empty((nz * ny, (nx + 63) // 64), np.uint64)
        flat = np.zeros((img.size + 63) // 64 + 1, np.uint64)
        _runs.pack(img, img[: img.size // 8 * 8].view(np.uint64), nz * ny, nx, rows, flat)
        _runs.unite(rows, L, nz, ny, nx, dirs)
        return _runs.write_labels(rows, L, nz * ny, nx, np.zeros(66, np.int64))

    return label_into


def _ml_into(ndim: int, connectivity: int):
    dirs, cover = _ml.directions(ndim, connectivity)

    def label_into(img, L, dims):
        # the runs: at most one per voxel, pages touched only as runs are made
        forest = np.empty(L.size, L.dtype)
        ends = np.empty(L.size, np.uint32)
        values = np.empty(L.size, img.dtype)
        first = np.empty(dims[0] * dims[1], np.uint64)
        offs = np.empty(len(dirs), np.int64)
        runs = _ml.ml_scan(img, L, forest, ends, values, first, *dims, dirs, cover, offs)
        n = _ml.ml_number(forest, values, runs)
        _ml.ml_gather(L, forest)
        return n

    return label_into


def _make(ndim: int, connectivity: int, algorithm: str, label_into, multilabel=False) -> None:
    def kernel(
        image: np.ndarray, dtype: np.dtype, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, int]:
        if multilabel:
            image = unsigned_values(np.asarray(image))
            # a block of one nonzero value (0/1 data, one object's inside, nothing) is binary:
            # the binary kernel labels it alike (scipy's order), in half the time or less
            if _ml.one_value(image.reshape(-1)):  # (a wrong rank: the binary kernel says so)
                binary = get_kernel("cpu", ndim, connectivity)
                return binary(np.ascontiguousarray(image != 0).view(np.uint8), dtype, out=out)
        return _run(image, dtype, ndim, label_into, multilabel, out)

    kernel.__name__ = f"{'ml_' if multilabel else ''}{algorithm}_{ndim}d_{connectivity}"
    kernel.__qualname__ = kernel.__name__
    image = "multi-label (integer)" if multilabel else "uint8 0/1"
    kernel.__doc__ = (
        f"CPU {algorithm.upper()} labeling of a {ndim}D {image} image under "
        f"{connectivity}-connectivity; returns (labels of ``dtype``, number of labels), the "
        "labels written into ``out`` where it is given."
    )

    register("cpu", ndim, connectivity, algorithm, multilabel)(kernel)
    globals()[kernel.__name__] = kernel


for _ndim, _conn in ((2, 8), (3, 26)):
    _make(_ndim, _conn, "buf", _blk.label)
    _make(_ndim, _conn, "bke", partial(_blk.label, bke=True))
for _ndim, _conn in ((2, 4), (2, 8), (3, 6), (3, 18), (3, 26)):
    _make(_ndim, _conn, "uf", _uf_into(_ndim, _conn))
    _make(_ndim, _conn, "seg", _seg_into(_ndim, _conn))
    _make(_ndim, _conn, "seg", _ml_into(_ndim, _conn), multilabel=True)
