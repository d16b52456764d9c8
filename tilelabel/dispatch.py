"""Which kind of array a caller handed over: numpy, CuPy or dask, decided in this one place.

The in-memory faces (:mod:`tilelabel.api`, :mod:`tilelabel.ndimage`, :mod:`tilelabel.measure`)
ask it what they were given (:func:`kind`), take arrays to the host and back (:func:`to_host`,
:func:`like`) and work on an array's own device (:func:`module`). Besides
:mod:`tilelabel.kernels`, it is the one module that imports CuPy, and only for a CuPy array.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Literal

import numpy as np

Kind = Literal["numpy", "cupy", "dask"]


def kind(x: Any) -> Kind:
    """``dask`` for a dask array, ``cupy`` for a CuPy array, else ``numpy`` (anything
    ``numpy.asarray`` takes). Decided by the array's type, without importing either library."""
    module = type(x).__module__
    if module.startswith("dask.array"):
        return "dask"
    if module.startswith("cupy"):
        return "cupy"
    return "numpy"


def is_dask(x: Any) -> bool:
    return kind(x) == "dask"


def is_cupy(x: Any) -> bool:
    return kind(x) == "cupy"


def module(x: Any) -> ModuleType:
    """The array module of ``x``'s device: CuPy for a CuPy array, else NumPy."""
    if is_cupy(x):
        import cupy

        return cupy
    return np


def to_host(x: Any) -> np.ndarray:
    """``x`` as a numpy array (a CuPy array copied to the host)."""
    if is_cupy(x):
        return x.get()
    return np.asarray(x)


def like(host: np.ndarray, x: Any) -> Any:
    """``host`` as an array of ``x``'s kind: on the GPU where ``x`` is a CuPy array."""
    return module(x).asarray(host)


def array(x: Any, caller: str) -> Any:
    """``x`` as an array its caller can label: lists and tuples become numpy arrays; anything
    without a shape and a dtype is refused, naming the ``caller``."""
    if isinstance(x, list | tuple):
        x = np.asarray(x)
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise TypeError(f"{caller}() takes a numpy, CuPy or dask array, got {type(x).__name__}")
    return x
