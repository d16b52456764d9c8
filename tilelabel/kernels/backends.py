"""Backends by name: ``cpu`` or ``cuda`` (:func:`get_backend`), ``auto`` resolved where this
process runs (:func:`resolve_backend`). What a backend is: :mod:`.base`."""

from __future__ import annotations

import functools
import importlib

from tilelabel.kernels.base import Backend, Decoder, Encoder

__all__ = [
    "Backend",
    "BackendUnavailable",
    "Decoder",
    "Encoder",
    "cuda_available",
    "get_backend",
    "resolve_backend",
]


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here (for example ``cuda`` without a usable GPU)."""


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU it can run on."""
    try:
        cupy = importlib.import_module("cupy")
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@functools.cache
def get_backend(name: str) -> Backend:
    """The backend object for ``cpu`` or ``cuda`` (``auto`` is resolved by the caller)."""
    if name == "cpu":
        from tilelabel.kernels.cpu.backend import CPUBackend

        return CPUBackend()
    if name == "cuda":
        if not cuda_available():
            raise BackendUnavailable(
                "backend 'cuda' was requested but no usable GPU was found "
                "(CuPy is not installed or sees no CUDA device)"
            )
        from tilelabel.kernels.cuda.backend import CUDABackend

        return CUDABackend()
    raise ValueError(f"unknown backend {name!r}; use 'auto', 'cpu' or 'cuda'")


def resolve_backend(name: str) -> str:
    """``auto`` means ``cuda`` when a GPU is usable here, else ``cpu``."""
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"unknown backend {name!r}; use 'auto', 'cpu' or 'cuda'")
    return name
