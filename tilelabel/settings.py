"""Settings of the processes that run tilelabel's tasks: one table in dask's config.

These are not options of a run (:mod:`tilelabel.options`) but of each worker process, so they
live where dask keeps its own: under ``tilelabel`` in a dask config file, in
``dask.config.set(...)``, or in environment variables such as
``DASK_TILELABEL__CODEC__THREADS=4``. A local cluster hands its client's config to the workers it
starts; the workers of a remote cluster read their own.

================== ======= =========================================================================
key                default meaning
================== ======= =========================================================================
``codec.threads``  null    threads of a process's codec pool (decoding, encoding, file I/O);
                           null: one per core the process may run on
``max-tasks``      5000000 the most tasks a run submits (its client builds them, the scheduler holds
                           them: about 20 kB each): a run of more is refused before any work
================== ======= =========================================================================
"""

from __future__ import annotations

from typing import Any

import dask.config

DEFAULTS: dict[str, Any] = {"codec": {"threads": None}, "max-tasks": 5_000_000}

dask.config.update_defaults({"tilelabel": DEFAULTS})


def get(key: str) -> Any:
    """The setting ``key`` (e.g. ``"codec.threads"``)."""
    return dask.config.get(f"tilelabel.{key}")


def max_tasks() -> int:
    """The most tasks a run may submit (``max-tasks``)."""
    value = get("max-tasks")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"tilelabel.max-tasks must be an integer >= 1, got {value!r}")
    return value


def codec_threads() -> int:
    """Threads of this process's codec pool: ``codec.threads``, else one per usable core."""
    from tilelabel.cores import usable_cores

    value = get("codec.threads")
    if value is None:
        return usable_cores()
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"tilelabel.codec.threads must be an integer >= 1, got {value!r}")
    return value
