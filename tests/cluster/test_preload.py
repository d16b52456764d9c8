"""The worker preload on a real LocalCluster: its workers start with tilelabel's kernels loaded,
leave nothing in memory stores, and label as any worker does."""

from __future__ import annotations

import numpy as np
import zarr
from distributed import Client, LocalCluster
from scipy import ndimage

import tilelabel
from tests.conftest import write_zarr
from tilelabel.synth import random_volume


def compiled_kernels() -> int:
    """Numba kernels of tilelabel this process has compiled or loaded (run on a worker)."""
    import sys

    from numba.core.registry import CPUDispatcher

    return sum(
        1
        for name, module in list(sys.modules.items())
        if name.startswith("tilelabel.kernels")
        for value in vars(module).values()
        if isinstance(value, CPUDispatcher) and value.signatures
    )


def memory_store_entries() -> list:
    import fsspec

    return fsspec.filesystem("memory").ls("/")


def test_preloaded_workers_start_ready(tmp_path):
    img = random_volume((30, 28, 26), 0.3, 1, seed=9)
    src = write_zarr(tmp_path / "in.zarr", img, (10, 14, 13))
    dst = str(tmp_path / "out.zarr")
    shape = dict(n_workers=1, threads_per_worker=1, dashboard_address=None)
    with LocalCluster(**shape) as plain, Client(plain, set_as_default=False) as c:
        assert list(c.run(compiled_kernels).values()) == [0]
    with (
        LocalCluster(**shape, preload=["tilelabel.cluster.preload"]) as cl,
        Client(cl, set_as_default=False) as c,
    ):
        assert all(n > 0 for n in c.run(compiled_kernels).values())
        assert list(c.run(memory_store_entries).values()) == [[]]
        n = tilelabel.label_zarr(src, dst, client=c)
    ref, rn = ndimage.label(img, np.ones((3, 3, 3)))
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(dst)[...], ref)
