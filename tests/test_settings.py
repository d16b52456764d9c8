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
    with dask.config.set({"tilelabel.codec.threads": 3}):
        assert settings.codec_threads() == 3


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("codec.threads", 0, "tilelabel.codec.threads must be an integer >= 1, got 0"),
        ("codec.threads", "many", "tilelabel.codec.threads must be an integer >= 1"),
    ],
)
def test_bad_settings_name_the_key(key, value, message):
    with dask.config.set({f"tilelabel.{key}": value}), pytest.raises(ValueError, match=message):
        settings.codec_threads()


def test_environment_variables_reach_the_settings():
    env = {**os.environ, "DASK_TILELABEL__CODEC__THREADS": "5"}
    code = "from tilelabel import settings; print(settings.codec_threads())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["5"], out.stderr


def test_a_local_cluster_hands_its_settings_to_its_workers():
    from distributed import Client, LocalCluster

    with dask.config.set({"tilelabel.codec.threads": 7}):
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster,
            Client(cluster, set_as_default=False) as client,
        ):
            got = client.run(settings.codec_threads)
    assert list(got.values()) == [7]
