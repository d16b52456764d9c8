"""Waiting for a phase's tasks, with a progress bar per phase on a terminal."""

from __future__ import annotations

from collections.abc import Iterable

from distributed import Client, Future, as_completed


def wait(client: Client, futures: Iterable[Future], desc: str, progress: bool) -> None:
    """Wait for ``futures``, raising the first task's error with its traceback; with
    ``progress``, a bar named ``desc`` counts them (one per chunk)."""
    futures = list(futures)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(futures), desc=desc, unit="chunk", leave=True)
    try:
        for fut in as_completed(futures, loop=client.loop):
            # a finished future's result stays on its worker: fetching it here would bring every
            # chunk's borders and lookup specs into this process, one after the other
            if fut.status != "finished":
                fut.result()
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
