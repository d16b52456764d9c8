"""The client process's heap, left out of full garbage collections while runs are in flight.

A local cluster's scheduler runs in the client's process, on its event loop thread. A full
collection there traverses every object of the process (imports, the user's own data, earlier
runs' leftovers) while holding the GIL, and the scheduler dispatches nothing meanwhile; submitting
a run's graph allocates enough to trigger one. Frozen objects are not traversed.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

_lock = threading.Lock()
_runs = 0  # runs of this process inside frozen(), in any thread

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """Freeze (``gc.freeze``) the objects that exist when the first of this process's runs
    starts, until the last of them ends; then nothing is frozen (``gc.unfreeze``).

    Objects made meanwhile are collected as usual; frozen ones that become cyclic garbage are
    collected after the run. CPython cannot thaw part of its frozen set, so objects the process
    froze itself before a run are thawed with the rest at its end. Where the collector is off
    (``gc.disable``), the process manages collections itself and is left as it is.
    """
    global _runs
    with _lock:
        if not gc.isenabled() and _runs == 0:
            mine = False
        else:
            mine = True
            if _runs == 0:
                gc.freeze()
            _runs += 1
    try:
        yield
    finally:
        if mine:
            with _lock:
                _runs -= 1
                if _runs == 0:
                    gc.unfreeze()


def during_runs(run: F) -> F:
    """``run`` with the heap :func:`frozen` while it runs."""

    @functools.wraps(run)
    def wrapped(*args, **kwargs):
        with frozen():
            return run(*args, **kwargs)

    return wrapped  # type: ignore[return-value]
