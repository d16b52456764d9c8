"""The worker command of Slurm GPU jobs: several dask workers on each of the job's GPUs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from tests.conftest import gpu_memory_left, wait_until
from tilelabel.cluster.gpu_worker import (
    JOB_ENV,
    JOB_WORKERS_ENV,
    job_of_this_worker,
    visible_gpus,
    worker_commands,
)

ROOT = Path(__file__).resolve().parents[2]


def test_one_dask_worker_per_gpu_with_its_gpu_alone_in_view():
    cmds = worker_commands(
        ["tcp://s:1", "--name", "job", "--nthreads", "1", "--workers-per-gpu", "3"],
        ["2", "GPU-abc"],
        python="py",
        slots=lambda gpu: 1,  # not asked without --fit-memory
    )
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in cmds] == ["2", "GPU-abc"]
    # every worker of the job knows the job and how many workers it started
    assert {(env[JOB_ENV], env[JOB_WORKERS_ENV]) for _, env in cmds} == {(cmds[0][1][JOB_ENV], "6")}
    for i, (cmd, _) in enumerate(cmds):
        assert cmd[:5] == ["py", "-m", "distributed.cli.dask_worker", "tcp://s:1", "--nthreads"]
        assert cmd[-4:] == ["--nworkers", "3", "--name", f"job-gpu{i}"]


def test_fit_memory_starts_no_more_workers_than_a_gpu_has_room_for(capsys):
    """``--fit-memory``: K is the most; a GPU with room for fewer gets fewer, one whose room
    is not known (NVML unusable) gets K."""
    room = {"0": 2, "1": 16, "2": None}
    cmds = worker_commands(
        ["tcp://s:1", "--workers-per-gpu", "4", "--fit-memory"], list(room), slots=room.get
    )
    assert [cmd[cmd.index("--nworkers") + 1] for cmd, _ in cmds] == ["2", "4", "4"]
    assert {env[JOB_WORKERS_ENV] for _, env in cmds} == {"10"}
    assert "--fit-memory" not in cmds[0][0]
    assert "GPU 0's free memory has room for 2 of 4 workers" in capsys.readouterr().err


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


@contextmanager
def launcher(args: list[str], env: dict[str, str]) -> Iterator[tuple[Client, subprocess.Popen]]:
    """A real scheduler in this process, a client of it, and ``python -m
    tilelabel.cluster.gpu_worker`` started against it with ``args`` and ``env`` added to this
    process's environment (killed on exit if still running)."""
    with (
        LocalCluster(
            n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        env = {
            **os.environ,
            **env,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "tilelabel.cluster.gpu_worker", cluster.scheduler_address]
            + args
            + ["--no-dashboard"],
            env=env,
        )
        try:
            yield c, proc
        finally:
            if proc.poll() is None:
                proc.kill()


def test_launcher_runs_workers_per_gpu_and_stops_them_on_a_signal():
    """Real dask workers connect to a real scheduler; the GPU ids only go into their
    environment (nothing here touches a GPU). They name no real GPU, so distributed's NVML
    diagnostics are off: on a GPU machine a worker would otherwise look GPU 3 up at start."""
    args = ["--workers-per-gpu", "2", "--name", "job7", "--nthreads", "1", "--memory-limit", "1GiB"]
    env = {"CUDA_VISIBLE_DEVICES": "3,5", "DASK_DISTRIBUTED__DIAGNOSTICS__NVML": "False"}
    with launcher(args, env) as (c, proc):
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
        ((job, n),) = set(c.run(job_of_this_worker).values())
        assert job.endswith(f":{proc.pid}") and n == 4
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        wait_until(lambda: not c.scheduler_info()["workers"], 30, "the workers to leave")


@pytest.mark.gpu
def test_fit_memory_on_a_gpu_that_another_process_mostly_holds(caplog):
    """On a real GPU with room for two workers (this process holds the rest), ``--fit-memory``
    starts two of the four asked for, and waiting for the job's workers ends with those two."""
    pytest.importorskip("dask_cuda")
    from tilelabel.cluster.jobqueue import wait_for_workers
    from tilelabel.kernels.backends import cuda_available
    from tilelabel.resources.gpu import GPU_MEMORY_PER_WORKER

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    args = ["--workers-per-gpu", "4", "--fit-memory", "--nthreads", "1"]
    with (
        gpu_memory_left(GPU_MEMORY_PER_WORKER * 5 // 2),
        launcher(args, {"CUDA_VISIBLE_DEVICES": "0"}) as (c, proc),
    ):
        assert wait_for_workers(c, jobs=1, per_job=4, timeout=120) == 2
        # the wait ended on the job's own count, not at its time limit
        assert "starting with" not in caplog.text
        assert len(c.scheduler_info()["workers"]) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
