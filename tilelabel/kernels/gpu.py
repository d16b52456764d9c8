"""CUDA kernels (CUDA C in ``kernels/cuda/ccl.cu``, compiled and cached by ``cupy.RawModule``).

Algorithms, as registered with the kernel registry:

- ``buf``, ``buf_ic``, ``bke``, ``bke_ic``: block-based union-find / Komura equivalence of
  Allegretti et al. (TPDS 2020), with plain or inline compression, for 2D 8- and 3D
  26-connectivity (2x2 / 2x2x2 blocks). The union-find forest lives in the label array itself.
- ``bke_tile``: BKE's blocks with a tile-local union-find in shared memory (tiles of 32 x 16 x 16
  blocks in 3D, 32 x 32 in 2D) and global unions only across tile faces (Oliveira & Lotufo's tile
  merging, Playne & Hawick's HA4), for 2D 8- and 3D 26-connectivity.
- ``uf``, ``uf_ic``: pixel-based union-find for every connectivity (for 2D 4 and 3D 6 and 18; a
  baseline for 8 and 26).
- ``ke``: pixel-based Komura equivalence (Init links each voxel to a backward neighbour,
  Compression, Reduction, Compression), every connectivity.

All of them end with the same on-device renumbering to scipy's numbering, which also yields each
label's first voxel. CuPy is imported only when a kernel runs, never at import time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from pathlib import Path

import numpy as np

from tilelabel.dtypes import UINT32_MAX, LabelOverflowError
from tilelabel.kernels.registry import register

_SRC = Path(__file__).parent / "cuda" / "ccl.cu"
_TNAME = {np.dtype(np.uint32): "unsigned int", np.dtype(np.uint64): "unsigned long long"}
BLOCK_ALGORITHMS = ("buf", "buf_ic", "bke", "bke_ic", "bke_tile")
PIXEL_ALGORITHMS = ("uf", "uf_ic", "ke")
_SCAN_TILE = 256 * 8  # SCAN_THREADS * SCAN_WORDS in ccl.cu
_MAXGRID = 65535
#: bke_tile's tile (TY, TZ, NT): 32 x TY x TZ blocks, NT rows of 32 threads; the benchmark may
#: pick another of TILE_CONFIGS (each one compiled).
TILE_CONFIGS = {3: ((16, 16, 16), (16, 8, 16), (8, 8, 8)), 2: ((32, 1, 8), (64, 1, 16))}
TILE = {3: TILE_CONFIGS[3][0], 2: TILE_CONFIGS[2][0]}


def _names() -> list[str]:
    names = []
    for t in _TNAME.values():
        for d3 in ("true", "false"):
            for k in ("buf_init", "bke_reduce", "blk_final"):
                names.append(f"{k}<{t}, {d3}>")
            for k in ("buf_merge", "bke_init"):
                for al in ("true", "false"):
                    names.append(f"{k}<{t}, {d3}, {al}>")
            for ic in ("true", "false"):
                for mark in ("true", "false"):
                    names.append(f"blk_compress<{t}, {d3}, {ic}, {mark}>")
        for d3, nd in (("true", 3), ("false", 2)):
            for ty, tz, nt in TILE_CONFIGS[nd]:
                names.append(f"tile_reduce<{t}, {d3}, {ty}, {tz}>")
                for al in ("true", "false"):
                    names.append(f"bke_tile<{t}, {d3}, {al}, {ty}, {tz}, {nt}>")
        for conn in (4, 8, 6, 18, 26):
            for k in ("uf_merge", "ke_init", "ke_reduce"):
                names.append(f"{k}<{t}, {conn}>")
        for ic in ("true", "false"):
            for mark in ("true", "false"):
                names.append(f"uf_compress_mark<{t}, {ic}, {mark}>")
        for k in (
            "uf_init",
            "uf_final",
            "scan_tile_sums",
            "scan_tiles",
            "scan_words",
            "first_from_bitmap",
            "first_from_labels",
        ):
            names.append(f"{k}<{t}>")
    return names


@functools.cache
def _module():
    import os

    import cupy as cp

    # TILELABEL_CUDA_DEFINES: extra -DNAME macros, for benchmarking variants (see notes_gpu.md)
    defines = os.environ.get("TILELABEL_CUDA_DEFINES", "").split()
    head = "".join(f"#define {d[2:]}\n" for d in defines if d.startswith("-D"))
    code = head + _SRC.read_text()
    return cp.RawModule(code=code, options=("-std=c++17",), name_expressions=_names())


@functools.cache
def _fn(name: str):
    return _module().get_function(name)


def _magic(d: int, bits: int) -> tuple[int, int, int]:
    """Multiplier and shifts for exact division by ``d`` of any ``bits``-bit number."""
    if d < 1:
        d = 1
    l = (d - 1).bit_length()
    m = ((1 << bits) * ((1 << l) - d)) // d + 1
    return m, min(l, 1), max(l - 1, 0)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Run:
    """One labeling of one image: its buffers and its steps (so benchmarks can time each)."""

    def __init__(self, image, dtype, connectivity: int, algorithm: str):
        import cupy as cp

        self.cp = cp
        self.img = image
        self.T = np.dtype(dtype)
        self.t = _TNAME[self.T]
        self.shape = tuple(int(s) for s in image.shape)
        self.ndim = len(self.shape)
        self.N = int(np.prod(self.shape, dtype=object))
        self.conn = connectivity
        self.alg = algorithm
        self.block = algorithm in BLOCK_ALGORITHMS
        self.d3 = "true" if self.ndim == 3 else "false"
        D, H, W = (1, *self.shape) if self.ndim == 2 else self.shape
        self.dims = (D, H, W)
        Ts = self.T.type
        bits = self.T.itemsize * 8
        mW, w1, w2 = _magic(W, bits)
        mHW, hw1, hw2 = _magic(H * W, bits)
        u32 = np.uint32
        self.geo = (Ts(D), Ts(H), Ts(W), Ts(mW), u32(w1), u32(w2), Ts(mHW), u32(hw1), u32(hw2))
        # 16-bit loads of voxel pairs need even rows and an even base address
        even = W % 2 == 0 and image.data.ptr % 2 == 0
        self.aligned = "true" if even else "false"
        self.nwords = _cdiv(self.N, 32)
        self.ntiles = _cdiv(self.nwords, _SCAN_TILE)
        if self.block:
            BD, BH, BW = _cdiv(D, 2), _cdiv(H, 2), _cdiv(W, 2)
            self.bdims = (Ts(BD), Ts(BH), Ts(BW))
            ty, tz = (4, 2) if self.ndim == 3 else (8, 1)
            self.bblock = (32, ty, tz)
            self.bgrid = (_cdiv(BW, 32), min(_cdiv(BH, ty), _MAXGRID), min(_cdiv(BD, tz), _MAXGRID))
            self.tile = TILE[self.ndim]
            TY, TZ, NT = self.tile
            self.tblock = (32, NT, 1)
            self.tgrid = (_cdiv(BW, 32), min(_cdiv(BH, TY), _MAXGRID), min(_cdiv(BD, TZ), _MAXGRID))
        else:
            ty, tz = (4, 2) if self.ndim == 3 else (8, 1)
            self.vblock = (32, ty, tz)
            self.vgrid = (_cdiv(W, 32), min(_cdiv(H, ty), _MAXGRID), min(_cdiv(D, tz), _MAXGRID))
        self.lgrid = (min(_cdiv(self.N, 256), 1 << 20),)

    # -- steps -----------------------------------------------------------------------------
    def alloc(self):
        cp = self.cp
        self.L = cp.empty(self.shape, self.T)
        self.extra = cp.empty(1, self.T)
        # block roots set their bits with atomicOr; the pixel kernel writes whole words
        self.bitmap = (cp.zeros if self.block else cp.empty)(self.nwords, np.uint32)
        self.prefix = cp.empty(self.nwords, self.T)
        self.tiles = cp.empty(self.ntiles + 1, self.T)

    def _b(self, name, *args):
        _fn(name)(self.bgrid, self.bblock, args)

    def init(self):
        if self.alg == "bke_tile":
            TY, TZ, NT = self.tile
            k = f"bke_tile<{self.t}, {self.d3}, {self.aligned}, {TY}, {TZ}, {NT}>"
            args = (self.img, self.L, self.extra, *self.geo, *self.bdims)
            _fn(k)(self.tgrid, self.tblock, args)
        elif self.block:
            if self.alg.startswith("buf"):
                k = f"buf_init<{self.t}, {self.d3}>"
            else:
                k = f"bke_init<{self.t}, {self.d3}, {self.aligned}>"
            self._b(k, self.img, self.L, self.extra, *self.geo, *self.bdims)
        elif self.alg == "ke":
            D, H, W = self.dims
            Ts = self.T.type
            _fn(f"ke_init<{self.t}, {self.conn}>")(
                self.vgrid, self.vblock, (self.img, self.L, Ts(D), Ts(H), Ts(W))
            )
        else:
            _fn(f"uf_init<{self.t}>")(self.lgrid, (256,), (self.img, self.L, np.uint64(self.N)))

    def merge(self):
        if self.block:
            k = f"buf_merge<{self.t}, {self.d3}, {self.aligned}>"
            self._b(k, self.img, self.L, *self.geo, *self.bdims)
        else:
            D, H, W = self.dims
            Ts = self.T.type
            _fn(f"uf_merge<{self.t}, {self.conn}>")(
                self.vgrid, self.vblock, (self.img, self.L, Ts(D), Ts(H), Ts(W))
            )

    def _compress(self, mark: bool):
        ic = "true" if self.alg.endswith("_ic") or self.alg == "ke" else "false"
        if self.block:
            m = "true" if mark else "false"
            self._b(
                f"blk_compress<{self.t}, {self.d3}, {ic}, {m}>",
                self.L,
                self.extra,
                self.bitmap,
                *self.geo,
                *self.bdims,
            )
        else:
            m = "true" if mark else "false"
            _fn(f"uf_compress_mark<{self.t}, {ic}, {m}>")(
                self.lgrid, (256,), (self.L, self.bitmap, np.uint64(self.N))
            )

    def compress(self):
        self._compress(False)

    def reduce(self):
        if self.alg == "bke_tile":
            TY, TZ, _ = self.tile
            k = f"tile_reduce<{self.t}, {self.d3}, {TY}, {TZ}>"
            self._b(k, self.L, self.extra, *self.geo, *self.bdims)
        elif self.block:
            k = f"bke_reduce<{self.t}, {self.d3}>"
            self._b(k, self.L, self.extra, *self.geo, *self.bdims)
        else:
            D, H, W = self.dims
            Ts = self.T.type
            _fn(f"ke_reduce<{self.t}, {self.conn}>")(
                self.vgrid, self.vblock, (self.img, self.L, Ts(D), Ts(H), Ts(W))
            )

    def compress_mark(self):
        self._compress(True)

    def scan(self):
        nw = np.uint64(self.nwords)
        _fn(f"scan_tile_sums<{self.t}>")((self.ntiles,), (256,), (self.bitmap, nw, self.tiles))
        _fn(f"scan_tiles<{self.t}>")((1,), (1024,), (self.tiles, np.uint64(self.ntiles)))
        _fn(f"scan_words<{self.t}>")(
            (self.ntiles,), (256,), (self.bitmap, nw, self.tiles, self.prefix)
        )

    def final(self):
        if self.block:
            self._b(
                f"blk_final<{self.t}, {self.d3}>",
                self.L,
                self.extra,
                self.bitmap,
                self.prefix,
                *self.geo,
                *self.bdims,
            )
        else:
            _fn(f"uf_final<{self.t}>")(
                self.lgrid, (256,), (self.L, self.bitmap, self.prefix, np.uint64(self.N))
            )

    def steps(self):
        """(name, callable) in order; running them all labels the image."""
        if self.alg == "bke_tile":  # the tile pass leaves depth-1 trees: no Compression
            mid = [("init", self.init), ("reduce", self.reduce)]
        elif self.alg.startswith("bke") or self.alg == "ke":
            mid = [("init", self.init), ("compress", self.compress), ("reduce", self.reduce)]
        else:
            mid = [("init", self.init), ("merge", self.merge)]
        return [
            ("alloc", self.alloc),
            *mid,
            ("compress+mark", self.compress_mark),
            ("scan", self.scan),
            ("final", self.final),
        ]

    def count(self) -> int:
        return int(self.tiles[self.ntiles].get())

    def first(self, n: int):
        """Raster index of the first voxel of labels 1..n (int64 CuPy array)."""
        out = self.cp.empty(n, np.int64)
        if n:
            grid = (min(_cdiv(self.nwords, 256), 1 << 20),)
            _fn(f"first_from_bitmap<{self.t}>")(
                grid, (256,), (self.bitmap, self.prefix, np.uint64(self.nwords), out)
            )
        return out


def _check(image, connectivity: int, algorithm: str):
    if image.ndim not in (2, 3):
        raise ValueError(f"tilelabel labels 2D and 3D arrays; got {image.ndim} dimension(s)")
    full = 3**image.ndim - 1
    if algorithm in BLOCK_ALGORITHMS and connectivity != full:
        raise ValueError(f"{algorithm} serves only {full}-connectivity in {image.ndim}D")


def label_device(image, dtype, connectivity: int, algorithm: str, want_first: bool = False):
    """Label a C-contiguous uint8 CuPy array (nonzero is foreground): ``(labels, n[, first])``.

    ``dtype`` uint32 or uint64. Above 2^31 - 1 voxels (block algorithms) or 2^32 - 1 voxels (pixel
    algorithms) the forest needs 64-bit entries: a uint32 result is then computed in uint64 and
    narrowed (an allocation the papers never need, for sizes they never meet).
    """
    import cupy as cp

    dtype = np.dtype(dtype)
    if dtype not in _TNAME:
        raise ValueError(f"label dtype must be uint32 or uint64, got {dtype}")
    _check(image, connectivity, algorithm)
    if image.dtype != np.uint8 or not image.flags.c_contiguous:
        raise ValueError("the CUDA kernels take a C-contiguous uint8 CuPy array")
    n_vox = int(image.size)
    if n_vox == 0:
        out = cp.zeros(image.shape, dtype)
        return (out, 0, cp.empty(0, np.int64)) if want_first else (out, 0)
    # 32-bit work needs every index below the tag bit of the block forest (2^31) for the block
    # algorithms, below the background sentinel (2^32 - 1) for the pixel ones
    limit = 2**31 - 1 if algorithm in BLOCK_ALGORITHMS else UINT32_MAX
    work = dtype if (dtype == np.uint64 or n_vox <= limit) else np.dtype(np.uint64)
    run = _Run(image, work, connectivity, algorithm)
    for _, step in run.steps():
        step()
    n = run.count()
    labels = run.L
    if work != dtype:
        if n > UINT32_MAX:
            raise LabelOverflowError(f"{n} labels do not fit in uint32; use uint64")
        labels = labels.astype(dtype)
    if want_first:
        return labels, n, run.first(n)
    return labels, n


def _make(connectivity: int, algorithm: str):
    def kernel(image, dtype):
        return label_device(image, dtype, connectivity, algorithm)

    kernel.__name__ = f"cuda_{algorithm}_{connectivity}"
    return kernel


for _ndim, _conn in ((2, 8), (3, 26)):
    for _alg in BLOCK_ALGORITHMS + PIXEL_ALGORITHMS:
        register("cuda", _ndim, _conn, _alg)(_make(_conn, _alg))
for _ndim, _conn in ((2, 4), (3, 6), (3, 18)):
    for _alg in PIXEL_ALGORITHMS:
        register("cuda", _ndim, _conn, _alg)(_make(_conn, _alg))


def overlap() -> bool:
    """Whether a worker's host threads get their own streams and page-locked transfers (the
    default); ``TILELABEL_CUDA_OVERLAP=0`` turns both off, for comparisons."""
    return os.environ.get("TILELABEL_CUDA_OVERLAP", "1") != "0"


#: host arrays from this size on are uploaded through page-locked memory
_PINNED_FROM = 8 << 20


def upload(block):
    """A host array on the device (CuPy arrays pass through).

    Large arrays go through page-locked memory: a pageable copy holds a driver lock for its whole
    length, which stalls every other host thread's CUDA calls (stream events, allocations); the
    staged copy is a CPU memcpy with the GIL released, then a DMA.
    """
    import cupy as cp

    if isinstance(block, cp.ndarray) or not overlap() or block.nbytes < _PINNED_FROM:
        return cp.asarray(block)
    import cupyx

    staged = cupyx.empty_pinned(block.shape, block.dtype)
    np.copyto(staged, block)
    out = cp.empty(block.shape, block.dtype)
    out.set(staged)
    # CuPy's pinned pool takes ``staged`` back when it is dropped, whatever the stream is doing
    cp.cuda.get_current_stream().synchronize()
    return out


def foreground_device(block):
    """Nonzero is foreground: a C-contiguous uint8 CuPy array of 0/1 (moves host arrays over)."""
    import cupy as cp

    a = upload(block)
    if a.dtype == np.bool_:
        return cp.ascontiguousarray(a).view(np.uint8)
    if a.dtype == np.uint8:
        return cp.ascontiguousarray(a)  # the kernels read any nonzero byte as foreground
    return (a != 0).view(np.uint8)


@functools.cache
def _bit_kernels():
    import cupy as cp

    # CuPy's own packbits indexes with int: these take chunks past 2^31 voxels. Bit order is
    # numpy's (first voxel in the high bit), so host and device packs are interchangeable.
    pack = cp.ElementwiseKernel(
        "raw uint8 fg, int64 size",
        "uint8 packed",
        """unsigned char b = 0;
        long long k = (long long)i * 8;
        for (int j = 0; j < 8 && k + j < size; ++j) b |= (fg[k + j] != 0) << (7 - j);
        packed = b;""",
        "tilelabel_pack_bits",
    )
    unpack = cp.ElementwiseKernel(
        "raw uint8 packed",
        "uint8 fg",
        "fg = (packed[i >> 3] >> (7 - (i & 7))) & 1;",
        "tilelabel_unpack_bits",
    )
    return pack, unpack


_local = threading.local()


@contextlib.contextmanager
def thread_stream():
    """Run on this host thread's own non-blocking stream, ordered after the caller's stream.

    A GPU worker runs several tasks at once in its host threads; on the legacy default stream
    every copy and kernel of every thread would queue behind the others. The caller's stream
    waits for ours on exit, so arrays handed back are safe to use there.
    Off with :func:`overlap` (everything on the caller's stream).
    """
    import cupy as cp

    if not overlap():
        yield
        return
    dev = cp.cuda.Device().id
    stream = getattr(_local, "streams", {}).get(dev)
    if stream is None:
        stream = cp.cuda.Stream(non_blocking=True)
        _local.streams = {**getattr(_local, "streams", {}), dev: stream}
    caller = cp.cuda.get_current_stream()
    stream.wait_event(caller.record())
    with stream:
        yield
    caller.wait_event(stream.record())


def _on_thread_stream(method):
    @functools.wraps(method)
    def run(*args, **kwargs):
        with thread_stream():
            return method(*args, **kwargs)

    return run


def _lut_take(labels, lut):
    """``lut[labels]`` on the device (a host ``lut`` is copied over)."""
    import cupy as cp

    return cp.take(cp.asarray(np.ascontiguousarray(lut)), cp.asarray(labels))


class CUDABackend:
    """The ``cuda`` backend: labels stay on the GPU; everything handed back is numpy."""

    name = "cuda"

    @_on_thread_stream
    def label(self, block, connectivity, dtype, algorithm=None):
        return self._label(block, connectivity, dtype, algorithm, False)

    @_on_thread_stream
    def label_first(self, block, connectivity, dtype, algorithm=None):
        import cupy as cp

        # the kernels find each label's first voxel as they number the labels
        labels, n, first = self._label(block, connectivity, dtype, algorithm, True)
        return labels, n, cp.asnumpy(first)

    def _label(self, block, connectivity, dtype, algorithm, first):
        from tilelabel.kernels.registry import DEFAULTS

        img = foreground_device(block)
        if algorithm is None:
            algorithm = DEFAULTS[("cuda", img.ndim, int(connectivity))]
        return label_device(img, dtype, int(connectivity), algorithm, first)

    @_on_thread_stream
    def foreground(self, block):
        return foreground_device(block)

    @_on_thread_stream
    def pack(self, fg):
        import cupy as cp

        fg = cp.ascontiguousarray(fg)
        out = cp.empty((fg.size + 7) // 8, np.uint8)
        return _bit_kernels()[0](fg, np.int64(fg.size), out)

    @_on_thread_stream
    def unpack(self, packed, shape):
        import cupy as cp

        return _bit_kernels()[1](packed, cp.empty(tuple(shape), np.uint8))

    @_on_thread_stream
    def first_indices(self, labels, n):
        import cupy as cp

        if n == 0:
            return np.empty(0, dtype=np.int64)
        labels = cp.ascontiguousarray(cp.asarray(labels))
        t = _TNAME.get(labels.dtype)
        if t is None:
            labels = labels.astype(np.uint64)
            t = _TNAME[labels.dtype]
        out = cp.full(n, np.iinfo(np.uint64).max, dtype=np.uint64)
        grid = (min(_cdiv(labels.size, 256), 1 << 20),)
        _fn(f"first_from_labels<{t}>")(grid, (256,), (labels, np.uint64(labels.size), out))
        return cp.asnumpy(out).astype(np.int64)

    @_on_thread_stream
    def to_host(self, arr):
        import cupy as cp

        return cp.asnumpy(arr) if isinstance(arr, cp.ndarray) else np.asarray(arr)

    @_on_thread_stream
    def apply_lut(self, labels, lut, staging=False):
        import cupy as cp

        out_d = _lut_take(labels, lut)
        if not staging or not overlap():
            return cp.asnumpy(out_d)
        # page-locked memory from CuPy's pinned pool: the copy back runs at full bus speed
        # instead of through the driver's pageable staging (a 512^3 chunk: ~25 ms, not ~200)
        import cupyx

        out = cupyx.empty_pinned(out_d.shape, out_d.dtype)
        out_d.get(out=out)
        return out

    def device(self):
        return device_id()

    def can_encode(self, codec):
        from tilelabel.kernels import gpu_codec

        return codec == "zstd" and gpu_codec.available()

    @_on_thread_stream
    def warm_encoder(self, codec):
        from tilelabel.kernels import gpu_codec

        if self.can_encode(codec):
            gpu_codec.warm()

    def encoder_ready(self, codec):
        from tilelabel.kernels import gpu_codec

        return self.can_encode(codec) and gpu_codec.WARM.is_set()

    @_on_thread_stream
    def encode_tiles(self, labels, lut, tile, codec):
        from tilelabel.kernels import gpu_codec

        if not self.can_encode(codec):
            raise ValueError(f"the cuda backend cannot encode {codec!r} here")
        return gpu_codec.zstd_tiles(_lut_take(labels, lut), tuple(tile))

    @_on_thread_stream
    def label_stats(self, labels, n, offset, intensity=None):
        from tilelabel.kernels.gpu_stats import label_stats_device

        return label_stats_device(labels, n, offset, intensity)

    def label_stats_first(self, labels, n, offset, intensity=None):
        # label() already has the first voxels: nothing to fuse
        return self.label_stats(labels, n, offset, intensity), self.first_indices(labels, n)


def device_id() -> str:
    """The current GPU's identity across processes: its PCI bus id (``CUDA_VISIBLE_DEVICES``
    renumbers devices per process; the bus id stays)."""
    import cupy as cp

    return cp.cuda.Device().pci_bus_id


def device_memory(
    block_shape: tuple[int, ...], dtype, connectivity: int, encode: bool = False
) -> tuple[int, int, int, str]:
    """(bytes labeling and relabeling one chunk of ``block_shape`` can take on this GPU, bytes
    free on the device now, bytes free in this process's CuPy pool, the device's PCI bus id).

    The bus id tells which processes share a GPU: the device's free bytes are theirs together,
    each pool's free blocks only its own.

    Peak: the input (and its 0/1 copy), the labels, the relabeled output, the scan words, and
    per possible label its first-voxel index and LUT entry; a quarter more for pool slack.
    ``encode``: plus nine times the output's size for
    :func:`~tilelabel.kernels.gpu_codec.zstd_tiles`: its copy of the tiles, the frames, and
    nvCOMP's scratch (measured: 8.9 times the tiles' bytes in all, ``benchmarks/gpu_encode.py``).
    """
    import cupy as cp

    from tilelabel.connectivity import max_components

    voxels = int(np.prod(block_shape, dtype=np.int64))
    item = np.dtype(dtype).itemsize
    labels = max_components(tuple(block_shape), int(connectivity))
    need = voxels * (2 + (11 if encode else 2) * item) + voxels // 32 * (4 + item)
    need += labels * (8 + item)
    dev = cp.cuda.Device()
    free, _ = dev.mem_info
    return (
        int(need * 1.25),
        int(free),
        int(cp.get_default_memory_pool().free_bytes()),
        device_id(),
    )
