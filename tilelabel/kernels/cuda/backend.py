"""The ``cuda`` backend: labels stay on the GPU, everything handed back is numpy.

Labeling itself is :mod:`.ccl` (the algorithms and their kernels), statistics
:mod:`.stats`, compression of output tiles :mod:`.nvcomp` (the backend's optional
:class:`~tilelabel.kernels.base.Encoder`). Every method runs on its host thread's own
stream (:func:`.transfer.thread_stream`). CuPy is imported only when a method runs, never at
import time.
"""

from __future__ import annotations

import contextlib

import numpy as np

from tilelabel.dtypes import unsigned_values
from tilelabel.kernels.base import Backend
from tilelabel.kernels.cuda import equivalence, ha4, ops  # noqa: F401  (their algorithms register)
from tilelabel.kernels.cuda.ccl import label_device, renumber_kernels
from tilelabel.kernels.cuda.compile import CTYPE
from tilelabel.kernels.cuda.transfer import (
    device_id,
    empty_pinned,
    foreground_device,
    on_thread_stream,
    thread_stream,
    upload,
)

__all__ = ["CUDABackend", "CUDADecoder", "CUDAEncoder", "device_memory"]


class CUDAEncoder:
    """zstd on this thread's GPU through nvCOMP (:mod:`.nvcomp`), where nvCOMP is installed:
    a GPU compresses output tiles faster than the host's codec pool and frees its cores."""

    def available(self, codec: str) -> bool:
        from tilelabel.kernels.cuda import nvcomp

        return codec == "zstd" and nvcomp.available()

    def ready(self, codec: str) -> bool:
        from tilelabel.kernels.cuda import nvcomp

        return self.available(codec) and nvcomp.WARM.is_set()

    @on_thread_stream
    def warm(self, codec: str) -> None:
        """Load nvCOMP and compile the writing pass's kernels (the lookup, the tile transposes,
        the nonzero flags) on a tiny block, so that a first run's writes do not wait for them."""
        import cupy as cp

        from tilelabel.kernels.cuda import nvcomp

        if self.available(codec):
            ones = cp.asarray(np.ones((4, 4, 4), np.uint32))
            nvcomp.warm(ops.lut_take(ones, np.arange(2, dtype=np.uint32)))

    @on_thread_stream
    def encode_tiles(self, labels, lut, tile, codec):
        from tilelabel.kernels.cuda import nvcomp

        if not self.available(codec):
            raise ValueError(f"the cuda backend cannot encode {codec!r} here")
        return nvcomp.zstd_tiles(ops.lut_take(labels, lut), tuple(tile))


class CUDADecoder:
    """Storage chunks in zstd, gzip, zlib or LZ4 decoded on this thread's GPU through nvCOMP
    (:mod:`.nvcomp`), where nvCOMP is installed: the host reads the compressed bytes and
    nothing more."""

    def available(self, codec: str) -> bool:
        from tilelabel.kernels.cuda import nvcomp

        return codec in nvcomp.DECODERS and nvcomp.available()

    @on_thread_stream
    def decode_block(self, raw):
        from tilelabel.kernels.cuda import nvcomp

        codec = raw.layout.codec
        if not self.available(codec):
            raise ValueError(f"the cuda backend cannot decode {codec!r} here")
        return nvcomp.decode_block(codec, raw.tiles, raw.layout.tile, raw.shape, raw.dtype)


class CUDABackend(Backend):
    """The ``cuda`` backend: labels stay on the GPU; everything handed back is numpy."""

    name = "cuda"

    def __init__(self) -> None:
        self.encoder = CUDAEncoder()
        self.decoder = CUDADecoder()

    @on_thread_stream
    def label(self, block, connectivity, dtype, algorithm=None, multilabel=False, threads=1):
        return self._label(block, connectivity, dtype, algorithm, False, multilabel)

    @on_thread_stream
    def label_first(self, block, connectivity, dtype, algorithm=None, multilabel=False):
        import cupy as cp

        # the kernels find each label's first voxel as they number the labels
        labels, n, first = self._label(block, connectivity, dtype, algorithm, True, multilabel)
        return labels, n, cp.asnumpy(first)

    def _label(self, block, connectivity, dtype, algorithm, first, multilabel):
        from tilelabel.kernels.registry import DEFAULTS, MULTILABEL_DEFAULTS, get_kernel

        if multilabel:
            if algorithm is not None:  # a name the registry does not know is refused there
                get_kernel("cuda", block.ndim, int(connectivity), algorithm, multilabel)
            img = self.values(block)
            algorithm = algorithm or MULTILABEL_DEFAULTS["cuda"]
        else:
            img = foreground_device(block)
            algorithm = algorithm or DEFAULTS[("cuda", img.ndim, int(connectivity))]
        return label_device(img, dtype, int(connectivity), algorithm, first, multilabel)

    @on_thread_stream
    def label_delta(self, block, connectivity, dtype, delta):
        values, d = continuous_values(upload(block), delta)
        return label_device(
            values, dtype, int(connectivity), "continuous", multilabel=True, delta=d
        )

    @on_thread_stream
    def foreground(self, block):
        return foreground_device(block)

    @on_thread_stream
    def values(self, block):
        return unsigned_values(upload(block))

    @on_thread_stream
    def pack(self, fg):
        return ops.pack_bits(fg)

    @on_thread_stream
    def unpack(self, packed, shape):
        return ops.unpack_bits(packed, shape)

    @on_thread_stream
    def first_indices(self, labels, n):
        import cupy as cp

        if n == 0:
            return np.empty(0, dtype=np.int64)
        labels = cp.ascontiguousarray(cp.asarray(labels))
        if labels.dtype not in CTYPE:
            labels = labels.astype(np.uint64)
        fn = renumber_kernels(labels.dtype)[f"first_from_labels<{CTYPE[labels.dtype]}>"]
        out = ops.full(n, np.iinfo(np.uint64).max, np.uint64)
        grid = (min(-(-labels.size // 256), 1 << 20),)
        fn(grid, (256,), (labels, np.uint64(labels.size), out))
        return cp.asnumpy(out).astype(np.int64)

    @on_thread_stream
    def to_host(self, arr):
        import cupy as cp

        if not isinstance(arr, cp.ndarray):
            return np.asarray(arr)
        return cp.asnumpy(arr if arr.flags.c_contiguous else ops.contiguous(arr))

    @on_thread_stream
    def fingerprint(self, block):
        if isinstance(block, np.ndarray):  # read by zarr: summed where it is
            from tilelabel.kernels.cpu.fingerprint import fingerprint

            return fingerprint(block)
        return ops.fingerprint(block)

    @on_thread_stream
    def values_at(self, block, flat):
        if isinstance(block, np.ndarray):
            return super().values_at(block, flat)
        return self.to_host(ops.gather(block, flat))

    @contextlib.contextmanager
    def arrays(self):
        import cupy as cp

        with thread_stream():
            yield cp

    @on_thread_stream
    def keep_values(self, values, labels, keep):
        import cupy as cp

        return cp.asnumpy(ops.keep_values(values, labels, keep))

    @on_thread_stream
    def apply_lut(self, labels, lut, staging=False):
        import cupy as cp

        out_d = ops.lut_take(labels, lut)
        if not staging:
            return cp.asnumpy(out_d)
        # page-locked memory from CuPy's pinned pool: the copy back runs at full bus speed
        # instead of through the driver's pageable staging
        out = empty_pinned(out_d.shape, out_d.dtype)
        out_d.get(out=out)
        return out

    @on_thread_stream
    def contacts(self, labels, connectivity, n=None):
        from tilelabel.kernels.cuda.contacts import contacts_device

        return contacts_device(upload(labels), connectivity, n)

    @on_thread_stream
    def label_stats(self, labels, n, offset, intensity=None, moments=False):
        from tilelabel.kernels.cuda.stats import label_stats_device

        return label_stats_device(labels, n, offset, intensity, moments)

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
        serves = ha4.serves_stats(block.ndim, int(connectivity), algorithm, intensity, moments)
        if serves and not multilabel:
            from tilelabel.kernels.cpu.stats import to_global

            with thread_stream():
                labels, n, stats, first = ha4.label_analysis(self.foreground(block), dtype)
                return labels, n, to_global(stats, offset), self.to_host(first)
        return super().label_stats_pass(
            block, connectivity, dtype, algorithm, offset, intensity, moments, multilabel
        )


def continuous_values(x, delta: float):
    """``(values, d)``: a CuPy array's values as the continuous kernel compares them and
    ``delta`` in their dtype, as the CPU's
    :func:`~tilelabel.kernels.cpu.continuous.prepare` makes them (told by a probe of value 2;
    its errors are its own): bool as 0/1, an integer's unsigned view, float16 as float32,
    floats as they are, and 0/1 where ``delta`` joins every nonzero pair."""
    import cupy as cp

    from tilelabel.kernels.cpu.continuous import prepare

    probe, d, _ = prepare(np.full(1, 2 if x.dtype != np.bool_ else 1, x.dtype), delta)
    if x.dtype == np.bool_:
        out = x.view(np.uint8)
    elif probe[0] == 1:  # binary: every nonzero voxel joins its nonzero neighbours
        out = (x != 0).view(np.uint8)
    elif x.dtype == np.float16:
        out = x.astype(np.float32)
    elif x.dtype.kind == "f":
        out = x
    else:
        out = x.view(probe.dtype)
    return cp.ascontiguousarray(out), d


def device_memory(
    block_shape: tuple[int, ...],
    dtype,
    connectivity: int,
    tile: tuple[int, ...],
    encode: bool = False,
    input_itemsize: int = 1,
) -> tuple[int, int, int, str]:
    """(bytes labeling and relabeling one chunk of ``block_shape`` can take on this GPU, bytes
    free on the device now, bytes free in this process's CuPy pool, the device's PCI bus id).

    The bus id tells which processes share a GPU: the device's free bytes are theirs together,
    each pool's free blocks only its own.

    Peak: the input (``input_itemsize`` bytes a voxel) and its 0/1 copy, the labels, the
    relabeled output, the scan words (the bitmaps of roots and of seg's tile roots, the prefix
    counts), and per possible label its first-voxel index and LUT entry; a quarter more for
    pool slack.
    Where nvCOMP is installed, what decoding the input's storage tiles (``tile``) takes beside
    it (:class:`CUDADecoder`). ``encode``: the writing pass may compress the output (in tiles
    of ``tile`` too) on the device (:meth:`CUDAEncoder.encode_tiles`), counted only where it
    can; nvCOMP sizes both (:func:`.nvcomp.encode_bytes`, :func:`.nvcomp.decode_bytes`).
    """
    import cupy as cp

    from tilelabel.connectivity import max_components
    from tilelabel.kernels.cuda import nvcomp

    encode = encode and CUDAEncoder().available("zstd")
    decode = nvcomp.available()
    if decode:  # the decoder's code on the device is not free for the run
        with thread_stream():
            nvcomp.warm_decoder()
    shape, tile = tuple(block_shape), tuple(tile)
    voxels = int(np.prod(shape, dtype=np.int64))
    item = np.dtype(dtype).itemsize
    labels = max_components(shape, int(connectivity))
    need = voxels * (input_itemsize + 1 + 2 * item) + voxels // 32 * (8 + item)
    need += labels * (8 + item)
    if decode:
        with thread_stream():
            need += nvcomp.decode_bytes(shape, tile, input_itemsize)
    if encode:
        with thread_stream():
            need += nvcomp.encode_bytes(shape, tile, item)
    free, _ = cp.cuda.Device().mem_info
    return (
        int(need * 1.25),
        int(free),
        int(cp.get_default_memory_pool().free_bytes()),
        device_id(),
    )
