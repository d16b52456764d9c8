from pathlib import Path

import pytest

from tilelabel import config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_valid_config(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(
        "input: a.zarr\noutput: b.zarr\nconnectivity: 6\nchunks: 64,64,64\n"
        "backend: cpu\ndtype: uint64\noverwrite: true\nworkers: 3\nkeep-labels: 2GiB\n"
        "keep-input: false\ngpu-encode: false\n"
    )
    assert config.load(p) == {
        "input": str(tmp_path / "a.zarr"),  # relative to the config's folder
        "output": str(tmp_path / "b.zarr"),
        "connectivity": 6,
        "chunks": (64, 64, 64),
        "backend": "cpu",
        "dtype": "uint64",
        "overwrite": True,
        "workers": 3,
        "keep_labels": 2 * 2**30,
        "keep_input": False,
        "gpu_encode": False,
    }


def test_gpu_encode_takes_a_switch(tmp_path):
    p = tmp_path / "c.yaml"
    for text, value in (("true", True), ("false", False)):
        p.write_text(f"gpu_encode: {text}\n")
        assert config.load(p) == {"gpu_encode": value}


@pytest.mark.parametrize(
    "text, message",
    [
        ("colour: red\n", "unknown key 'colour'; allowed keys:"),
        ("backend: tpu\n", "bad value 'tpu' for 'backend': expected one of auto, cpu, cuda"),
        ("dtype: int8\n", "expected one of auto, uint32, uint64"),
        ("chunks: [64, -1]\n", "expected a list of positive integers"),
        ("workers: 0\n", "'workers': expected a positive integer"),
        ("overwrite: maybe\n", "'overwrite': expected true or false"),
        ("keep_labels: lots\n", "'keep_labels': expected a number of bytes"),
        ("keep_labels: -1\n", "'keep_labels': expected a number of bytes"),
        ("keep_input: 0\n", "'keep_input': expected true or false"),
        ("- a\n- b\n", "must hold a mapping"),
        ("input: [unclosed\n", "is not valid YAML"),
    ],
)
def test_bad_configs_name_the_key(tmp_path, text, message):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(config.ConfigError, match=message.replace("[", r"\[")):
        config.load(p)


def test_missing_file(tmp_path):
    with pytest.raises(config.ConfigError, match="does not exist"):
        config.load(tmp_path / "none.yaml")


def test_shipped_configs_are_valid():
    for path in CONFIGS.glob("*.yaml"):
        assert config.load(path)["input"], path


def test_cluster_sections(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(
        "cluster:\n  kind: slurm\n  queue: gpu\n  walltime: '01:00:00'\n  gpus: 2\n  scale: 3\n"
        "  job-extra-directives: --constraint=a100\n"
    )
    assert config.load(p)["cluster"] == {
        "kind": "slurm",
        "queue": "gpu",
        "walltime": "01:00:00",
        "gpus": 2,
        "scale": 3,
        "job_extra_directives": ["--constraint=a100"],
    }
    p.write_text("cluster: {kind: local-cuda, workers: 2}\n")
    assert config.load(p)["cluster"] == {"kind": "local-cuda", "workers": 2}
    p.write_text("cluster: {kind: local, workers: 3}\nchannel: 1\ntimepoint: 0\n")
    assert config.load(p) == {
        "cluster": {"kind": "local", "workers": 3},
        "channel": 1,
        "timepoint": 0,
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("cluster: {kind: pb}\n", "bad value 'pb' for 'cluster.kind': expected one of local, "),
        ("cluster: {queue: gpu}\n", "bad value None for 'cluster.kind'"),
        ("cluster: slurm\n", "'cluster' must be a mapping with a 'kind'"),
        ("cluster: {kind: slurm, gpu: 2}\n", "unknown key 'cluster.gpu' for kind slurm; allowed"),
        ("cluster: {kind: slurm, gpus: -1}\n", "'cluster.gpus': expected an integer >= 0"),
        ("cluster: {kind: slurm, scale: 0}\n", "'cluster.scale': expected a positive integer"),
        ("cluster: {kind: local, queue: a}\n", "allowed keys: kind, workers"),
        ("cluster: {kind: scheduler}\n", "missing 'cluster.address'"),
        ("cluster: {kind: local}\nscheduler: tcp://a:1\n", "either 'scheduler' or 'cluster'"),
        ("cluster: {kind: local, workers_per_gpu: 2}\n", "allowed keys: kind, workers"),
        ("cluster: {kind: local-cuda, workers_per_gpu: 2}\n", "allowed keys: kind, workers"),
        ("workers_per_gpu: 2\n", "unknown key 'workers_per_gpu'"),
        ("channel: -1\n", "'channel': expected an integer >= 0"),
        ("gpu_encode: 3\n", "'gpu_encode': expected true or false"),
        ("gpu_encode: all\n", "'gpu_encode': expected true or false"),
        ("storage_options: 3\n", "'storage_options': expected a mapping"),
    ],
)
def test_bad_cluster_sections_name_the_key(tmp_path, text, message):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(")):
        config.load(p)
