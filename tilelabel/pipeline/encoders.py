"""Which writes the GPU compresses: a few node-wide turns per GPU, the rest go to the host.

On a node with many cores per GPU, neither side is fast enough alone: 16 cores compress
uint32 labels with zstd at 3.6-5.5 GB/s, one H100 at 4.1-7.7 GB/s whatever the number of
processes feeding it (``benchmarks/gpu_encode.py``, RESULTS.md). So each write first tries
to take one of a few *turns* on its GPU; with one it lets the GPU compress its chunk, without
it (all taken by other workers' writes) it hands the labels to zarr on the host at once. The
GPU stays busy compressing while the cores compress the rest, and which side takes a chunk
follows how busy each is, not a fixed split.

Turns are ``flock`` locks on files under the temporary directory, one file per turn and GPU
(named by host and PCI bus id), so they hold across the worker processes that share a GPU,
and the kernel drops a dead worker's turn with it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

#: turns per GPU with ``gpu_encode=None`` (the default), where the output is large enough
DEFAULT_TURNS = 1

#: with ``gpu_encode=None``, the GPU compresses output only where each worker process writes at
#: least this many bytes of (4-byte) labels. Every process that may take a turn loads nvCOMP's
#: kernels first (seconds on a fresh process, and 16 processes loading them slow the labeling
#: pass that runs meanwhile), which only a large output repays. Measured on one H100 with 16
#: workers (2026-11-23/24): at 1024^3 (256 MiB per worker) one turn was slower than the host
#: alone or no faster in every call (up to 1 s slower with the warm-up on full-size tiles);
#: at 1536^3 (864 MiB per worker) it made every run faster (0.1-1.4 s of 6-9 s, d 0.05 and
#: 0.2, two runs each); at 2048^3 (2 GiB per worker) it shortened the writing pass by
#: 0.75-2.2 s. Sizes between 256 and 864 MiB per worker were not measured.
MIN_BYTES_PER_WORKER = 512 << 20

#: output chunks this process's writes compressed on each side ("device" with a turn,
#: "host" without), for benchmarks to report how the work was split
tally: Counter = Counter()


def turns(gpu_encode: bool | int | None, bytes_per_worker: int | None = None) -> int | None:
    """Turns per GPU for a ``gpu_encode`` option: 0 (the host compresses everything), a count,
    or None (no limit: the GPU compresses every chunk). ``None`` (the default option) gives
    :data:`DEFAULT_TURNS` where each worker process writes ``bytes_per_worker`` of at least
    :data:`MIN_BYTES_PER_WORKER` (or that is not known yet), else 0."""
    if gpu_encode is None:
        small = bytes_per_worker is not None and bytes_per_worker < MIN_BYTES_PER_WORKER
        return 0 if small else DEFAULT_TURNS
    if isinstance(gpu_encode, bool):
        return None if gpu_encode else 0
    if not isinstance(gpu_encode, int) or gpu_encode < 0:
        raise ValueError(
            f"gpu_encode must be true, false or a number of turns >= 0, not {gpu_encode!r}"
        )
    return gpu_encode


def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"tilelabel-turns-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@contextlib.contextmanager
def turn(device: str, limit: int | None) -> Iterator[bool]:
    """True while holding one of ``limit`` turns on ``device`` (None: no limit, always True),
    False at once where every turn is taken (or ``limit`` is 0). Never waits."""
    if limit is None or limit <= 0:
        yield limit is None
        return
    import fcntl

    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{socket.gethostname()}-{device}")
    folder = _lock_dir()
    for k in range(limit):
        # a descriptor of its own per try: flock locks of two descriptors conflict even
        # within one process, so the threads of one worker take turns too
        fd = os.open(folder / f"{name}-{k}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield True
        finally:
            os.close(fd)  # closing the last descriptor releases the lock
        return
    yield False
