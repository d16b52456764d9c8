"""Labels kept on a worker between the labeling pass and the writing pass, within a byte budget.

The writing pass needs each chunk's local labels again. Where the worker that labeled a chunk
still holds them (on its GPU for the ``cuda`` backend), the write skips reading, uploading and
labeling the chunk a second time; everything else is labeled again from the input, so the
budget bounds memory and never correctness. Entries belong to one run (its token) and are
dropped when the write takes them or the run ends.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

_lock = threading.Lock()
#: (token, chunk index) -> (labels, n), in this worker process
_kept: dict[tuple, tuple[Any, int]] = {}
#: token -> chunks the writing pass took from here
_taken: dict[str, int] = {}


@dataclass(frozen=True)
class Slot:
    """Where one chunk's labels may be kept: its run, its index, the run's budget per worker."""

    token: str
    idx: tuple[int, ...]
    budget: int


def put(slot: Slot, labels: Any, n: int) -> bool:
    """Keep ``labels`` if the run's entries in this process stay within the budget."""
    with _lock:
        used = sum(kept.nbytes for (t, _), (kept, _) in _kept.items() if t == slot.token)
        if used + labels.nbytes > slot.budget:
            return False
        _kept[(slot.token, slot.idx)] = (labels, n)
    return True


def take(slot: Slot) -> tuple[Any, int] | None:
    """The kept ``(labels, n)`` of a chunk, removed from the store; None where not kept here."""
    with _lock:
        entry = _kept.pop((slot.token, slot.idx), None)
        if entry is not None:
            _taken[slot.token] = _taken.get(slot.token, 0) + 1
    return entry


def held(token: str) -> list[tuple[int, ...]]:
    """Chunk indices of a run whose labels this process keeps."""
    with _lock:
        return [idx for t, idx in _kept if t == token]


def drop(token: str) -> tuple[int, int]:
    """Forget every entry of a run (run on each worker when the run ends): (chunks the writing
    pass took from here, entries left unused)."""
    with _lock:
        keys = [k for k in _kept if k[0] == token]
        for k in keys:
            del _kept[k]
        return _taken.pop(token, 0), len(keys)
