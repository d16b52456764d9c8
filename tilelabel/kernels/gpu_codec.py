"""zstd compression of storage tiles on the GPU, through nvCOMP (``nvidia-nvcomp-cu12/13``).

Writing labels costs more than computing them, and a GPU compresses them faster than the host's
cores do while leaving those cores free (``benchmarks/gpu_encode.py`` compares the two).
nvCOMP's RAW zstd output is a standard zstd frame, so any zstd decoder (numcodecs, zarr) reads
the chunks; it compresses a little less tightly than zstd's default level.

Knows nothing of zarr: it compresses tiles and hands back host bytes. The backend offers it as
its encoder (:class:`tilelabel.kernels.gpu.CUDAEncoder`).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np

from tilelabel.kernels.tiles import tile_slabs


@functools.cache
def available() -> bool:
    """True when nvCOMP's Python module imports (and with it its library)."""
    try:
        from nvidia import nvcomp  # noqa: F401
    except Exception:
        return False
    return True


def _codec(stream):
    """A new nvCOMP zstd codec on ``stream``, the calling thread's own (see
    :func:`tilelabel.kernels.gpu.thread_stream`), for one batch.

    One codec per batch, never kept: a codec holds its state and scratch (gigabytes after a
    512^3 chunk) until it is dropped, so codecs kept per worker thread hold device memory that
    the next run's chunks need, while making one costs next to nothing beside a batch. The
    caller drops it before its stream (the other order crashes the process)."""
    import cupy as cp
    from nvidia import nvcomp

    return nvcomp.Codec(
        algorithm="Zstd",
        bitstream_kind=nvcomp.BitstreamKind.RAW,
        device_id=cp.cuda.Device().id,
        cuda_stream=stream.ptr,
    )


#: set once a thread of this process has run nvCOMP (:func:`warm`)
WARM = threading.Event()


def warm(block: Any) -> None:
    """Compress the device array ``block``'s 2-voxel tiles (a tiny labels block): a process's
    first nvCOMP batch loads the library's kernels (up to seconds on a fresh node), and the
    tiles' kernels compile, which a caller holding a shared encoder turn should not spend."""
    zstd_tiles(block, (2,) * block.ndim)
    WARM.set()


@functools.cache
def warm_decoder() -> None:
    """Decode one small frame, so that this process has loaded nvCOMP's decoder (its kernels
    take device memory for good): a run that decodes its input on the GPU asks for the free
    memory after this (:func:`tilelabel.kernels.gpu.device_memory`)."""
    import numcodecs

    frame = np.frombuffer(numcodecs.Zstd().encode(np.ones(64, np.uint8)), np.uint8)
    zstd_block({(0,): frame}, (64,), (64,), np.uint8)


def _nonzero(tiles):
    """``uint8`` flags, 1 where a tile of ``tiles`` (``(n, *tile)``, C-contiguous) is not all
    zero (``tiles.cu``)."""
    import cupy as cp

    from tilelabel.kernels.gpu_compile import kernels

    flat = tiles.reshape(tiles.shape[0], -1).view(np.uint8)
    flags = cp.empty(len(flat), np.uint8)
    if not flat.size:
        return flags
    whole = flat.shape[1] % 4 == 0 and flat.data.ptr % 4 == 0  # read 4 bytes at a time
    words = flat.view(np.uint32) if whole else flat
    name = f"tile_nonzero<{'unsigned int' if whole else 'unsigned char'}>"
    kernel = kernels("tiles", (name,))[name]
    kernel((len(flat),), (256,), (words, np.int64(words.shape[1]), flags))
    return flags


def _items(batch) -> list:
    try:
        return list(batch)
    except TypeError:  # a batch that only indexes
        return [batch[i] for i in range(len(batch))]


def zstd_tiles(block: Any, tile: tuple[int, ...]) -> dict[tuple[int, ...], memoryview]:
    """Each nonzero tile of the device array ``block`` as a zstd frame in host memory, keyed by
    its tile index within the block (see :func:`tilelabel.kernels.tiles.tile_slabs`; all-zero
    tiles are left out). Runs on the current CuPy stream.

    All of a block's tiles go to nvCOMP in one batch: larger batches compress faster (one slab
    at a time runs at about half the speed, ``benchmarks/gpu_encode.py``). For the batch nvCOMP
    takes scratch of about 7 times the tiles' bytes outside CuPy's pool (its default
    allocator); the batch's codec is dropped and the stream synchronized before this returns,
    so that all of it is back on the device (see :func:`_codec`).
    """
    import cupy as cp
    import cupyx
    from nvidia import nvcomp

    stream = cp.cuda.get_current_stream()
    slabs = list(tile_slabs(block, tile, cp, _nonzero))
    if not slabs:
        return {}
    # one copy back of every slab's flags, not one wait per slab
    nonzero = cp.asnumpy(cp.concatenate([s[2] for s in slabs]))
    indices, tiles, seen = [], [], 0
    for slab_indices, slab, _ in slabs:
        flat = slab.reshape(slab.shape[0], -1).view(np.uint8)
        for k, idx in enumerate(slab_indices):
            if nonzero[seen + k]:
                indices.append(idx)
                tiles.append(flat[k])
        seen += len(slab_indices)
    if not tiles:
        return {}
    codec = _codec(stream)
    encoded = codec.encode(nvcomp.as_arrays(tiles, stream.ptr))
    stream.synchronize()
    parts = [cp.asarray(e).view(np.uint8).ravel() for e in _items(encoded)]
    joined = cp.concatenate(parts) if len(parts) > 1 else parts[0]
    host = cupyx.empty_pinned(joined.shape, np.uint8)
    joined.get(stream=stream, out=host)
    sizes = [part.size for part in parts]
    # the codec's scratch and frames are freed in stream order, after the copy; the device
    # gets them back at this stream's next synchronization, which in an idle worker may not
    # come before the next run's memory check: one synchronization waits for the copy and
    # gives them back
    del encoded, parts, joined, codec
    stream.synchronize()
    view = memoryview(host)
    out: dict[tuple[int, ...], memoryview] = {}
    start = 0
    for idx, size in zip(indices, sizes, strict=True):
        out[idx] = view[start : start + size]
        start += size
    return out


def zstd_block(
    tiles: dict[tuple[int, ...], bytes], tile: tuple[int, ...], shape: tuple[int, ...], dtype
) -> Any:
    """The device array of ``shape`` and ``dtype`` whose storage tiles of shape ``tile`` are
    the zstd frames ``tiles`` (keyed by tile index within the block, as
    :func:`zstd_tiles` makes them; a tile not given is all zero), decoded on the GPU. Edge
    tiles hold a whole tile, of which the part inside the block is kept. Runs on the current
    CuPy stream.

    The frames go over in one copy and nvCOMP decodes them in one batch; a frame that does
    not decode to a whole tile raises a ValueError."""
    import cupy as cp
    import cupyx
    from nvidia import nvcomp

    dtype = np.dtype(dtype)
    out = cp.zeros(shape, dtype)
    if not tiles:
        return out
    stream = cp.cuda.get_current_stream()
    idxs = list(tiles)
    frames = [np.frombuffer(tiles[i], np.uint8) for i in idxs]
    sizes = [f.size for f in frames]
    ends = np.cumsum(sizes)
    host = cupyx.empty_pinned(int(ends[-1]), np.uint8)
    for frame, end, size in zip(frames, ends, sizes, strict=True):
        host[end - size : end] = frame
    packed = cp.empty(host.shape, np.uint8)
    packed.set(host, stream=stream)
    parts = [packed[end - size : end] for end, size in zip(ends, sizes, strict=True)]
    codec = _codec(stream)
    decoded = codec.decode(nvcomp.as_arrays(parts, stream.ptr))
    # wait here, where CuPy lets go of the GIL: nvCOMP's own wait, in reading the batch's
    # arrays, holds it, and the worker's other threads stop meanwhile
    stream.synchronize()
    want = int(np.prod(tile)) * dtype.itemsize
    for idx, part in zip(idxs, _items(decoded), strict=True):
        flat = cp.asarray(part).view(np.uint8).ravel()
        if flat.size != want:
            raise ValueError(f"a zstd frame of tile {idx} holds {flat.size} bytes, not {want}")
        where = tuple(
            slice(i * t, min((i + 1) * t, n)) for i, t, n in zip(idx, tile, shape, strict=True)
        )
        inside = tuple(slice(0, w.stop - w.start) for w in where)
        out[where] = flat.view(dtype).reshape(tile)[inside]
    # the frames, the codec's scratch and its output go back to the device before this returns
    # (and the page-locked frames to CuPy's pool only once their copy is done)
    del decoded, parts, codec
    stream.synchronize()
    return out
