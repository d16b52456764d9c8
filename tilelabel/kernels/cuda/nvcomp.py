"""Storage tiles compressed to zstd, and chunks in zstd, gzip, zlib or LZ4 decoded, on the GPU
through nvCOMP's C library (``nvidia-libnvcomp-cu12/13``, release 6, whose calls these are).

Writing labels costs more than computing them, and a GPU compresses them faster than the host's
cores do while leaving those cores free (``benchmarks/gpu_encode.py`` compares the two).
nvCOMP's zstd output is a standard zstd frame, so any zstd decoder (numcodecs, zarr) reads the
chunks; it compresses a little less tightly than zstd's default level.

Its batched C calls are made through ctypes, which lets go of the GIL for each, with every
buffer (the frames, nvCOMP's scratch) from CuPy's pool on the calling thread's stream: a worker's
other threads run while a batch is set up, and no batch allocates or frees device memory of its
own (a free waits for the whole device).

Knows nothing of zarr: it compresses tiles and hands back host bytes. The backend offers it as
its encoder (:class:`tilelabel.kernels.cuda.backend.CUDAEncoder`).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import numpy as np

from tilelabel.kernels.cuda.tiles import tile_grid
from tilelabel.kernels.cuda.transfer import empty_pinned

#: the nvCOMP release whose batched calls this module makes
_MAJOR = 6
#: where each frame, decoded tile and scratch starts, in bytes: above nvCOMP's alignments
_ALIGN = 256


class _CompressOpts(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _DecompressOpts(ctypes.Structure):
    # every codec's defaults are zeros: nvCOMP picks the backend (a hardware decoder where the
    # GPU has one), bytes as the data type, no bitshuffle
    _fields_ = [("reserved", ctypes.c_char * 64)]


#: per codec a block may be stored in (the names of :class:`tilelabel.storage.RawChunks`):
#: nvCOMP's name for its batched decoder, and the bytes to cut from the front and back of each
#: stored frame to leave what that decoder reads (numcodecs' LZ4 leads with the size; zlib
#: wraps raw deflate in a 2-byte header and a 4-byte checksum)
DECODERS = {
    "zstd": ("Zstd", 0, 0),
    "gzip": ("Gzip", 0, 0),
    "zlib": ("Deflate", 2, 4),
    "lz4": ("LZ4", 4, 0),
}


class _Properties(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("cudart_version", ctypes.c_uint32)]


@functools.cache
def _lib() -> ctypes.CDLL | None:
    """nvCOMP's library with the batched calls made here typed; None where it is missing or of
    another major release (whose calls differ)."""
    try:
        from nvidia.libnvcomp.load import load_library

        lib = load_library()  # the wheel's library, else the system's (its own rule)
    except (ImportError, OSError):
        return None
    props = _Properties()
    if lib is None or lib.nvcompGetProperties(ctypes.byref(props)):
        return None
    if props.version // 1000 != _MAJOR:
        return None
    n, p, n_out = ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)
    compress, decompress = _CompressOpts, _DecompressOpts
    signatures = {  # as in zstd.h etc.: every pointer a device address but the sizes out (n_out)
        "nvcompBatchedZstdCompressGetMaxOutputChunkSize": (n, compress, n_out),
        "nvcompBatchedZstdCompressGetTempSize": (n, n, compress, n_out, n, p),
        "nvcompBatchedZstdCompressAsync": (p, p, n, n, p, n, p, p, compress, p, p),
        "nvcompGetStatusString": (ctypes.c_int,),
    }
    sizing, decoding = (n, n, decompress, n_out, n, p), (p, p, p, p, n, p, n, p, decompress, p, p)
    for name, _, _ in DECODERS.values():
        signatures[f"nvcompBatched{name}DecompressGetTempSize"] = sizing
        signatures[f"nvcompBatched{name}DecompressAsync"] = decoding
    try:
        for name, args in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
    except AttributeError:  # a build without one of them
        return None
    lib.nvcompGetStatusString.restype = ctypes.c_char_p
    return lib


def _check(status: int, what: str) -> None:
    if status:
        text = _lib().nvcompGetStatusString(status).decode()
        raise RuntimeError(f"nvCOMP {what} failed: {text} ({status})")


def _round_up(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _pointers(base: int, starts) -> Any:
    """A device array of ``base + start`` for each of ``starts`` (bytes), for nvCOMP."""
    import cupy as cp

    return cp.asarray(np.asarray(starts, np.uint64) + np.uint64(base))


def _compress_sizes(n: int, size: int) -> tuple[int, int]:
    """(bytes a frame may take, nvCOMP's scratch) for zstd over ``n`` tiles of ``size`` bytes."""
    import cupy as cp

    lib, opts = _lib(), _CompressOpts()
    most, temp = ctypes.c_size_t(), ctypes.c_size_t()
    _check(
        lib.nvcompBatchedZstdCompressGetMaxOutputChunkSize(size, opts, ctypes.byref(most)),
        "zstd sizing",
    )
    stream = cp.cuda.get_current_stream().ptr
    _check(
        lib.nvcompBatchedZstdCompressGetTempSize(
            n, size, opts, ctypes.byref(temp), n * size, stream
        ),
        "zstd sizing",
    )
    return most.value, temp.value


def _decompress_temp(name: str, n: int, size: int) -> int:
    """nvCOMP's scratch for its ``name`` decoder over ``n`` tiles of ``size`` bytes."""
    import cupy as cp

    temp = ctypes.c_size_t()
    _check(
        getattr(_lib(), f"nvcompBatched{name}DecompressGetTempSize")(
            n,
            size,
            _DecompressOpts(),
            ctypes.byref(temp),
            n * size,
            cp.cuda.get_current_stream().ptr,
        ),
        f"{name} sizing",
    )
    return temp.value


def _tiles(shape: tuple[int, ...], tile: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """(tiles of ``tile`` a block of ``shape`` holds, bytes of one tile)."""
    n = int(np.prod([-(-s // t) for s, t in zip(shape, tile, strict=True)]))
    return n, int(np.prod(tile)) * itemsize


def encode_bytes(shape: tuple[int, ...], tile: tuple[int, ...], itemsize: int) -> int:
    """Device bytes compressing a block of ``shape`` (``itemsize`` bytes a voxel) in tiles of
    ``tile`` takes beside the block (:func:`zstd_tiles`): the tiles, their frames, the frames
    joined, and nvCOMP's scratch as it sizes it (megabytes a tile, however small the tile)."""
    n, size = _tiles(shape, tile, itemsize)
    most, temp = _compress_sizes(n, size)
    return 2 * n * size + n * _round_up(most) + temp


def decode_bytes(shape: tuple[int, ...], tile: tuple[int, ...], itemsize: int) -> int:
    """Device bytes decoding a block of ``shape`` from tiles of ``tile`` takes beside the block
    (:func:`decode_block`): the frames (at most the tiles' bytes), the decoded tiles and the
    scratch of the hungriest of :data:`DECODERS`."""
    n, size = _tiles(shape, tile, itemsize)
    temp = max(_decompress_temp(name, n, size) for name, _, _ in DECODERS.values())
    return n * size + n * _round_up(size) + temp


@functools.cache
def available() -> bool:
    """True when nvCOMP's library (release 6) loads."""
    return _lib() is not None


#: set once a thread of this process has run nvCOMP (:func:`warm`)
WARM = threading.Event()


def warm(block: Any) -> None:
    """Compress the device array ``block``'s 2-voxel tiles (a tiny labels block): a process's
    first nvCOMP batch loads the library's kernels (up to seconds on a fresh node), and the
    tiles' kernels compile, which the first chunk written should not wait for."""
    zstd_tiles(block, (2,) * block.ndim)
    WARM.set()


#: 64 uint8 ones, as one zstd frame (what ``numcodecs.Zstd().encode`` makes of them)
_ONES_ZSTD = b"(\xb5/\xfd @E\x00\x00\x10\x01\x01\x01\x00\x93\x00\x16"


@functools.cache
def warm_decoder() -> None:
    """Decode one small frame, so that this process has loaded nvCOMP's decoder (its kernels
    take device memory for good): a run that decodes its input on the GPU asks for the free
    memory after this (:func:`tilelabel.kernels.cuda.backend.device_memory`)."""
    frame = np.frombuffer(_ONES_ZSTD, np.uint8)
    decode_block("zstd", {(0,): frame}, (64,), (64,), np.uint8)


#: the nonzero flags' kernel, reading 4 bytes at a time or one
_NONZERO = {True: "tile_nonzero<unsigned int>", False: "tile_nonzero<unsigned char>"}


def instantiations() -> dict[str, set[str]]:
    """Every name expression the writing pass can launch (:mod:`.shipped`)."""
    return {"tiles": set(_NONZERO.values())}


def _nonzero(tiles):
    """``uint8`` flags, 1 where a tile of ``tiles`` (``(n, *tile)``, C-contiguous) is not all
    zero (``tiles.cu``)."""
    import cupy as cp

    from tilelabel.kernels.cuda.compile import kernels

    flat = tiles.reshape(tiles.shape[0], -1).view(np.uint8)
    flags = cp.empty(len(flat), np.uint8)
    if not flat.size:
        return flags
    whole = flat.shape[1] % 4 == 0 and flat.data.ptr % 4 == 0  # read 4 bytes at a time
    words = flat.view(np.uint32) if whole else flat
    name = _NONZERO[whole]
    kernel = kernels("tiles", (name,))[name]
    kernel((len(flat),), (256,), (words, np.int64(words.shape[1]), flags))
    return flags


def zstd_tiles(block: Any, tile: tuple[int, ...]) -> dict[tuple[int, ...], memoryview]:
    """Each nonzero tile of the device array ``block`` as a zstd frame in host memory, keyed by
    its tile index within the block (in C order of the tile grid, as zarr names chunks; all-zero
    tiles are left out). Runs on the current CuPy stream.

    All of a block's tiles go to nvCOMP in one batch: larger batches compress faster (one slab
    at a time runs at about half the speed, ``benchmarks/gpu_encode.py``). The batch's scratch
    (several times the tiles' bytes) and frames come from CuPy's pool, and are back there when
    this returns.
    """
    import cupy as cp

    from tilelabel.kernels.cuda import ops

    lib = _lib()
    stream = cp.cuda.get_current_stream()
    grid = tile_grid(tuple(block.shape), tuple(tile))
    size = int(np.prod(tile)) * block.dtype.itemsize
    # every tile in one gather, each at a 256-byte boundary (nvCOMP reads from 4-byte ones)
    gathered = ops.tiles_gather(block, tile, _round_up(size) // block.dtype.itemsize)
    flat = gathered.view(np.uint8)
    nonzero = cp.asnumpy(_nonzero(flat))  # one copy back of every tile's flag
    keep = np.flatnonzero(nonzero)
    if not keep.size:
        return {}
    indices = [tuple(int(i) for i in np.unravel_index(k, grid)) for k in keep]
    tiles = [flat[k, :size] for k in keep.tolist()]
    n = len(tiles)
    most, temp_bytes = _compress_sizes(n, size)
    opts = _CompressOpts()
    stride = _round_up(most)
    temp = cp.empty(max(temp_bytes, 1), np.uint8)
    frames = cp.empty(n * stride, np.uint8)
    sources = _pointers(0, [t.data.ptr for t in tiles])
    targets = _pointers(frames.data.ptr, np.arange(n) * stride)
    lengths = ops.full(n, size, np.uint64)
    sizes, statuses = cp.empty(n, np.uint64), cp.empty(n, np.int32)
    _check(
        lib.nvcompBatchedZstdCompressAsync(
            *(sources.data.ptr, lengths.data.ptr, size, n, temp.data.ptr, temp_bytes),
            *(targets.data.ptr, sizes.data.ptr, opts, statuses.data.ptr, stream.ptr),
        ),
        "zstd compression",
    )
    stream.synchronize()  # CuPy lets go of the GIL while it waits
    sizes, statuses = sizes.get(stream=stream), statuses.get(stream=stream)
    for k in np.flatnonzero(statuses)[:1]:
        _check(int(statuses[k]), f"zstd compression of tile {indices[k]}")
    offsets = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1].astype(np.int64), out=offsets[1:])
    total = int(offsets[-1] + sizes[-1])
    joined = ops.pack_frames(frames, stride, cp.asarray(sizes), offsets, total)
    host = empty_pinned(joined.shape, np.uint8)
    joined.get(stream=stream, out=host)
    del temp, frames, joined, gathered
    stream.synchronize()
    view = memoryview(host)
    out: dict[tuple[int, ...], memoryview] = {}
    start = 0
    for idx, length in zip(indices, sizes.tolist(), strict=True):
        out[idx] = view[start : start + length]
        start += length
    return out


def decode_block(
    codec: str,
    tiles: dict[tuple[int, ...], bytes],
    tile: tuple[int, ...],
    shape: tuple[int, ...],
    dtype,
) -> Any:
    """The device array of ``shape`` and ``dtype`` whose storage tiles of shape ``tile`` are
    the ``codec`` frames ``tiles`` (a codec of :data:`DECODERS`; keyed by tile index within the
    block, as :func:`zstd_tiles` makes them; a tile not given is all zero), decoded on the GPU.
    Edge tiles hold a whole tile, of which the part inside the block is kept. Runs on the
    current CuPy stream.

    The frames go over in one copy and nvCOMP decodes them in one batch; a frame that does
    not decode to a whole tile raises a ValueError."""
    import cupy as cp

    from tilelabel.kernels.cuda import ops

    lib, (name, head, tail) = _lib(), DECODERS[codec]
    dtype = np.dtype(dtype)
    out = cp.zeros(shape, dtype)
    if not tiles:
        return out
    stream = cp.cuda.get_current_stream()
    idxs = list(tiles)
    frames = [np.frombuffer(tiles[i], np.uint8) for i in idxs]
    frames = [f[head : f.size - tail] for f in frames]
    n, lengths = len(frames), np.array([f.size for f in frames], np.uint64)
    starts = np.zeros(n, np.int64)
    starts[1:] = np.cumsum([_round_up(f.size) for f in frames[:-1]])
    host = empty_pinned(int(starts[-1]) + frames[-1].size, np.uint8)
    for frame, start in zip(frames, starts.tolist(), strict=True):
        host[start : start + frame.size] = frame
    packed = cp.empty(host.shape, np.uint8)
    packed.set(host, stream=stream)
    want = int(np.prod(tile)) * dtype.itemsize
    stride = _round_up(want)
    opts, temp_bytes = _DecompressOpts(), _decompress_temp(name, n, want)
    temp = cp.empty(max(temp_bytes, 1), np.uint8)
    decoded = cp.empty((n, stride), np.uint8)
    sources = _pointers(packed.data.ptr, starts)
    targets = _pointers(decoded.data.ptr, np.arange(n) * stride)
    room, got = ops.full(n, want, np.uint64), cp.empty(n, np.uint64)
    statuses, compressed = cp.empty(n, np.int32), cp.asarray(lengths)
    _check(
        getattr(lib, f"nvcompBatched{name}DecompressAsync")(
            *(sources.data.ptr, compressed.data.ptr, room.data.ptr, got.data.ptr, n),
            *(temp.data.ptr, temp_bytes, targets.data.ptr, opts, statuses.data.ptr),
            stream.ptr,
        ),
        f"{codec} decompression",
    )
    stream.synchronize()  # CuPy lets go of the GIL while it waits
    got, statuses = got.get(stream=stream), statuses.get(stream=stream)
    for k in np.flatnonzero(statuses | (got != want))[:1]:
        held = f"{got[k]} bytes" if not statuses[k] else f"more, or is not {codec}"
        raise ValueError(f"a {codec} frame of tile {idxs[k]} holds {held}, not {want} bytes")
    grid = tile_grid(tuple(shape), tuple(tile))
    index = np.ravel_multi_index(tuple(np.array(idxs, np.int64).T), grid)
    ops.tiles_scatter(decoded.view(dtype), index, out, tile)
    # the frames and the scratch go back to CuPy's pool once the stream has used them (and
    # the page-locked frames to CuPy's pinned pool only once their copy is done)
    del temp, decoded, packed
    stream.synchronize()
    return out
