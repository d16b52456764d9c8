"""Moving arrays between the host and this thread's GPU, and the stream each host thread runs on.

A leaf of the ``cuda`` backend (:mod:`.backend`) and its statistics (:mod:`.stats`): host arrays
go over through page-locked memory when large, every method of the backend runs on its host
thread's own stream, and a GPU is named across processes by its PCI bus id. CuPy is imported only
when a function runs.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

#: host arrays from this size on are uploaded through page-locked memory
_PINNED_FROM = 8 << 20


def upload(block) -> Any:
    """A host array on the device (CuPy arrays pass through).

    Large arrays go through page-locked memory: a pageable copy holds a driver lock for its whole
    length, which stalls every other host thread's CUDA calls (stream events, allocations); the
    staged copy is a CPU memcpy with the GIL released, then a DMA.
    """
    import cupy as cp

    if isinstance(block, cp.ndarray) or block.nbytes < _PINNED_FROM:
        return cp.asarray(block)
    staged = empty_pinned(block.shape, block.dtype)
    np.copyto(staged, block)
    out = cp.empty(block.shape, block.dtype)
    out.set(staged)
    # CuPy's pinned pool takes ``staged`` back when it is dropped, whatever the stream is doing
    cp.cuda.get_current_stream().synchronize()
    return out


def empty_pinned(shape, dtype) -> np.ndarray:
    """``cupyx.empty_pinned`` without importing cupyx, which imports its scipy and linalg too:
    a host array in page-locked memory from CuPy's pinned pool, back there when dropped."""
    import cupy as cp

    dtype, shape = np.dtype(dtype), tuple(int(s) for s in np.atleast_1d(shape))
    count = int(np.prod(shape, dtype=np.int64))
    memory = cp.cuda.alloc_pinned_memory(max(count * dtype.itemsize, 1))
    return np.frombuffer(memory, dtype, count).reshape(shape)


def foreground_device(block) -> Any:
    """Nonzero is foreground: a C-contiguous uint8 CuPy array of 0/1 (moves host arrays over)."""
    import cupy as cp

    a = upload(block)
    if a.dtype == np.bool_:
        return cp.ascontiguousarray(a).view(np.uint8)
    if a.dtype == np.uint8:
        return cp.ascontiguousarray(a)  # the kernels read any nonzero byte as foreground
    from tilelabel.kernels.cuda import ops

    return ops.nonzero(a)


_local = threading.local()


@contextlib.contextmanager
def thread_stream() -> Iterator[None]:
    """Run on this host thread's own non-blocking stream, ordered after the caller's stream.

    A GPU worker runs several tasks at once in its host threads; on the legacy default stream
    every copy and kernel of every thread would queue behind the others. The caller's stream
    waits for ours on exit, so arrays handed back are safe to use there.
    """
    import cupy as cp

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


def on_thread_stream(method):
    @functools.wraps(method)
    def run(*args, **kwargs):
        with thread_stream():
            return method(*args, **kwargs)

    return run


def device_id() -> str:
    """The current GPU's identity across processes: its PCI bus id (``CUDA_VISIBLE_DEVICES``
    renumbers devices per process; the bus id stays)."""
    import cupy as cp

    return cp.cuda.Device().pci_bus_id
