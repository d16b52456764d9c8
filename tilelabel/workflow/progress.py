"""A progress bar per phase of a run, on a terminal (the executors count the chunks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass


@contextlib.contextmanager
def bar(total: int, desc: str, show: bool) -> Iterator[Any]:
    """A bar named ``desc`` counting ``total`` chunks where ``show``, else one that shows
    nothing; closed however the phase ends."""
    if not show:
        yield _NoBar()
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit="chunk", leave=True) as b:
        yield b
