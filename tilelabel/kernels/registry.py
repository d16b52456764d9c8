"""The kernel registry: the one place that picks a kernel by backend, ndim, connectivity, algorithm.

A *kernel* is a function ``kernel(image, dtype) -> (labels, n)``:

- ``image`` is a C-contiguous uint8 array of 0/1 (numpy for ``cpu``, CuPy for ``cuda``),
- ``dtype`` is ``numpy.uint32`` or ``numpy.uint64``, the label type,
- a *multi-label* kernel takes instead a C-contiguous array of unsigned values (0 background;
  each other value its own class, cc3d's ``connected_components``),
- ``labels`` is an array of that dtype and the image's shape, on the same device, numbered
  exactly as ``scipy.ndimage.label`` numbers them (1..n in raster order of each component's
  first voxel, 0 for background), and ``n`` a Python int.

Kernel modules register themselves with :func:`register`; nothing else in the package branches on
backend, ndim, connectivity or algorithm.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Kernel = Callable[[Any, np.dtype], tuple[Any, int]]

#: Modules that register the kernels of each backend; imported on first use so that the CPU path
#: never imports CuPy and the CUDA path compiles nothing until asked.
_MODULES = {
    "cpu": ("tilelabel.kernels.cpu.algorithms",),
    "cuda": (
        "tilelabel.kernels.cuda.ccl",
        "tilelabel.kernels.cuda.equivalence",
        "tilelabel.kernels.cuda.ha4",
    ),
}

#: Default algorithm per (backend, ndim, connectivity): block-based where blocks serve the
#: connectivity (full connectivity); otherwise run-based union find (seg) on both backends, the
#: fastest at face connectivity in the kernel benchmarks (benchmarks/kernels_cpu.py and
#: kernels_gpu.py: ahead of the pixel union find and of pixel Komura equivalence, ke).
DEFAULTS: dict[tuple[str, int, int], str] = {
    ("cpu", 2, 4): "seg",
    ("cpu", 2, 8): "buf",
    ("cpu", 3, 6): "seg",
    ("cpu", 3, 18): "seg",
    ("cpu", 3, 26): "buf",
    ("cuda", 2, 4): "seg",
    ("cuda", 2, 8): "bke_tile",
    ("cuda", 3, 6): "seg",
    ("cuda", 3, 18): "seg",
    ("cuda", 3, 26): "bke_tile",
}

#: Default multi-label algorithm per backend: run-based union find on the CPU, pixel Komura
#: equivalence on CUDA, every connectivity.
MULTILABEL_DEFAULTS: dict[str, str] = {"cpu": "seg", "cuda": "ke"}


@dataclass(frozen=True)
class KernelKey:
    backend: str
    ndim: int
    connectivity: int
    algorithm: str
    multilabel: bool = False


_KERNELS: dict[KernelKey, Kernel] = {}


def register(
    backend: str, ndim: int, connectivity: int, algorithm: str, multilabel: bool = False
) -> Callable[[Kernel], Kernel]:
    """Decorator used by kernel modules to add a kernel to the registry."""

    def deco(fn: Kernel) -> Kernel:
        _KERNELS[KernelKey(backend, ndim, connectivity, algorithm, multilabel)] = fn
        return fn

    return deco


def _load(backend: str) -> None:
    if backend not in _MODULES:
        raise ValueError(f"unknown backend {backend!r}; use one of {sorted(_MODULES)}")
    for module in _MODULES[backend]:
        importlib.import_module(module)


def algorithms(backend: str, ndim: int, connectivity: int, multilabel: bool = False) -> list[str]:
    """Every registered algorithm for this backend, ndim and connectivity (multi-label ones
    with ``multilabel``)."""
    _load(backend)
    return sorted(
        k.algorithm
        for k in _KERNELS
        if (k.backend, k.ndim, k.connectivity, k.multilabel)
        == (backend, ndim, connectivity, multilabel)
    )


def get_kernel(
    backend: str,
    ndim: int,
    connectivity: int,
    algorithm: str | None = None,
    multilabel: bool = False,
) -> Kernel:
    """The kernel for these parameters; ``algorithm=None`` picks the default."""
    _load(backend)
    if algorithm is None:
        algorithm = (
            MULTILABEL_DEFAULTS[backend] if multilabel else DEFAULTS[(backend, ndim, connectivity)]
        )
    key = KernelKey(backend, ndim, connectivity, algorithm, multilabel)
    if key not in _KERNELS:
        have = algorithms(backend, ndim, connectivity, multilabel)
        kind = "multi-label " if multilabel else ""
        raise ValueError(
            f"no {backend} {kind}kernel {algorithm!r} for {ndim}D {connectivity}-connectivity; "
            f"available: {have}"
        )
    return _KERNELS[key]
