"""A dask worker preload for the local clusters that a run starts: their workers ignore SIGINT.

Ctrl-C at a terminal reaches the whole foreground process group, the workers too; the command
is the one to stop the run (cancel its tasks, wait for its writes, close the cluster), and a
worker that took the signal itself would only print its traceback on the way down.
"""

from __future__ import annotations

import signal


def dask_setup(worker) -> None:
    """dask's preload hook: runs in each worker process as it starts (its main thread)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
