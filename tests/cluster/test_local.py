"""Run configs' cluster sections on real clusters: the shipped configs run, flags override them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr
from scipy import ndimage

from tests.conftest import write_zarr
from tilelabel import config
from tilelabel.cli import main
from tilelabel.resources.gpu import worker_threads
from tilelabel.synth import random_volume

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FULL3 = np.ones((3, 3, 3))


def run(*args):
    return main([str(a) for a in args])


def sample(where: Path, shape=(48, 40, 36), chunks=(16, 20, 12), seed=4) -> np.ndarray:
    """``sample.zarr`` in ``where``: the input name the shipped configs use."""
    img = random_volume(shape, 0.3, 1, seed=seed)
    write_zarr(where / "sample.zarr", img, chunks)
    return img


def shipped(name: str, tmp_path: Path, **changes) -> Path:
    """A shipped config, copied into ``tmp_path/configs`` (its relative paths name files in
    ``tmp_path``, as in a checkout) with some values changed (e.g. the scheduler address)."""
    raw = yaml.safe_load((CONFIGS / name).read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    out = tmp_path / "configs" / name
    out.parent.mkdir(exist_ok=True)
    out.write_text(yaml.safe_dump(raw))
    return out


def test_local_cpu_config_runs_as_shipped(tmp_path, monkeypatch, capsys):
    """configs/local-cpu.yaml unchanged, on a LocalCluster it starts itself, run from another
    folder: its relative paths are the config's. The dashboard address is printed, and no
    progress bar shows when stderr is not a terminal."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    img = sample(tmp_path, chunks=(16, 16, 16))
    assert run("label", "--config", shipped("local-cpu.yaml", tmp_path)) == 0
    err = capsys.readouterr().err
    assert "local dask cluster of 2 workers, dashboard at http" in err
    assert "labeling:" not in err and "%|" not in err
    labels = zarr.open_array(str(tmp_path / "labels.zarr"))[...]
    np.testing.assert_array_equal(labels, ndimage.label(img, FULL3)[0])
    assert not list((tmp_path / "elsewhere").iterdir())


def test_config_paths_are_relative_to_the_file_and_flags_to_the_folder(tmp_path, monkeypatch):
    cfg = tmp_path / "runs" / "a.yaml"
    cfg.parent.mkdir()
    cfg.write_text(
        "input: in.zarr\noutput: s3://bucket/out.zarr\nstats: t/stats.parquet\n"
        "intensity: /abs/img.zarr\ncluster: {kind: scheduler, address: sched.json}\n"
    )
    monkeypatch.chdir(tmp_path)
    opts = config.load("runs/a.yaml")
    runs = str(tmp_path / "runs")
    assert opts["input"] == f"{runs}/in.zarr" and opts["stats"] == f"{runs}/t/stats.parquet"
    assert opts["output"] == "s3://bucket/out.zarr" and opts["intensity"] == "/abs/img.zarr"
    assert opts["cluster"]["address"] == f"{runs}/sched.json"


def test_scheduler_config_runs(tmp_path, cluster, monkeypatch):
    monkeypatch.chdir(tmp_path)
    img = sample(tmp_path)
    cfg = shipped(
        "scheduler.yaml",
        tmp_path,
        chunks=[16, 20, 12],
        backend="cpu",
        cluster={"address": cluster.scheduler_address},
    )
    assert config.load(cfg)["cluster"]["kind"] == "scheduler"
    assert run("label", "--config", cfg, "-q") == 0
    labels = zarr.open_array(str(tmp_path / "labels.zarr"))[...]
    np.testing.assert_array_equal(labels, ndimage.label(img, FULL3)[0])


def test_flags_override_the_cluster_section(tmp_path, cluster, monkeypatch, capsys):
    """A cluster section pointing at nothing fails; --scheduler on the command line replaces it,
    and positional INPUT OUTPUT replace the file's."""
    img = sample(tmp_path)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "input: nowhere.zarr\noutput: nothing.zarr\nbackend: cpu\nchunks: [16, 20, 12]\n"
        "cluster: {kind: scheduler, address: 'tcp://127.0.0.1:9'}\n"
    )
    out = tmp_path / "out.zarr"
    argv = ["label", "--config", cfg, tmp_path / "sample.zarr", out, "-q"]
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        assert run(*argv) == 1
    assert "failed" in capsys.readouterr().err and not out.exists()
    assert run(*argv, "--scheduler", cluster.scheduler_address, "-c", "6") == 0
    np.testing.assert_array_equal(zarr.open_array(str(out))[...], ndimage.label(img)[0])


def test_local_kind_starts_its_own_cluster(tmp_path, client):
    """kind: local starts a LocalCluster even while another client is active in the process."""
    import tilelabel

    img = sample(tmp_path, shape=(30, 20), chunks=(10, 10))
    with client.as_current():
        n = tilelabel.label_zarr(
            str(tmp_path / "sample.zarr"),
            str(tmp_path / "out.zarr"),
            backend="cpu",
            cluster={"kind": "local", "workers": 1},
        )
    ref, rn = ndimage.label(img, np.ones((3, 3)))
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)


@pytest.mark.gpu
def test_local_gpu_config_runs(tmp_path, monkeypatch):
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available() or importlib.util.find_spec("dask_cuda") is None:
        pytest.skip("needs a usable GPU and dask-cuda")
    img = sample(tmp_path)
    cfg = shipped("local-gpu.yaml", tmp_path)
    assert config.load(cfg)["cluster"] == {"kind": "local-cuda"}
    assert run("label", "--config", cfg, "--chunks", "16,20,12", "-q") == 0
    labels = zarr.open_array(str(tmp_path / "labels.zarr"))[...]
    np.testing.assert_array_equal(labels, ndimage.label(img, FULL3)[0])


def test_every_shipped_config_is_tested():
    """A new file in configs/ needs a test that runs it (or its job script)."""
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == [
        "local-cpu.yaml",
        "local-gpu.yaml",
        "scheduler.yaml",
        "slurm-gpu.yaml",
        "slurm-runner.yaml",  # tests/cluster/test_jobqueue.py runs it under a real Slurm
    ]


@pytest.mark.parametrize(
    "cores, slots, threads",
    [
        (16, 19, 8),  # an 80 GB GPU, 16 cores: 8 threads
        (16, None, 8),  # NVML cannot tell: the cores decide
        (16, 5, 5),  # 22 GiB free: as many threads as fit
        (4, 5, 4),  # a thread per core
        (32, 35, 8),  # a 141 GB GPU, 32 cores: still 8 threads
        (0, None, 1),
    ],
)
def test_worker_threads(cores, slots, threads):
    assert worker_threads(cores, slots) == threads
