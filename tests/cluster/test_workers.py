"""Worker counts on clusters of more than 5 workers: on the installed distributed, and on one
whose ``Client.scheduler_info()`` lists only 5 of them (tests/cluster/affected-distributed.txt,
installed by scripts/test.sh). The CPU plan's thread count and the GPU resources' per-worker
threads both come from the run's executor (:meth:`.executors.DaskExecutor.threads`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AFFECTED = ROOT / ".venv" / "affected-distributed"

#: run in-process and in a process that imports the affected distributed first
EIGHT_WORKERS = """
import distributed
from distributed import Client, LocalCluster
from tilelabel.workflow.executors import DaskExecutor

with (
    LocalCluster(n_workers=8, threads_per_worker=2, processes=False, dashboard_address=":0") as lc,
    Client(lc, set_as_default=False) as c,
):
    c.wait_for_workers(8)
    listed = len(c.scheduler_info()["workers"])
    threads = DaskExecutor(c).threads()
    print(distributed.__version__, listed, len(threads), sum(threads.values()))
    assert set(threads) == set(lc.scheduler.workers), threads
    assert set(threads.values()) == {2}
"""


def _run(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", EIGHT_WORKERS], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_every_worker_counts():
    _, _, workers, threads = _run(dict(os.environ))
    assert (workers, threads) == ("8", "16")


@pytest.mark.skipif(
    not AFFECTED.is_dir(), reason="no affected distributed beside the venv (scripts/test.sh)"
)
def test_every_worker_counts_where_scheduler_info_lists_five():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(AFFECTED), str(ROOT)])}
    version, listed, workers, threads = _run(env)
    # the release is one that lists 5 (else this test would prove nothing) ...
    assert version == "2025.5.0" and listed == "5"
    # ... and every one of the 8 workers and 16 threads is counted all the same
    assert (workers, threads) == ("8", "16")
