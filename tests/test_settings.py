"""Process settings in dask's config: defaults, dask.config.set, environment variables."""

from __future__ import annotations

import os
import subprocess
import sys

import dask
import pytest

from tilelabel import settings
from tilelabel.cores import usable_cores


def test_defaults_and_dask_config():
    assert settings.codec_threads() == usable_cores()
    assert settings.codec_nice() == 10
    with dask.config.set({"tilelabel.codec.threads": 3, "tilelabel.codec.nice": 0}):
        assert settings.codec_threads() == 3
        assert settings.codec_nice() == 0


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("codec.threads", 0, "tilelabel.codec.threads must be an integer >= 1, got 0"),
        ("codec.threads", "many", "tilelabel.codec.threads must be an integer >= 1"),
        ("codec.nice", -1, "tilelabel.codec.nice must be an integer in 0..39, got -1"),
    ],
)
def test_bad_settings_name_the_key(key, value, message):
    with dask.config.set({f"tilelabel.{key}": value}), pytest.raises(ValueError, match=message):
        settings.codec_threads() if key == "codec.threads" else settings.codec_nice()


def test_environment_variables_reach_the_settings():
    env = {**os.environ, "DASK_TILELABEL__CODEC__THREADS": "5", "DASK_TILELABEL__CODEC__NICE": "2"}
    code = "from tilelabel import settings; print(settings.codec_threads(), settings.codec_nice())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["5", "2"], out.stderr


def test_a_local_cluster_hands_its_settings_to_its_workers():
    from distributed import Client, LocalCluster

    with dask.config.set({"tilelabel.codec.threads": 7}):
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster,
            Client(cluster, set_as_default=False) as client,
        ):
            got = client.run(settings.codec_threads)
    assert list(got.values()) == [7]
