"""Which writes the GPU compresses: a few node-wide turns per GPU, the rest go to the host.

On a node with many cores per GPU, neither side is fast enough alone: 16 cores compress
uint32 labels with zstd at 3.6-5.5 GB/s, one H100 at 11-13 GB/s in chunks of 64 tiles
whatever the number of processes feeding it (``benchmarks/gpu_encode.py``, RESULTS.md). So
each write, its chunk labeled again on the GPU, tries to take one of a few *turns* on its GPU
for the compression alone; with one the GPU compresses the chunk, and where all stay taken by
other workers' writes for about as long as the host would take to compress it, it hands the
labels to zarr on the host. The GPU stays busy compressing while the cores compress the rest,
and which side takes a chunk follows how busy each is, not a fixed split.

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
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

#: turns per GPU with ``gpu_encode=None`` (the default), where the output is large enough
DEFAULT_TURNS = 1

#: fewest storage tiles a processing chunk holds where the GPU compresses the output (see
#: :func:`tilelabel.pipeline.plan.plan_for_run`). nvCOMP compresses a batch's tiles side by side,
#: each tile on its own, and a GPU runs one process's kernels at a time, so the tiles of one
#: chunk are all the work it has in hand: on one H100 (``benchmarks/gpu_encode.py``, 128^3
#: uint32 tiles, d 0.05, 1 to 16 processes), chunks of 24 tiles compressed at 3.0-3.2 GB/s in
#: all, chunks of 64 tiles at 11.3-12.9 GB/s.
MIN_BATCH_TILES = 64

#: with ``gpu_encode=None``, the GPU compresses output only where it holds at least this many
#: storage tiles: more than one processing chunk of :data:`MIN_BATCH_TILES`. One H100, 16
#: workers, 128^3 tiles (2026-11-24, benchmarks/RESULTS.md, eighth session): at 512^3 (64
#: tiles, one chunk, which one worker labels and writes while the others wait) one turn gained
#: nothing clear, 0.81-0.87 s against the host's 0.80-0.96 s warm; at 640^3 (125 tiles) and 768^3
#: (216 tiles) its warm runs were 6-36 % shorter, and first runs (every worker loads nvCOMP)
#: 23 % shorter to 4 % longer. Outputs of 65 to 124 tiles were not measured.
MIN_OUTPUT_TILES = MIN_BATCH_TILES + 1

#: output chunks this process's writes compressed on each side ("device" with a turn,
#: "host" without), for benchmarks to report how the work was split
tally: Counter = Counter()

#: seconds this process's writes spent in each step, all writes together: "relabel" (labels
#: and lookup table ready), "wait" (for a turn), "encode" (holding one), "store" (the GPU's
#: frames written), "host" (zarr compressing and writing), for benchmarks (see :class:`Clock`)
seconds: Counter = Counter()


class Clock:
    """Adds the time since its last lap to :data:`seconds` under a step's name."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        seconds[step] += now - self.last
        self.last = now


def turns(gpu_encode: bool | int | None, tiles: int | None = None) -> int | None:
    """Turns per GPU for a ``gpu_encode`` option: 0 (the host compresses everything), a count,
    or None (no limit: the GPU compresses every chunk). ``None`` (the default option) gives
    :data:`DEFAULT_TURNS` where the output has ``tiles`` storage tiles of at least
    :data:`MIN_OUTPUT_TILES` (or that is not known yet), else 0."""
    if gpu_encode is None:
        small = tiles is not None and tiles < MIN_OUTPUT_TILES
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


#: how long a write waits for a turn per byte of its labels before it leaves the chunk to the
#: host: about as long as the host takes to compress them on a busy node. With 16 workers on
#: one H100 (2026-11-24, 1024^3 in 512^3 chunks) a write compressing on the host took about
#: 1 s per 512 MiB of labels; the GPU compresses 512 MiB at 11-13 GB/s. Without waiting, the
#: writes of a run, which start together when the merge ends, found the one turn taken and 7
#: of 8 chunks went to the host.
WAIT_SECONDS_PER_BYTE = 1.0 / (512 << 20)

#: how often a waiting write tries the turns again
POLL_SECONDS = 0.005


def wait_for(nbytes: int) -> float:
    """Seconds a write of ``nbytes`` of labels waits for a turn (see WAIT_SECONDS_PER_BYTE)."""
    return nbytes * WAIT_SECONDS_PER_BYTE


def _take(folder: Path, name: str, limit: int) -> int | None:
    """The descriptor of a free turn, locked, or None where all ``limit`` are taken."""
    import fcntl

    for k in range(limit):
        # a descriptor of its own per try: flock locks of two descriptors conflict even
        # within one process, so the threads of one worker take turns too
        fd = os.open(folder / f"{name}-{k}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return fd
    return None


@contextlib.contextmanager
def turn(device: str, limit: int | None, wait: float = 0.0) -> Iterator[bool]:
    """True while holding one of ``limit`` turns on ``device`` (None: no limit, always True),
    False where every turn stays taken for ``wait`` seconds (0: at once; or ``limit`` is 0)."""
    if limit is None or limit <= 0:
        yield limit is None
        return
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{socket.gethostname()}-{device}")
    folder = _lock_dir()
    deadline = time.monotonic() + wait
    fd = _take(folder, name, limit)
    while fd is None and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        fd = _take(folder, name, limit)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
