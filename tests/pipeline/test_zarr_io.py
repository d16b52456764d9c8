"""zarr reader and writer of the pipeline's tasks: per-thread event loops for local stores."""

from __future__ import annotations

import asyncio
import gc
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from tilelabel.pipeline.zarr_io import ZarrSource, ZarrTarget


def _blocks(shape, size):
    return [
        (slice(z, z + size), slice(y, y + size), slice(0, shape[2]))
        for z in range(0, shape[0], size)
        for y in range(0, shape[1], size)
    ]


def test_threads_that_come_and_go_read_and_write(tmp_path):
    """Each round's threads end and their loops are collected; later rounds still work (a
    closing loop must not shut down the codec pool the other loops share)."""
    rng = np.random.default_rng(0)
    data = rng.integers(0, 1000, (64, 64, 48), dtype=np.uint32)
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    zarr.create_array(src, shape=data.shape, chunks=(16, 16, 16), dtype=data.dtype)[:] = data
    zarr.create_array(dst, shape=data.shape, chunks=(16, 16, 16), dtype=np.uint64)
    source, target = ZarrSource(src), ZarrTarget(dst)
    blocks = _blocks(data.shape, 32)

    def copy_twice(sl):
        target(sl, source(sl).astype(np.uint64) * 2)

    for _ in range(3):
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(copy_twice, blocks))
        gc.collect()
    np.testing.assert_array_equal(zarr.open_array(dst)[...], data.astype(np.uint64) * 2)


def test_inside_a_running_event_loop(tmp_path):
    """Called from a thread whose event loop is running (a notebook's), it uses zarr's own."""
    data = np.arange(4096, dtype=np.uint16).reshape(16, 16, 16)
    src, dst = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    zarr.create_array(src, shape=data.shape, chunks=(8, 8, 8), dtype=data.dtype)[:] = data
    zarr.create_array(dst, shape=data.shape, chunks=(8, 8, 8), dtype=data.dtype)
    sl = (slice(0, 8), slice(8, 16), slice(None))

    async def inside():
        ZarrTarget(dst)(sl, ZarrSource(src)(sl))

    asyncio.run(inside())
    out = zarr.open_array(dst)[...]
    np.testing.assert_array_equal(out[sl], data[sl])
    assert not out[:8, :8].any()


def test_codec_threads_from_the_environment(monkeypatch):
    from tilelabel.pipeline.zarr_io import codec_threads

    monkeypatch.delenv("TILELABEL_CODEC_THREADS", raising=False)
    assert codec_threads() == (os.cpu_count() or 1)
    monkeypatch.setenv("TILELABEL_CODEC_THREADS", "3")
    assert codec_threads() == 3
    monkeypatch.setenv("TILELABEL_CODEC_THREADS", "0")
    with pytest.raises(ValueError, match="TILELABEL_CODEC_THREADS"):
        codec_threads()
