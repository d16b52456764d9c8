"""Checks shared by every entry point: one message per mistake.

:func:`check_input` refuses arrays that cannot be labeled, :func:`check_no_nan` values that
cannot be (once they are read, per chunk or whole). The value checks below normalise an
option's value or raise a ``ValueError`` whose message says what is expected; the option table
(:mod:`tilelabel.options`) and the ``cluster:`` kinds (:mod:`tilelabel.cluster.kinds`) use them,
so a value is checked the same way from the command line, a run config and Python.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from tilelabel.connectivity import check_ndim

Check = Callable[[Any], Any]


def check_input(shape: tuple[int, ...], dtype: np.dtype, what: str = "input") -> None:
    """Reject what cannot be labeled before any work starts (NaN is checked per chunk later)."""
    check_ndim(len(shape))
    if any(int(s) == 0 for s in shape):
        raise ValueError(f"{what} has a zero-size axis (shape {tuple(shape)}); nothing to label")
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise ValueError(
            f"{what} has dtype {dtype}, which is not numeric; tilelabel takes bool, integer or "
            "float arrays (nonzero is foreground)"
        )


def check_no_nan(
    values: Any, offset: tuple[int, ...] | None = None, where: str | None = None
) -> None:
    """Refuse NaN in a float block of numpy or CuPy ``values``, naming the first voxel that holds
    one: NaN is neither foreground nor background. ``offset``: the block's first voxel in the
    volume; ``where``: how the message names the block."""
    if values.dtype.kind != "f":
        return
    nan = values != values
    if not bool(nan.any()):
        return
    first = np.unravel_index(int(nan.reshape(-1).argmax()), values.shape)
    voxel = tuple(int(i) + o for i, o in zip(first, offset or (0,) * values.ndim, strict=True))
    place = f" (in {where})" if where else ""
    raise ValueError(
        f"input contains NaN at voxel {voxel}{place}; NaN is neither foreground nor background"
    )


def _integer(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def at_least(low: int, what: str) -> Check:
    """An integer >= ``low`` (numpy integers too), as a Python int."""

    def check(value: Any) -> int:
        if not _integer(value) or value < low:
            raise ValueError(what)
        return int(value)

    return check


positive_int = at_least(1, "a positive integer")
index = at_least(0, "an integer >= 0")
voxels = at_least(0, "a number of voxels (an integer >= 0)")


def positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError("a positive number")
    return value


def non_negative_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError("a number >= 0")
    if not float(value) >= 0:  # NaN too
        raise ValueError("a number >= 0")
    return float(value)


def boolean(value: Any) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ValueError("true or false")
    return bool(value)


def text(what: str) -> Check:
    """A string (a path-like is taken as its string)."""

    def check(value: Any) -> str:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str):
            raise ValueError(what)
        return value

    return check


def choice(*options: str) -> Check:
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError(f"one of {', '.join(options)}")
        return value

    return check


def sizes(value: Any) -> tuple[int, ...]:
    """Positive integers, one per axis: a list, a tuple or ``"64,64,64"``."""
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    what = "a list of positive integers, e.g. [256, 256, 256]"
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(what)
    if not all((_integer(v) and v > 0) or (isinstance(v, str) and v.isdigit()) for v in value):
        raise ValueError(what)
    if any(int(v) <= 0 for v in value):
        raise ValueError(what)
    return tuple(int(v) for v in value)


def spacing(value: Any) -> tuple[float, ...]:
    """Positive finite numbers, one per axis: a list, a tuple or ``"2,0.5,0.5"``."""
    import math

    what = "positive numbers, one per axis, e.g. [2.0, 0.5, 0.5]"
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    if not isinstance(value, list | tuple) or not value or any(isinstance(v, bool) for v in value):
        raise ValueError(what)
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(what) from None
    if not all(math.isfinite(v) and v > 0 for v in out):
        raise ValueError(what)
    return out


def byte_count(value: Any) -> int:
    """A number of bytes: an integer >= 0 or a size such as ``512MB`` or ``4 GiB``."""
    what = "a number of bytes (an integer >= 0, or a size such as 512MB or 4GiB)"
    if isinstance(value, str):
        from dask.utils import parse_bytes

        try:
            value = parse_bytes(value)
        except (ValueError, TypeError):
            raise ValueError(what) from None
    if not _integer(value) or value < 0:
        raise ValueError(what)
    return int(value)


def mapping(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ValueError("a mapping of option: value")
    return dict(value)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("a list of strings")
    return list(value)
