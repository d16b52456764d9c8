"""Per-chunk labeling kernels (numba on CPU, CUDA C through CuPy on GPU).

Kernels know nothing of dask or zarr; see :mod:`tilelabel.kernels.registry` for the contract.
"""

from tilelabel.kernels.backends import (
    Backend,
    BackendUnavailable,
    Encoder,
    get_backend,
    resolve_backend,
)
from tilelabel.kernels.registry import algorithms, get_kernel

__all__ = [
    "Backend",
    "BackendUnavailable",
    "Encoder",
    "algorithms",
    "get_backend",
    "get_kernel",
    "resolve_backend",
]
