"""Slurm through dask-jobqueue: the job scripts the shipped config generates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilelabel import config

pytest.importorskip("dask_jobqueue")

from tilelabel.pipeline import jobqueue  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def directives(script: str) -> list[str]:
    return [line[len("#SBATCH ") :] for line in script.splitlines() if line.startswith("#SBATCH")]


def worker_line(script: str) -> str:
    (line,) = [x for x in script.splitlines() if " -m " in x]
    return line


def test_slurm_gpu_job_script():
    spec = config.load(CONFIGS / "slurm-gpu.yaml")["cluster"]
    script = jobqueue.job_script(spec)
    d = directives(script)
    assert "-p gpu" in d and "-t 02:00:00" in d and "--gres=gpu:4" in d
    assert "--cpus-per-task=16" in d and "--mem=128G" in d
    line = worker_line(script)
    # dask-cuda's worker through dask's command line: one worker per GPU of the job
    assert re.search(r" -m dask cuda worker tcp://\S+ ", line), line
    assert "--nthreads 4" in line and "--memory-limit 32.00GiB" in line
    assert "--nworkers" not in line  # dask-cuda counts the GPUs itself
    assert jobqueue.workers_per_job(spec) == 4


def test_cpu_job_script_and_options():
    spec = config.validate(
        {
            "cluster": {
                "kind": "slurm",
                "queue": "cpu",
                "account": "lab",
                "cores": 8,
                "memory": "32GiB",
                "walltime": "00:10:00",
                "job_extra_directives": ["--constraint=skylake"],
                "job_script_prologue": ["source /shared/venv/bin/activate"],
                "python": "/shared/venv/bin/python",
            }
        }
    )["cluster"]
    script = jobqueue.job_script(spec)
    d = directives(script)
    assert {"-p cpu", "-A lab", "--cpus-per-task=8", "--mem=32G", "-t 00:10:00"} <= set(d)
    assert "--constraint=skylake" in d and not any("gres" in x for x in d)
    assert "source /shared/venv/bin/activate" in script
    line = worker_line(script)
    assert line.startswith("/shared/venv/bin/python -m distributed.cli.dask_worker tcp://")
    # single-threaded worker processes, one per core, as on a local cluster
    assert "--nthreads 1" in line and "--nworkers 8" in line and "--memory-limit 4.00GiB" in line
    assert jobqueue.workers_per_job(spec) == 8


def test_defaults():
    kwargs = jobqueue.slurm_kwargs({"kind": "slurm"})
    assert kwargs["cores"] == 1 and kwargs["processes"] == 1 and kwargs["memory"] == "4GiB"
    assert "scale" not in kwargs and "kind" not in kwargs
