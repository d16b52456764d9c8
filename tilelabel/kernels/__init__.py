"""Per-chunk labeling kernels: numba on the CPU (:mod:`.cpu`), CUDA C through CuPy on GPUs
(:mod:`.cuda`), each device's Python beside its sources.

A backend (:mod:`.base`, by name :func:`get_backend`) is what the pipeline asks of a device; the
registry (:mod:`.registry`) picks a kernel by backend, ndim, connectivity and algorithm. Kernels
know nothing of dask or zarr.
"""

from tilelabel.kernels.backends import (
    Backend,
    BackendUnavailable,
    Decoder,
    Encoder,
    cuda_available,
    get_backend,
    resolve_backend,
)
from tilelabel.kernels.registry import algorithms, get_kernel

__all__ = [
    "Backend",
    "BackendUnavailable",
    "Decoder",
    "Encoder",
    "algorithms",
    "cuda_available",
    "get_backend",
    "get_kernel",
    "resolve_backend",
]
