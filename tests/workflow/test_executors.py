"""The executors: a run in this process's threads, or on a dask cluster, gives scipy's labels."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tests.conftest import write_zarr
from tilelabel.resources import Workload
from tilelabel.resources.host import HostResources, memory_limit
from tilelabel.synth import random_volume
from tilelabel.workflow.executors import THIS_PROCESS, ThreadExecutor


def test_a_task_waits_for_its_future_arguments_without_holding_a_thread():
    """On one thread, a chain of tasks each waiting for the last runs to its end: a task is
    handed to the pool only once its arguments are done."""
    gate = threading.Event()
    with ThreadExecutor(1) as ex:
        first = ex.submit(lambda: gate.wait(10) and 1, key="first")
        chain = first
        for i in range(5):
            chain = ex.submit(lambda x, i=i: x + i, chain, key=f"next-{i}")
        gate.set()
        assert ex.result(chain) == 1 + sum(range(5))
        assert ex.threads() == {THIS_PROCESS: 1}
        assert ex.each(lambda a, b=0: a + b, 2, b=3) == {THIS_PROCESS: 5}


def test_a_failed_task_fails_what_waits_for_it():
    with ThreadExecutor(2) as ex:
        bad = ex.submit(lambda: 1 // 0, key="bad")
        after = ex.submit(lambda x: x, bad, key="after")
        with pytest.raises(ZeroDivisionError):
            ex.wait([after], "test", False)
        with pytest.raises(ZeroDivisionError):
            ex.gather([bad])


def test_a_small_volume_is_labeled_in_this_process_and_a_large_one_is_not():
    host = HostResources()
    assert host.in_process(Workload(64**3, 1, 1)) == 1  # one tile: one thread
    assert host.in_process(Workload(64**3, 1, 1), workers=2) is None  # workers asked for
    huge = memory_limit()  # a volume of as many voxels as the process has bytes
    assert host.in_process(Workload(huge, 1, 10**6)) is None


def test_a_small_cli_run_imports_no_cluster_and_equals_scipy(tmp_path):
    """The command labels a small volume in its own process: neither distributed nor
    dask.array nor scipy.ndimage is imported, and the output equals scipy's."""
    img = random_volume((30, 40, 20), 0.3, 1, seed=3)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 16))
    dst = tmp_path / "out.zarr"
    code = (
        "import sys; from tilelabel.cli import main; "
        f"rc = main(['label', {src!r}, {str(dst)!r}, '--backend', 'cpu', '-q']); "
        "print(rc, *(m in sys.modules for m in ('distributed', 'dask.array', 'scipy.ndimage')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split()[-4:] == ["0", "False", "False", "False"], out.stderr
    expected, _ = ndimage.label(img, np.ones((3, 3, 3)))
    np.testing.assert_array_equal(zarr.open_array(str(dst))[...], expected)


@pytest.mark.parametrize("stats", [False, True])
def test_threads_and_a_cluster_give_the_same_output(tmp_path, client, stats):
    """The same run in this process (many chunks, few threads) and on a two-worker cluster:
    equal labels, count and statistics table."""
    img = random_volume((40, 35, 30), 0.35, 2, seed=8)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    kw = dict(chunks=(16, 16, 8), backend="cpu", stats=stats, overwrite=True)
    here = tilelabel.label_zarr(src, str(tmp_path / "a.zarr"), **kw)
    there = tilelabel.label_zarr(src, str(tmp_path / "b.zarr"), client=client, **kw)
    a, b = (zarr.open_array(str(tmp_path / n))[...] for n in ("a.zarr", "b.zarr"))
    expected, n = ndimage.label(img, np.ones((3, 3, 3)))
    np.testing.assert_array_equal(a, expected)
    np.testing.assert_array_equal(b, expected)
    if stats:
        (na, ta), (nb, tb) = here, there
        assert na == nb == n
        assert ta.equals(tb)
    else:
        assert here == there == n


def test_a_local_cluster_has_no_more_workers_than_the_run_has_chunks():
    from distributed import Client

    from tilelabel.cluster.local import local_cluster

    cluster = local_cluster("cpu", Workload(16**3, 1, 1))
    with cluster, Client(cluster, set_as_default=False) as c:
        assert list(c.nthreads().values()) == [1]
