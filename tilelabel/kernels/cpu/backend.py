"""The ``cpu`` backend: numba kernels on host arrays (:mod:`.algorithms`, :mod:`.ops`,
:mod:`.stats`); zarr's codec pool decodes and encodes chunks on the host."""

from __future__ import annotations

import contextlib

import numpy as np

from tilelabel.dtypes import unsigned_values
from tilelabel.kernels.base import Backend
from tilelabel.kernels.registry import get_kernel


def foreground(block: np.ndarray) -> np.ndarray:
    """Nonzero is foreground; the kernels take C-contiguous uint8 and read any nonzero byte as
    foreground, so such a block passes as it is."""
    if block.dtype == np.bool_:
        return np.ascontiguousarray(block).view(np.uint8)
    if block.dtype == np.uint8 and block.flags.c_contiguous:
        return block
    return (block != 0).view(np.uint8)


class CPUBackend(Backend):
    name = "cpu"
    encoder = None  # zarr's own codec pool is the host's encoder and decoder
    decoder = None

    def label(self, block, connectivity, dtype, algorithm=None, multilabel=False, threads=1):
        kernel = get_kernel("cpu", block.ndim, connectivity, algorithm, multilabel)
        dtype = np.dtype(dtype)
        if threads <= 1 or block.ndim < 2:
            image = self.values(block) if multilabel else self.foreground(block)
            return kernel(image, dtype)
        from tilelabel.connectivity import structure
        from tilelabel.kernels.cpu.slabs import label_slabs

        block = self.values(block) if multilabel else np.asarray(block)
        prepare = (lambda part: part) if multilabel else self.foreground
        labels = np.empty(block.shape, dtype)
        n = label_slabs(
            block,
            labels,
            lambda part, out: kernel(prepare(part), dtype, out=out)[1],
            structure(block.ndim, connectivity),
            threads,
            block if multilabel else None,
        )
        return labels, n

    def label_delta(self, block, connectivity, dtype, delta):
        from tilelabel.kernels.cpu.continuous import label_delta

        return label_delta(np.asarray(block), connectivity, delta, dtype)

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
        from tilelabel.kernels.cpu.ops import first_indices

        return first_indices(labels, n)

    def to_host(self, arr):
        return np.asarray(arr)

    def fingerprint(self, block):
        from tilelabel.kernels.cpu.fingerprint import fingerprint

        return fingerprint(np.asarray(block))

    def arrays(self):
        return contextlib.nullcontext(np)

    def apply_lut(self, labels, lut, staging=False):
        from tilelabel.kernels.cpu.ops import apply_lut

        return apply_lut(labels, lut)

    def keep_values(self, values, labels, keep):
        from tilelabel.kernels.cpu.ops import keep_values

        return keep_values(np.asarray(values), np.asarray(labels), keep)

    def contacts(self, labels, connectivity, n=None):
        from tilelabel.kernels.cpu.contacts import contact_classes

        return contact_classes(np.asarray(labels), connectivity)

    def label_stats(self, labels, n, offset, intensity=None, moments=False):
        from tilelabel.kernels.cpu.stats import label_stats

        return label_stats(labels, n, offset, intensity, moments)

    def label_stats_first(self, labels, n, offset, intensity=None, moments=False):
        from tilelabel.kernels.cpu.stats import label_stats_first

        return label_stats_first(labels, n, offset, intensity, moments)
