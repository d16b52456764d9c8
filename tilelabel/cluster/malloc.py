"""Every worker of a run reuses the memory of the arrays it frees.

dask's nannies start their workers with ``MALLOC_TRIM_THRESHOLD_`` set (its config's
``distributed.nanny.pre-spawn-environ``), and a process that started a nanny hands it on to
every process it starts later. Set, it also fixes glibc's mmap threshold at 128 KiB: every larger
array (a chunk's row counts, a storage chunk's bytes) is mapped, faulted in page by page and
unmapped again when freed, and a worker's other threads wait on its page tables meanwhile.
:class:`ReuseFreedMemory` gives each worker the thresholds glibc's own adaptive rule settles at.
"""

from __future__ import annotations

import ctypes
import functools
import weakref

from distributed import Client, WorkerPlugin

#: glibc's ``mallopt`` parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: freed blocks up to this size stay in the heap for reuse: glibc's adaptive ceiling on 64 bits
MMAP_THRESHOLD = 32 << 20

_registered: weakref.WeakSet[Client] = weakref.WeakSet()


@functools.cache
def reuse_freed_memory() -> bool:
    """Serve blocks up to :data:`MMAP_THRESHOLD` from the heap, and give its top back to the
    system past twice that, in this process; False where the C library has no glibc
    ``mallopt``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):  # no such symbol, or no C library to ask
        return False
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD)
    )


class ReuseFreedMemory(WorkerPlugin):
    """Sets :func:`reuse_freed_memory` on each worker, those that join later included."""

    name = "tilelabel-reuse-freed-memory"

    def setup(self, worker) -> None:
        reuse_freed_memory()


def register(client: Client) -> None:
    """Register :class:`ReuseFreedMemory` on ``client``'s cluster, once per client."""
    if client not in _registered:
        client.register_plugin(ReuseFreedMemory())
        _registered.add(client)
