from pathlib import Path

import pytest

from tilelabel import config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_valid_config(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(
        "input: a.zarr\noutput: b.zarr\nconnectivity: 6\nchunks: 64,64,64\n"
        "backend: cpu\ndtype: uint64\noverwrite: true\nworkers: 3\n"
    )
    assert config.load(p) == {
        "input": "a.zarr",
        "output": "b.zarr",
        "connectivity": 6,
        "chunks": (64, 64, 64),
        "backend": "cpu",
        "dtype": "uint64",
        "overwrite": True,
        "workers": 3,
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("colour: red\n", "unknown key 'colour'; allowed keys:"),
        ("backend: tpu\n", "bad value 'tpu' for 'backend': expected one of auto, cpu, cuda"),
        ("dtype: int8\n", "expected one of auto, uint32, uint64"),
        ("chunks: [64, -1]\n", "expected a list of positive integers"),
        ("workers: 0\n", "'workers': expected a positive integer"),
        ("overwrite: maybe\n", "'overwrite': expected true or false"),
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
