"""glibc's malloc thresholds on the workers of a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelabel
from tests.conftest import write_zarr
from tilelabel.cluster import malloc
from tilelabel.synth import random_volume

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's mallopt (Linux)"
)


def faults_of_reused_arrays(repeat: int = 50) -> int:
    """Minor page faults while this process makes and frees a 1 MiB array ``repeat`` times
    (after a first, which faults in its pages wherever it comes from)."""
    import resource

    np.ones(1 << 20, np.uint8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(repeat):
        np.ones(1 << 20, np.uint8)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_freed_arrays_are_reused_where_dask_pinned_the_threshold():
    """With dask's MALLOC_TRIM_THRESHOLD_, each 1 MiB array is mapped and faulted in afresh
    (256 pages a time); with the thresholds set, the freed block is reused."""
    code = (
        "from tests.cluster.test_malloc import faults_of_reused_arrays as f\n"
        "from tilelabel.cluster.malloc import reuse_freed_memory\n"
        "a = f(); assert reuse_freed_memory(); print(a, f())\n"
    )
    env = {"MALLOC_TRIM_THRESHOLD_": "65536", "PATH": ""}
    root = Path(__file__).parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    pinned, reused = map(int, out.stdout.split())
    assert pinned >= 50 * 200
    assert reused < 50


def test_a_runs_workers_reuse_freed_arrays(tmp_path, client):
    """The shared test cluster's workers were started by a nanny with dask's setting; a run
    registers the plugin, and they reuse freed blocks from then on."""
    img = random_volume((16, 16, 16), 0.3, seed=3)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client)
    faults = client.run(faults_of_reused_arrays)
    assert len(faults) == 2
    assert max(faults.values()) < 50, faults
    assert malloc.ReuseFreedMemory.name in client.run_on_scheduler(
        lambda dask_scheduler: list(dask_scheduler.worker_plugins)
    )
