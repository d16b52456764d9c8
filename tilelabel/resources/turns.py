"""Which writes the GPU compresses: by default all, or a few node-wide turns per GPU.

With one worker per GPU (the default) the GPU compresses every output chunk of a large enough
output. Where several workers share a GPU and are given a count of turns (``gpu_encode=N``),
each write, its chunk labeled again on the GPU, tries to take one of those *turns* on its GPU
for the compression alone; with one the GPU compresses the chunk, and where all stay taken by
other workers' writes for about as long as the host would take to compress it, it hands the
labels to zarr on the host.

Turns are ``flock`` locks on files under the temporary directory, one file per turn and GPU
(named by host and PCI bus id), so they hold across the worker processes that share a GPU, and
the kernel drops a dead worker's turn with it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: fewest storage tiles a processing chunk holds where the GPU compresses the output. nvCOMP
#: compresses a batch's tiles side by side and a GPU runs one process's kernels at a time, so a
#: chunk's tiles are all the work the GPU has in hand: it needs many of them to run at speed.
MIN_BATCH_TILES = 64

#: with ``gpu_encode=None``, the GPU compresses output only where it holds more than one
#: processing chunk of :data:`MIN_BATCH_TILES`: with one chunk, which one worker labels and
#: writes while the others wait, loading the encoder in every worker costs more than it saves.
MIN_OUTPUT_TILES = MIN_BATCH_TILES + 1

#: how long a write waits for a turn per byte of its labels before it leaves the chunk to the
#: host: about as long as the host takes to compress them on a busy node (1 s per 512 MiB). The
#: writes of a run start together when the merge ends; without waiting, nearly all of them would
#: find the turns taken and go to the host.
WAIT_SECONDS_PER_BYTE = 1.0 / (512 << 20)

#: how often a waiting write tries the turns again
POLL_SECONDS = 0.005


def turns(gpu_encode: bool | int | None, tiles: int | None = None) -> int | None:
    """Turns per GPU for a ``gpu_encode`` option: 0 (the host compresses everything), a count,
    or None (no limit: the GPU compresses every chunk). ``None`` (the default option) gives
    no limit where the output has ``tiles`` storage tiles of at least :data:`MIN_OUTPUT_TILES`
    (or that is not known yet), else 0."""
    if gpu_encode is None:
        small = tiles is not None and tiles < MIN_OUTPUT_TILES
        return 0 if small else None
    if isinstance(gpu_encode, bool):
        return None if gpu_encode else 0
    return gpu_encode


def wait_for(nbytes: int) -> float:
    """Seconds a write of ``nbytes`` of labels waits for a turn (see WAIT_SECONDS_PER_BYTE)."""
    return nbytes * WAIT_SECONDS_PER_BYTE


def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"tilelabel-turns-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


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


@dataclass(frozen=True)
class TurnEncoder:
    """How a write compresses its chunk on its device: with one of ``turns`` turns per device
    (None: no limit), into storage chunks of ``layout`` (:class:`tilelabel.storage.RawChunks`).
    Picklable: each write task takes one."""

    turns: int | None
    layout: Any

    def encode(self, backend, labels, lut) -> dict | None:
        """``lut[labels]`` as the layout's compressed storage chunks (see
        :meth:`tilelabel.kernels.backends.Encoder.encode_tiles`), or None where the host is to
        compress them: the backend has no encoder for the codec, or (with a limit on turns)
        its encoder is still loading, or no turn came free in time. The turn covers the
        compression alone: the host stores the bytes after giving it back."""
        enc, codec = backend.encoder, self.layout.codec
        if enc is None or not (enc.available(codec) if self.turns is None else enc.ready(codec)):
            return None
        wait = wait_for(labels.size * lut.dtype.itemsize)
        with turn(enc.device(), self.turns, wait) as mine:
            return enc.encode_tiles(labels, lut, self.layout.tile, codec) if mine else None
