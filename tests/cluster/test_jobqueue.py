"""Batch systems through dask-jobqueue: the job scripts each kind generates (a real Slurm runs
them where one can be started here), a site's jobqueue.yaml, and one-allocation runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tilelabel import config

pytest.importorskip("dask_jobqueue")

from tilelabel.cluster import jobqueue  # noqa: E402

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
    # tilelabel's launcher: a worker on each of the 4 GPUs, with the 16 cores' share as threads
    assert re.search(r" -m tilelabel.cluster.gpu_worker tcp://\S+ ", line), line
    assert "--nthreads 4" in line and "--memory-limit 32.00GiB" in line
    assert "--nworkers" not in line and "--workers-per-gpu" not in line
    assert jobqueue.workers_per_job(spec) == 4


def test_slurm_gpu_jobs_start_a_worker_per_gpu():
    base = {"kind": "slurm", "gpus": 2, "cores": 8, "memory": "64GiB"}
    kwargs = jobqueue.batch_kwargs(base)
    assert kwargs["processes"] == 2 and kwargs["cores"] == 8
    assert "--gres=gpu:2" in kwargs["job_extra_directives"]
    # fewer cores than GPUs: the job asks for a core per worker
    assert jobqueue.batch_kwargs({**base, "cores": 1})["processes"] == 2
    assert jobqueue.batch_kwargs({**base, "cores": 1})["cores"] == 2
    with pytest.raises(config.ConfigError, match="workers_per_gpu"):
        config.validate({"cluster": {**base, "workers_per_gpu": 3}})


def test_wait_for_workers(caplog):
    """Real workers on a real scheduler: the wait ends when the workers are there, or after its
    timeout with those there are, if any."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, processes=False, dashboard_address=None) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        assert jobqueue.wait_for_workers(c, 2, timeout=120) == 2
        assert "starting with" not in caplog.text
        assert jobqueue.wait_for_workers(c, 3, timeout=1) == 2
        assert "starting with 2 of 3 workers" in caplog.text
    with (
        LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster,
        Client(cluster, set_as_default=False) as c,
        pytest.raises(RuntimeError, match="no dask worker connected within 1.0 s"),
    ):
        jobqueue.wait_for_workers(c, 1, timeout=1.0)


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
    kwargs = jobqueue.batch_kwargs({"kind": "slurm"})
    assert kwargs["cores"] == 1 and kwargs["processes"] == 1 and kwargs["memory"] == "4GiB"
    assert "scale" not in kwargs and "kind" not in kwargs


def script_of(kind: str, **keys) -> str:
    spec = config.validate({"cluster": {"kind": kind, **keys}})["cluster"]
    return jobqueue.job_script(spec)


def header(script: str, prefix: str) -> list[str]:
    return [line[len(prefix) :].strip() for line in script.splitlines() if line.startswith(prefix)]


GPU_JOB = {"gpus": 2, "cores": 8, "memory": "64GiB", "queue": "gpuq"}


@pytest.mark.parametrize(
    "kind, prefix, gpu_directive",
    [
        ("slurm", "#SBATCH", "--gres=gpu:2"),
        ("pbs", "#PBS", "-l select=1:ncpus=8:mem=64GB:ngpus=2"),
        ("lsf", "#BSUB", '-gpu "num=2"'),
        ("sge", "#$", "-l gpu=2"),
    ],
)
def test_gpu_job_scripts_of_every_batch_system(kind, prefix, gpu_directive):
    """The same GPU workers on every batch system: only the GPU directive differs."""
    script = script_of(kind, **GPU_JOB)
    assert gpu_directive in header(script, prefix)
    line = worker_line(script)
    assert re.search(r" -m tilelabel.cluster.gpu_worker tcp://\S+ ", line), line
    assert "--nthreads 4" in line and "--nworkers" not in line
    assert "--memory-limit 32.00GiB" in line  # 64 GiB over the job's 2 workers
    assert (
        jobqueue.workers_per_job(config.validate({"cluster": {"kind": kind, **GPU_JOB}})["cluster"])
        == 2
    )


def test_htcondor_job_script():
    """HTCondor: a submit description (request_gpus) and the same worker command."""
    job = {k: v for k, v in GPU_JOB.items() if k != "queue"}  # HTCondor has no queues
    script = script_of("htcondor", disk="2GiB", **job)
    assert re.search(r"^request_gpus = 2$", script, re.M), script
    assert re.search(r"^RequestCpus = MY.DaskWorkerCores$", script, re.M)
    assert "tilelabel.cluster.gpu_worker" in script and "--nthreads 4" in script
    cpu = script_of("htcondor", disk="2GiB", cores=4, memory="8GiB")
    assert "request_gpus" not in cpu and "--nworkers 4" in cpu and "--nthreads 1" in cpu


def test_cpu_job_scripts_of_every_batch_system():
    for kind, prefix in (("pbs", "#PBS"), ("lsf", "#BSUB"), ("sge", "#$")):
        script = script_of(kind, cores=4, memory="8GiB", walltime="01:00:00", queue="q")
        assert any("q" == d.split()[-1] for d in header(script, prefix)), script
        line = worker_line(script)
        assert "distributed.cli.dask_worker" in line and "--nworkers 4" in line
        assert "--nthreads 1" in line and not any("gpu" in d for d in header(script, prefix))


def test_kind_keys_are_checked():
    bad = [
        ({"kind": "pbs", "account": 3}, "cluster.account"),
        ({"kind": "lsf", "account": "x"}, "unknown key 'cluster.account' for kind lsf"),
        ({"kind": "htcondor", "job_extra_directives": ["a"]}, "cluster.job_extra_directives"),
        ({"kind": "slurm-runner", "cores": 2}, "unknown key 'cluster.cores'"),
        ({"kind": "htcondor", "queue": "q"}, "unknown key 'cluster.queue' for kind htcondor"),
        ({"kind": "torque"}, "slurm, pbs, lsf, sge, htcondor, slurm-runner"),
    ]
    for section, message in bad:
        with pytest.raises(config.ConfigError, match=re.escape(message)):
            config.validate({"cluster": section})


SITE = """
jobqueue:
  slurm:
    cores: 6
    memory: 24GiB
    account: site-account
    job-extra-directives: ["--qos=high", "--constraint=skylake"]
    worker-extra-args: ["--lifetime", "55m"]
"""

SITE_SCRIPTS = """
import json
from tilelabel.cluster import jobqueue
print(json.dumps([
    jobqueue.job_script({"kind": "slurm"}),
    jobqueue.job_script({"kind": "slurm", "gpus": 2}),
    jobqueue.job_script({"kind": "slurm", "cores": 2, "job_extra_directives": ["--qos=low"]}),
]))
"""


def test_a_site_jobqueue_yaml_is_honoured(tmp_path):
    """A site's jobqueue.yaml, where dask finds it (DASK_CONFIG): every key the cluster section
    leaves out comes from there, GPU jobs add their directive to the site's, and a key the
    section gives wins."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "jobqueue.yaml").write_text(SITE)
    env = {**os.environ, "DASK_CONFIG": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SITE_SCRIPTS], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    cpu, gpu, own = json.loads(done.stdout)
    d = directives(cpu)
    assert {"--qos=high", "--constraint=skylake", "-A site-account"} <= set(d)
    assert "--cpus-per-task=6" in d and "--mem=24G" in d
    assert "--nworkers 6" in worker_line(cpu) and "--lifetime 55m" in worker_line(cpu)
    d = directives(gpu)
    assert {"--qos=high", "--constraint=skylake", "--gres=gpu:2"} <= set(d)
    assert "--lifetime 55m" in worker_line(gpu) and "--nthreads 3" in worker_line(gpu)
    d = directives(own)
    assert "--qos=low" in d and "--qos=high" not in d and "--cpus-per-task=2" in d


# --- a real single-node Slurm (Debian's slurm-wlm and munge), started here when available ---

SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """munged, slurmctld and slurmd on this machine, with every file in a temporary folder: one
    partition ``debug`` of this node (no cgroups, linuxproc process tracking, SlurmUser root).
    Yields the partition name; SLURM_CONF points dask-jobqueue's sbatch/squeue/scancel at it."""
    import os
    import shutil
    import socket
    import subprocess

    missing = [b for b in SLURM_BINARIES if shutil.which(b) is None]
    if missing:
        pytest.skip(f"Slurm not installed (no {', '.join(missing)}): apt-get install slurm-wlm")
    if os.geteuid() != 0:
        pytest.skip("the test Slurm runs its daemons as root")
    d = tmp_path_factory.mktemp("slurm")
    (d / "state").mkdir()
    (d / "spool").mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = d / "munge.sock"
    host = socket.gethostname().split(".")[0]
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    conf = d / "slurm.conf"
    conf.write_text(
        f"""ClusterName=tilelabel-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
PlugStackConfig={d}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
NodeName={host} CPUs={os.cpu_count()} RealMemory={mem_mb // 2} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    (d / "plugstack.conf").write_text("")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started = []
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    try:
        try:
            subprocess.run(
                ["munged", "--force", f"--key-file={key}", f"--socket={sock}",
                 f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                 f"--seed-file={d}/munge.seed"],
                check=True, env=env,
            )  # fmt: skip
            started.append(d / "munged.pid")
            subprocess.run(["slurmctld", "-i"], check=True, env=env)
            started.append(d / "slurmctld.pid")
            subprocess.run(["slurmd"], check=True, env=env)
            started.append(d / "slurmd.pid")

            def idle() -> bool:
                out = subprocess.run(
                    ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env
                ).stdout
                return out.strip() == "idle"

            wait_until(idle, 60, "the Slurm node to become idle")
        except (subprocess.CalledProcessError, RuntimeError) as e:
            # installed but unable to run here (e.g. a container without the privileges)
            logs = "".join(p.read_text()[-400:] for p in d.glob("*.log"))
            pytest.skip(f"the test Slurm did not come up on this machine ({e}): {logs}")
        yield "debug"
    finally:
        subprocess.run(["scancel", "--user=root"], env=env, capture_output=True)
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True)
        for pid_file in reversed(started):  # only the daemons started here, by their pid
            try:
                pid = int(pid_file.read_text())
            except (OSError, ValueError):
                continue
            if pid_file.name == "munged.pid":
                os.kill(pid, 15)
            try:  # slurmd and slurmctld stop on "scontrol shutdown"
                wait_until(lambda p=pid: not os.path.exists(f"/proc/{p}"), 10, str(pid_file))
            except RuntimeError:
                os.kill(pid, 9)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


def test_label_through_real_slurm_jobs(slurm, tmp_path, capsys):
    """The shipped slurm-gpu.yaml, turned to CPU workers (gpus: 0) on the test partition, run
    by the command: dask-jobqueue submits a job, its worker connects, the labels equal scipy."""
    import subprocess

    import numpy as np
    import yaml
    import zarr
    from scipy import ndimage

    from tests.conftest import write_zarr
    from tilelabel.cli import main
    from tilelabel.synth import random_volume

    img = random_volume((40, 36, 30), 0.3, 1, seed=31)
    src = write_zarr(tmp_path / "in.zarr", img, (10, 12, 10))
    raw = yaml.safe_load((CONFIGS / "slurm-gpu.yaml").read_text())
    raw.update(input=src, output=str(tmp_path / "out.zarr"), backend="cpu", chunks=[20, 12, 10])
    raw["cluster"].update(
        queue=slurm, gpus=0, cores=2, memory="2GiB", scale=1, walltime="00:10:00",
        wait_timeout=120, log_directory=str(tmp_path / "logs"),
    )  # fmt: skip
    cfg = tmp_path / "slurm-cpu.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["label", "--config", str(cfg), "-q"]) == 0
    out = capsys.readouterr()
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "out.zarr"))[...], ndimage.label(img, np.ones((3, 3, 3)))[0]
    )
    assert "components in 43,200 voxels" in out.out
    # the job ran under Slurm (its output file is there) and was cancelled at the end
    assert list((tmp_path / "logs").glob("*.out")) or list((tmp_path / "logs").glob("*.err"))
    squeue = subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout
    wait_until(
        lambda: not subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout,
        30,
        f"the dask job to leave the queue ({squeue})",
    )


def test_label_in_one_slurm_allocation(slurm, tmp_path):
    """kind slurm-runner: srun runs the command in 4 tasks of one allocation; task 0 becomes
    the scheduler, task 1 the run and the others workers (dask-jobqueue's SLURMRunner). Every
    task exits once the run is done, and only the run's writes the output."""
    import os
    import subprocess
    import sys

    import numpy as np
    import zarr
    from scipy import ndimage

    from tests.cluster.test_local import shipped
    from tests.conftest import write_zarr
    from tilelabel.synth import random_volume

    img = random_volume((40, 36, 30), 0.3, 1, seed=32)
    write_zarr(tmp_path / "sample.zarr", img, (10, 12, 10))
    # the shipped config, its relative paths naming tmp_path's files as they name a checkout's
    cfg = shipped("slurm-runner.yaml", tmp_path, chunks=[20, 12, 10], cluster={"wait_timeout": 120})
    done = subprocess.run(
        ["srun", "-p", slurm, "-n", "4", "--overcommit", "--mem=0", "-t", "10",
         sys.executable, "-m", "tilelabel.cli", "label", "--config", str(cfg), "-q"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("components in 43,200 voxels") == 1, done.stdout
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "labels.zarr"))[...],
        ndimage.label(img, np.ones((3, 3, 3)))[0],
    )


def test_slurm_runner_outside_an_allocation_says_so(tmp_path, monkeypatch, capsys):
    from tilelabel.cli import main

    monkeypatch.delenv("SLURM_PROCID", raising=False)
    cfg = tmp_path / "runner.yaml"
    cfg.write_text("cluster: {kind: slurm-runner}\n")
    assert main(["label", "--config", str(cfg), "in.zarr", "out.zarr"]) != 0
    assert "in every task of an srun" in capsys.readouterr().err


CTRL_C_KEPT = """
import signal
from tilelabel.cluster.jobqueue import runner_class
def mine(*_):
    pass
signal.signal(signal.SIGINT, mine)
runner_class(client={client})
print(signal.getsignal(signal.SIGINT) is mine)
"""


@pytest.mark.parametrize("client, kept", [(True, "True"), (False, "False")])
def test_the_run_keeps_its_ctrl_c_handler_where_dask_jobqueue_s_runner_sets_one(client, kept):
    """dask-jobqueue's runner module replaces SIGINT's handler on import: the run's task puts
    its own back (Ctrl-C then stops the run in one line); its scheduler and workers keep the
    runner's, which their shutdown needs."""
    pytest.importorskip("dask_jobqueue")
    code = CTRL_C_KEPT.format(client=client)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == kept
