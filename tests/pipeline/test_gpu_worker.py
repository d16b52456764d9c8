"""The worker command of Slurm GPU jobs: several dask workers on each of the job's GPUs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from tests.conftest import wait_until
from tilelabel.pipeline.gpu_worker import visible_gpus, worker_commands

ROOT = Path(__file__).resolve().parents[2]


def test_one_dask_worker_per_gpu_with_its_gpu_alone_in_view():
    cmds = worker_commands(
        ["tcp://s:1", "--name", "job", "--nthreads", "1", "--workers-per-gpu", "3"],
        ["2", "GPU-abc"],
        python="py",
    )
    assert [env for _, env in cmds] == [
        {"CUDA_VISIBLE_DEVICES": "2"},
        {"CUDA_VISIBLE_DEVICES": "GPU-abc"},
    ]
    for i, (cmd, _) in enumerate(cmds):
        assert cmd[:5] == ["py", "-m", "distributed.cli.dask_worker", "tcp://s:1", "--nthreads"]
        assert cmd[-4:] == ["--nworkers", "3", "--name", f"job-gpu{i}"]


def test_scheduler_file_instead_of_an_address():
    ((cmd, env),) = worker_commands(["--scheduler-file", "s.json", "--workers-per-gpu", "2"], ["0"])
    assert cmd[1:] == [
        "-m",
        "distributed.cli.dask_worker",
        "--scheduler-file",
        "s.json",
        "--nworkers",
        "2",
    ]


@pytest.mark.parametrize(
    ("argv", "gpus", "message"),
    [
        (["tcp://s:1", "--workers-per-gpu", "0"], ["0"], "must be >= 1"),
        (["tcp://s:1", "--nworkers", "4"], ["0"], "not --nworkers"),
        (["tcp://s:1"], [], "sees no GPU"),
    ],
)
def test_bad_arguments(argv, gpus, message, capsys):
    with pytest.raises((SystemExit, RuntimeError)) as e:
        worker_commands(argv, gpus)
    assert message in (str(e.value) + capsys.readouterr().err)


def test_visible_gpus_from_the_environment():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0, 3,"}) == ["0", "3"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_launcher_runs_workers_per_gpu_and_stops_them_on_a_signal():
    """Real dask workers connect to a real scheduler; the GPU ids only go into their
    environment (nothing here touches a GPU)."""
    with (
        LocalCluster(
            n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        env = {
            **os.environ,
            "CUDA_VISIBLE_DEVICES": "3,5",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        args = ["--workers-per-gpu", "2", "--name", "job7", "--nthreads", "1"]
        launcher = subprocess.Popen(
            [sys.executable, "-m", "tilelabel.pipeline.gpu_worker", cluster.scheduler_address]
            + args
            + ["--memory-limit", "1GiB", "--no-dashboard"],
            env=env,
        )
        try:
            wait_until(lambda: len(c.scheduler_info()["workers"]) == 4, 120, "4 workers")
            seen = c.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"])
            names = {w["name"]: seen[a] for a, w in c.scheduler_info()["workers"].items()}
            assert names == {
                "job7-gpu0-0": "3",
                "job7-gpu0-1": "3",
                "job7-gpu1-0": "5",
                "job7-gpu1-1": "5",
            }
            assert all(w["nthreads"] == 1 for w in c.scheduler_info()["workers"].values())
            launcher.send_signal(signal.SIGTERM)
            assert launcher.wait(timeout=60) == 0
            wait_until(lambda: not c.scheduler_info()["workers"], 30, "the workers to leave")
        finally:
            if launcher.poll() is None:
                launcher.kill()
