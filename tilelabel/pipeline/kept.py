"""What a worker keeps of a chunk between the labeling pass and the writing pass.

The writing pass needs each chunk's local labels again. Where the worker that labeled a chunk
still holds them (on its GPU for the ``cuda`` backend), the write skips reading, uploading and
labeling the chunk a second time. Where it holds only the chunk's foreground, packed one bit per
voxel, the write skips reading and decoding the input and labels the bits again (the kernels'
canonical numbering gives the same labels). Anything else is read and labeled again from the
input, so the budgets bound memory and never correctness. Entries belong to one run (its token)
and are dropped when the write takes them or the run ends; those of a run whose client was
killed go when another run keeps or drops its own.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Slot:
    """Where one chunk may be kept: its run, its index, and the run's budgets per worker
    process (bytes of labels, bytes of packed input)."""

    token: str
    idx: tuple[int, ...]
    budget: int
    input_budget: int = 0


@dataclass(frozen=True)
class Kept:
    """One chunk's kept labels, or else its packed foreground (``shape``: the chunk's)."""

    n: int
    labels: Any = None
    packed: Any = None
    shape: tuple[int, ...] = ()

    @property
    def nbytes(self) -> int:
        return int((self.labels if self.labels is not None else self.packed).nbytes)


_lock = threading.Lock()
#: (token, chunk index) -> Kept, in this worker process
_kept: dict[tuple, Kept] = {}
#: token -> chunks the writing pass took from here: [labels, packed input]
_taken: dict[str, list[int]] = {}


def _used(token: str, labels: bool) -> int:
    return sum(
        k.nbytes for (t, _), k in _kept.items() if t == token and (k.labels is not None) == labels
    )


def _prune(current: str) -> None:
    """Forget (under the lock) the entries of runs other than ``current`` that hold no result in
    this worker any more: runs whose client went away (killed) before dropping them. A run
    holds the counts, then the lookup spec, of each chunk it kept here until it ends; one that
    does not reads its chunks again (budgets never decide correctness)."""
    others = {t for t, _ in _kept} - {current}
    if not others or "distributed" not in sys.modules:  # no worker here: this process's run
        return
    try:
        from distributed import get_worker

        names = {k[0] if isinstance(k, tuple) else k for k in list(get_worker().data)}
    except (ValueError, RuntimeError):  # not in a worker, or its results changed meanwhile
        return
    names = {n for n in names if isinstance(n, str) and n.startswith("tilelabel-")}
    gone = {t for t in others if not any(n.endswith(f"-{t}") for n in names)}
    for key in [k for k in _kept if k[0] in gone]:
        del _kept[key]


def put(slot: Slot, labels: Any, n: int, pack: Callable[[], Any] | None = None) -> bool:
    """Keep ``labels`` if the run's labels in this process stay within ``slot.budget``; else
    ``pack()`` (the chunk's foreground, one bit per voxel) if the packed inputs stay within
    ``slot.input_budget``. False where neither was kept. Entries of runs that ended without
    dropping theirs go first (:func:`_prune`)."""
    with _lock:
        _prune(slot.token)
        if _used(slot.token, True) + labels.nbytes <= slot.budget:
            _kept[(slot.token, slot.idx)] = Kept(n, labels=labels)
            return True
        bits = (int(labels.size) + 7) // 8
        if pack is None or _used(slot.token, False) + bits > slot.input_budget:
            return False
    packed = pack()  # outside the lock: on the host, packing takes a while
    with _lock:
        if _used(slot.token, False) + packed.nbytes > slot.input_budget:
            return False  # another thread of this worker filled the budget meanwhile
        _kept[(slot.token, slot.idx)] = Kept(n, packed=packed, shape=tuple(labels.shape))
    return True


def take(slot: Slot) -> Kept | None:
    """A chunk's :class:`Kept` entry, removed from the store; None where nothing is kept here."""
    with _lock:
        entry = _kept.pop((slot.token, slot.idx), None)
        if entry is not None:
            taken = _taken.setdefault(slot.token, [0, 0])
            taken[entry.labels is None] += 1
    return entry


def held(token: str) -> list[tuple[int, ...]]:
    """Chunk indices of a run of which this process keeps something."""
    with _lock:
        return [idx for t, idx in _kept if t == token]


def drop(token: str) -> tuple[int, int, int]:
    """Forget every entry of a run (run on each worker when the run ends), and those of runs
    that ended without dropping theirs: (chunks the writing pass took from here as labels, as
    packed input, entries of the run left unused)."""
    with _lock:
        _prune(token)
        keys = [k for k in _kept if k[0] == token]
        for k in keys:
            del _kept[k]
        labels, packed = _taken.pop(token, [0, 0])
        return labels, packed, len(keys)
