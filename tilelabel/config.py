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
    "scheduler": _typed(str, "a dask scheduler address such as tcp://host:8786"),
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
        except ValueError as e:
            raise ConfigError(f"{origin}: bad value {value!r} for {key!r}: expected {e}") from e
    return out
