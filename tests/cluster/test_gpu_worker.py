"""The worker command of GPU batch jobs: a dask worker on each of the job's GPUs."""

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
from tilelabel.cluster.gpu_worker import worker_commands
from tilelabel.resources.gpu import visible_gpus

ROOT = Path(__file__).resolve().parents[2]


def test_one_dask_worker_per_gpu_with_its_gpu_alone_in_view():
    cmds = worker_commands(
        ["tcp://s:1", "--name", "job", "--nthreads", "4", "--memory-limit", "1GiB"],
        ["2", "GPU-abc"],
        python="py",
        room=lambda gpu: None,  # room not known: the threads asked for
    )
    assert [env for _, env in cmds] == [
        {"CUDA_VISIBLE_DEVICES": "2"},
        {"CUDA_VISIBLE_DEVICES": "GPU-abc"},
    ]
    for i, (cmd, _) in enumerate(cmds):
        assert cmd[:6] == [
            "py",
            "-m",
            "distributed.cli.dask_worker",
            "tcp://s:1",
            "--memory-limit",
            "1GiB",
        ]
        assert cmd[6:] == ["--nworkers", "1", "--nthreads", "4", "--name", f"job-gpu{i}"]


def test_threads_fit_each_gpu():
    """A thread per core given, at most 8 and one per 4 GiB of the GPU's free memory."""
    room = {"0": 2, "1": 16, "2": None}
    cmds = worker_commands(["tcp://s:1", "--nthreads", "12"], list(room), room=room.get)
    assert [cmd[cmd.index("--nthreads") + 1] for cmd, _ in cmds] == ["2", "8", "8"]


def test_scheduler_file_instead_of_an_address():
    ((cmd, env),) = worker_commands(["--scheduler-file", "s.json"], ["0"], room=lambda g: 4)
    assert cmd[1:] == [
        "-m",
        "distributed.cli.dask_worker",
        "--scheduler-file",
        "s.json",
        "--nworkers",
        "1",
        "--nthreads",
        "1",
    ]


@pytest.mark.parametrize(
    ("argv", "gpus", "message"),
    [
        (["tcp://s:1", "--nthreads", "0"], ["0"], "must be >= 1"),
        (["tcp://s:1", "--nworkers", "4"], ["0"], "one worker per GPU"),
        (["tcp://s:1"], [], "sees no GPU"),
    ],
)
def test_bad_arguments(argv, gpus, message, capsys):
    with pytest.raises((SystemExit, RuntimeError)) as e:
        worker_commands(argv, gpus, room=lambda g: None)
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


def test_launcher_runs_a_worker_per_gpu_and_stops_them_on_a_signal():
    """Real dask workers connect to a real scheduler; the GPU ids only go into their
    environment (nothing here touches a GPU). They name no real GPU, so distributed's NVML
    diagnostics are off: on a GPU machine a worker would otherwise look GPU 3 up at start."""
    args = ["--name", "job7", "--nthreads", "2", "--memory-limit", "1GiB"]
    env = {"CUDA_VISIBLE_DEVICES": "3,5", "DASK_DISTRIBUTED__DIAGNOSTICS__NVML": "False"}
    with launcher(args, env) as (c, proc):
        wait_until(lambda: len(c.scheduler_info()["workers"]) == 2, 120, "2 workers")
        seen = c.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"])
        names = {w["name"]: seen[a] for a, w in c.scheduler_info()["workers"].items()}
        assert names == {"job7-gpu0": "3", "job7-gpu1": "5"}
        assert all(w["nthreads"] == 2 for w in c.scheduler_info()["workers"].values())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        wait_until(lambda: not c.scheduler_info()["workers"], 30, "the workers to leave")


@pytest.mark.gpu
def test_threads_fit_a_gpu_that_another_process_mostly_holds():
    """On a real GPU with room for two worker threads (this process holds the rest), the
    worker gets two of the four threads asked for."""
    pytest.importorskip("dask_cuda")
    from tilelabel.kernels.backends import cuda_available
    from tilelabel.resources.gpu import GPU_MEMORY_PER_WORKER

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    with (
        gpu_memory_left(GPU_MEMORY_PER_WORKER * 5 // 2),
        launcher(["--nthreads", "4"], {"CUDA_VISIBLE_DEVICES": "0"}) as (c, proc),
    ):
        wait_until(lambda: len(c.scheduler_info()["workers"]) == 1, 120, "the worker")
        assert [w["nthreads"] for w in c.scheduler_info()["workers"].values()] == [2]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
