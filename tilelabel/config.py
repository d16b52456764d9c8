"""Run configs: YAML files that describe a whole run, checked on load.

Every key is an option of :class:`tilelabel.options.Options` (dashes or underscores), checked as
the API and the command line check it; command-line flags override the file. Relative paths in a
file are relative to the file's folder (:data:`PATH_KEYS`), wherever the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tilelabel.options import OptionError, checked, specs

#: options whose string values may be local paths (``stats``: when it names its table), and the
#: ``cluster:`` keys that name files the submitting process reads
PATH_KEYS = ("input", "output", "intensity", "stats")
CLUSTER_PATH_KEYS = ("scheduler_file",)


class ConfigError(ValueError):
    """A config file that does not describe a valid run; the message names the key."""


def load(path: str | Path) -> dict[str, Any]:
    """Read and check a run config; returns the options it gives, by name."""
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
    return relative_to(validate(raw, str(path)), path.resolve().parent)


def _local(value: object) -> bool:
    return isinstance(value, str) and "://" not in value and not Path(value).is_absolute()


def relative_to(options: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Checked options with their relative local paths made relative to ``folder``: a
    config's paths say where things are from the config, not from where it is run."""
    out = dict(options)
    for key in PATH_KEYS:
        if _local(out.get(key)):
            out[key] = str(folder / out[key])
    cluster = out.get("cluster")
    if cluster is not None:
        cluster = dict(cluster)
        for key in CLUSTER_PATH_KEYS:
            if _local(cluster.get(key)):
                cluster[key] = str(folder / cluster[key])
        if cluster["kind"] == "scheduler" and cluster["address"].endswith(".json"):
            if _local(cluster["address"]):  # a scheduler file
                cluster["address"] = str(folder / cluster["address"])
        out["cluster"] = cluster
    return out


def validate(raw: dict[str, Any], origin: str = "config") -> dict[str, Any]:
    """The options of a config's mapping, checked; errors start with ``origin``."""
    keys = list(specs())
    values = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in keys:
            raise ConfigError(
                f"{origin}: unknown key {key!r}; allowed keys: {', '.join(sorted(keys))}"
            )
        values[name] = value
    try:
        return checked(values)
    except OptionError as e:
        raise ConfigError(f"{origin}: {e}") from e
