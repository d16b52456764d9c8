"""The contacts of a labeled chunk among its own labels on the GPU (CUDA C in ``contacts.cu``):
the same host arrays as :func:`tilelabel.kernels.cpu.contacts.contact_classes`.

1. ``ct_count`` adds every voxel pair of distinct nonzero labels, run by run along the rows, to
   a table of each block's tile in shared memory, then the tile's pairs to a hash table of
   pairs with a count per class, sized from the label count and grown (the count started
   again) where it fills past 70%.
2. ``ct_compact`` packs the table's filled slots as the pairs and their counts, in no order (a
   chunk's pairs are summed over the tree, where their order is of no use).

Labels of 32 bits or more, which no key packs, are counted on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilelabel.kernels.cuda.compile import CTYPE, kernels


def instantiations() -> dict[str, set[str]]:
    """Every name expression of ``contacts.cu`` (:mod:`.shipped`)."""
    return {"contacts": {"ct_compact", *(f"ct_count<{t}>" for t in CTYPE.values())}}


def _offsets(ndim: int, connectivity: int) -> tuple[np.ndarray, np.ndarray]:
    """The forward offsets as (k, 3) rows of (dz, dy, dx) (a 2D image is one plane) and each
    offset's class."""
    from tilelabel.kernels.cpu.contacts import forward_offsets

    offs, cls = forward_offsets(ndim, connectivity)
    if ndim == 2:
        offs = np.concatenate([np.zeros((len(offs), 1), np.int64), offs], axis=1)
    return np.ascontiguousarray(offs, np.int64), cls.astype(np.int32)


def contacts_device(labels: Any, connectivity: int, n: int | None = None):
    """``(pairs, classes)`` of a CuPy label array (2D or 3D, background beyond its edges):
    (m, 2) uint64 pairs a < b, in no order, and (m, ndim + 1) int64 voxel pairs per class, host
    arrays. ``n``: the largest label, where known (it sizes the table)."""
    import cupy as cp

    from tilelabel.kernels.cpu.contacts import contact_classes

    ndim = labels.ndim
    offs, cls = _offsets(ndim, connectivity)  # checks ndim and connectivity
    if labels.size == 0:
        return contact_classes(np.zeros((0,) * ndim, np.uint32), connectivity)
    L = cp.ascontiguousarray(labels)
    if np.dtype(L.dtype) not in CTYPE:
        L = L.astype(np.uint64 if L.dtype.itemsize > 4 else np.uint32)
    D, H, W = (1, *L.shape) if ndim == 2 else L.shape
    count = kernels("contacts", (f"ct_count<{CTYPE[np.dtype(L.dtype)]}>",))
    compact = kernels("contacts", ("ct_compact",))["ct_compact"]
    count = next(iter(count.values()))
    d_offs, d_cls = cp.asarray(offs), cp.asarray(cls)
    tile = (4, 8, 128) if ndim == 3 else (1, 32, 128)  # 4096 voxels per block at a time
    tiles = -(-D // tile[0]) * -(-H // tile[1]) * -(-W // tile[2])
    blocks = max(1, min(tiles, 8 * cp.cuda.Device().attributes["MultiProcessorCount"]))
    # about as many slots as 16 pairs per label: a segmentation's cells have a dozen neighbours
    cap = 1 << max(12, int(16 * ((n if n is not None else L.size // 64) + 1)).bit_length())
    while True:
        keys = cp.zeros(cap, np.uint64)
        counts = cp.zeros((cap, 4), np.uint64)
        state = cp.zeros(3, np.uint64)
        shift = np.uint32(64 - (cap.bit_length() - 1))
        args = (L, np.int64(D), np.int64(H), np.int64(W), d_offs, d_cls, np.int32(len(cls)))
        args += tuple(np.int32(t) for t in tile)
        args += (keys, counts, np.uint64(cap - 1), shift, state, np.uint64(cap * 7 // 10))
        count((blocks,), (256,), args)
        flags = state.get()
        if flags[1] == 2:  # a label of 32 bits or more
            return contact_classes(cp.asnumpy(L), connectivity)
        if flags[1] == 0:
            break
        cap *= 4
        del keys, counts
    m, ncls = int(flags[0]), ndim + 1
    out_pairs = cp.empty((m, 2), np.uint64)
    out_counts = cp.empty((m, ncls), np.uint64)
    if m:
        grid = max(1, min(-(-cap // 256), 1 << 16))
        args = (keys, counts, np.int64(cap), np.int32(ncls), out_pairs, out_counts, state)
        compact((grid,), (256,), args)
    return cp.asnumpy(out_pairs), cp.asnumpy(out_counts).view(np.int64)
