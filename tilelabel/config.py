"""Run configs: YAML files that describe a whole run, validated on load.

Every key maps onto a ``tilelabel label`` option of the same name (dashes or underscores);
command-line flags override the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

BACKENDS = ("auto", "cpu", "cuda")
DTYPES = ("auto", "uint32", "uint64")


def _chunks(value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, int | str) and str(v).isdigit() and int(v) > 0 for v in value
    ):
        raise ValueError("a list of positive integers, e.g. [256, 256, 256]")
    return tuple(int(v) for v in value)


def _choice(options: tuple[str, ...]):
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError(f"one of {', '.join(options)}")
        return value

    return check


def _size(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("a number of voxels (an integer >= 0)")
    return value


def byte_count(value: Any) -> int:
    """A number of bytes: an integer >= 0 or a size such as ``512MB`` or ``4 GiB``."""
    what = "a number of bytes (an integer >= 0, or a size such as 512MB or 4GiB)"
    if isinstance(value, bool):
        raise ValueError(what)
    if isinstance(value, str):
        from dask.utils import parse_bytes

        try:
            value = parse_bytes(value)
        except (ValueError, TypeError):
            raise ValueError(what) from None
    if not isinstance(value, int) or value < 0:
        raise ValueError(what)
    return value


def _typed(kind: type, what: str):
    def check(value: Any):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(what)
        return value

    return check


def _positive_int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError("a positive integer")
    return value


def _index(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("an integer >= 0")
    return value


def _gpu_encode(value: Any) -> bool | int:
    if isinstance(value, bool) or (isinstance(value, int) and value >= 0):
        return value
    raise ValueError("true, false or a number of GPU encoder turns (an integer >= 0)")


def _mapping(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ValueError("a mapping of option: value")
    return dict(value)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("a list of strings")
    return list(value)


def _number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ValueError("a positive number")
    return value


_text = _typed(str, "a string")

#: ``cluster:`` kinds -> {key: validator}; ``kind`` picks where the run's workers come from
CLUSTER_KINDS: dict[str, dict[str, Any]] = {
    # a LocalCluster of single-threaded worker processes
    "local": {"workers": _positive_int},
    # a dask_cuda.LocalCUDACluster on ``workers`` GPUs of CUDA_VISIBLE_DEVICES (default: all),
    # ``workers_per_gpu`` worker processes on each (default: see cluster.cuda_cluster)
    "local-cuda": {"workers": _positive_int, "workers_per_gpu": _positive_int},
    # a running scheduler: ``address`` tcp://host:port, or the path of a scheduler file (.json)
    "scheduler": {"address": _text},
    # dask-jobqueue's SLURMCluster (see tilelabel.pipeline.jobqueue)
    "slurm": {
        "queue": _text,
        "account": _text,
        "walltime": _text,
        "cores": _positive_int,
        "memory": _text,
        "processes": _positive_int,
        "gpus": _index,
        "workers_per_gpu": _positive_int,
        "scale": _positive_int,
        "wait_timeout": _number,
        "interface": _text,
        "python": _text,
        "local_directory": _text,
        "log_directory": _text,
        "job_extra_directives": _strings,
        "job_script_prologue": _strings,
        "worker_extra_args": _strings,
    },
}
REQUIRED_CLUSTER_KEYS = {"scheduler": ("address",)}


class _SubKeyError(ValueError):
    """A bad key inside a nested mapping; the message is complete (it names ``cluster.KEY``)."""


def _cluster(value: Any) -> dict[str, Any]:
    """Validate a ``cluster:`` mapping; errors name the sub-key (``cluster.queue``)."""
    kinds = ", ".join(CLUSTER_KINDS)
    if not isinstance(value, dict):
        raise _SubKeyError(f"'cluster' must be a mapping with a 'kind' (one of {kinds})")
    kind = value.get("kind")
    if kind not in CLUSTER_KINDS:
        raise _SubKeyError(f"bad value {kind!r} for 'cluster.kind': expected one of {kinds}")
    allowed = CLUSTER_KINDS[kind]
    out: dict[str, Any] = {"kind": kind}
    for key, sub in value.items():
        name = str(key).replace("-", "_")
        if name == "kind":
            continue
        if name not in allowed:
            raise _SubKeyError(
                f"unknown key 'cluster.{key}' for kind {kind}; allowed keys: kind, "
                f"{', '.join(sorted(allowed))}"
            )
        try:
            out[name] = allowed[name](sub)
        except ValueError as e:
            raise _SubKeyError(f"bad value {sub!r} for 'cluster.{key}': expected {e}") from None
    missing = [k for k in REQUIRED_CLUSTER_KEYS.get(kind, ()) if k not in out]
    if missing:
        raise _SubKeyError(f"missing 'cluster.{missing[0]}' (required for kind {kind})")
    return out


#: key -> validator returning the normalised value or raising ValueError(allowed values)
SCHEMA = {
    "input": _typed(str, "a path or URL of a zarr array"),
    "output": _typed(str, "a path or URL for the output zarr array"),
    "connectivity": _positive_int,
    "chunks": _chunks,
    "backend": _choice(BACKENDS),
    "algorithm": _typed(str, "a kernel name such as bke, buf or uf"),
    "dtype": _choice(DTYPES),
    "overwrite": _typed(bool, "true or false"),
    "workers": _positive_int,
    "workers_per_gpu": _positive_int,
    "scheduler": _typed(str, "a dask scheduler address such as tcp://host:8786"),
    "stats": _typed(str, "a path or URL for the statistics table (.parquet)"),
    "intensity": _typed(str, "a path or URL of a zarr array of the input's shape"),
    "min_size": _size,
    "max_size": _size,
    "keep_labels": byte_count,
    "keep_input": _typed(bool, "true or false"),
    "gpu_encode": _gpu_encode,
    "cluster": _cluster,
    "storage_options": _mapping,
    "channel": _index,
    "timepoint": _index,
    "ome_labels": _typed(str, "a name for the labels in the OME-Zarr image's labels/ group"),
}


class ConfigError(ValueError):
    """A config file that does not describe a valid run; the message names the key."""


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a run config; returns a dict keyed like :data:`SCHEMA`."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"config file {path} does not exist") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from e
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a mapping of option: value")
    return validate(raw, str(path))


def validate(raw: dict[str, Any], origin: str = "config") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in SCHEMA:
            raise ConfigError(
                f"{origin}: unknown key {key!r}; allowed keys: {', '.join(sorted(SCHEMA))}"
            )
        try:
            out[name] = SCHEMA[name](value)
        except _SubKeyError as e:
            raise ConfigError(f"{origin}: {e}") from e
        except ValueError as e:
            raise ConfigError(f"{origin}: bad value {value!r} for {key!r}: expected {e}") from e
    if "cluster" in out and "scheduler" in out:
        raise ConfigError(
            f"{origin}: give either 'scheduler' or 'cluster' (kind: scheduler), not both"
        )
    return out
