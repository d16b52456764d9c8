"""Shared fixtures: one real multi-process dask cluster for the whole session."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import zarr


@pytest.fixture(scope="session")
def cluster():
    """A LocalCluster of two single-threaded worker processes (the CI machine has 2 cores)."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


@pytest.fixture(scope="session")
def client(cluster):
    from distributed import Client

    with Client(cluster, set_as_default=False) as c:
        yield c


def wait_until(predicate, timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds, or fail after ``timeout`` seconds naming ``what``."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextmanager
def tmpfs(path, options: str) -> Iterator[None]:
    """A tmpfs mounted at ``path`` (an empty folder) for the block, with mount ``options``
    (e.g. ``size=256k``, ``ro``); skips the test where this process may not mount one."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextmanager
def gpu_memory_left(nbytes: int) -> Iterator[None]:
    """Hold all but ``nbytes`` of GPU 0's free memory in this process for the block, as another
    job would (skips the test where less than that is free)."""
    import cupy as cp

    with cp.cuda.Device(0):
        free = cp.cuda.runtime.memGetInfo()[0]
        if free <= nbytes:
            pytest.skip("the GPU has too little memory free")
        hog = cp.empty(free - nbytes, dtype=cp.uint8)
    try:
        yield
    finally:
        del hog
        cp.get_default_memory_pool().free_all_blocks()


def write_zarr(path, data: np.ndarray, chunks, zarr_format: int = 3, **kwargs) -> str:
    """A real zarr array on disk holding ``data``; returns its path."""
    arr = zarr.create_array(
        str(path),
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        zarr_format=zarr_format,
        **kwargs,
    )
    arr[...] = data
    return str(path)


@pytest.fixture(autouse=True)
def _restore_tilelabel_logger():
    """The CLI gives the ``tilelabel`` logger its own stderr handler and stops propagation, as
    a program's entry point does; tests after a CLI test must still see its records (caplog)."""
    log = logging.getLogger("tilelabel")
    state = (log.handlers[:], log.propagate, log.level)
    yield
    log.handlers[:], log.propagate = state[0], state[1]
    log.setLevel(state[2])


def summarize_block(
    block: np.ndarray,
    offset: tuple[int, ...],
    volume: tuple[int, ...],
    open_faces: tuple[tuple[bool, bool], ...],
    connectivity: int,
    backend: str = "cpu",
    **kwargs,
):
    """:func:`tilelabel.pipeline.local.summarize` of ``block`` as a chunk at ``offset`` of a
    volume of shape ``volume``, with ``open_faces`` towards other chunks."""
    from tilelabel.chunking import Chunk
    from tilelabel.pipeline.local import Labeler, summarize

    chunk = Chunk((0,) * block.ndim, tuple(offset), tuple(block.shape), tuple(volume), open_faces)
    return summarize(block, chunk=chunk, labeler=Labeler(backend, connectivity), **kwargs)
