"""Run configs: YAML files that describe a whole run, checked on load.

Every key is an option of :class:`tilelabel.options.Options` (dashes or underscores), checked as
the API and the command line check it; command-line flags override the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tilelabel.options import OptionError, checked, specs


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
    return validate(raw, str(path))


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
