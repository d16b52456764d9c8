"""The CUDA kernels of the sources beside this module: one family source per module, loaded from
the binaries that ship with the package, or compiled on first use, and kept per device (CuPy's
own style).

A family's shipped binary (``bin/<family>.fatbin``, built by ``scripts/build_kernels.py``) is used
only while its recorded :func:`digest` matches the source and options here and it holds every
name asked for: a fresh node then compiles nothing. Otherwise, or where the driver cannot load
it, CuPy compiles only the template instantiations asked for, through NVRTC.

A family (``block``, ``tile``, ``pixel``, ``renumber``, ``stats``) is ``<family>.cu`` here;
its ``#include "x.cuh"`` lines are replaced by the headers' text before compiling, so that the
code CuPy compiles, and keys its on-disk cache by, is every line compiled: a fresh process with
that cache loads a module instead of compiling it, and an edited header is never served stale.
CuPy is imported only when a kernel is asked for.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

CUDA_DIR = Path(__file__).parent
#: the shipped binaries and their manifest (``scripts/build_kernels.py``)
BIN_DIR = CUDA_DIR / "bin"
OPTIONS = ("-std=c++17",)

#: C++ spelling of each label type in the templates' name expressions
CTYPE = {np.dtype(np.uint32): "unsigned int", np.dtype(np.uint64): "unsigned long long"}

_INCLUDE = re.compile(r'^#include "([^"]+)"[^\n]*\n', re.MULTILINE)
#: one lock per (family, names): threads wanting the same kernels wait for one compilation,
#: while other kernels (another pass's, a warm-up's) compile beside it
_LOCKS: dict[tuple, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()
_log = logging.getLogger(__name__)


@functools.cache
def source(family: str) -> str:
    """``kernels/cuda/<family>.cu`` with every header it includes pasted in (each one once)."""
    seen: set[str] = set()

    def expand(text: str) -> str:
        def paste(m: re.Match) -> str:
            name = m.group(1)
            if name in seen:
                return ""
            seen.add(name)
            return expand((CUDA_DIR / name).read_text())

        return _INCLUDE.sub(paste, text)

    return expand((CUDA_DIR / f"{family}.cu").read_text())


def kernels(family: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The kernels ``names`` (name expressions such as ``"blk_final<unsigned int, true>"``) of a
    family on the current device, as CuPy kernels by name expression.

    Compiled on first use, then kept for the process per device and per set of names: a labeling
    compiles only what it launches. The threads of a worker that start at once wait for one
    compilation instead of each running their own.
    """
    key = tuple(sorted(set(names)))
    with _LOCKS_LOCK:
        lock = _LOCKS.setdefault((family, key), threading.Lock())
    with lock:
        return _load()(family, key)


@functools.cache
def digest(family: str) -> str:
    """sha256 of what compiling a family takes: its options and its source, headers pasted in."""
    text = "\0".join((*OPTIONS, source(family)))
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def manifest() -> dict:
    """``bin/manifest.json``: each shipped family's digest and its kernels' symbols."""
    path = BIN_DIR / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {"families": {}}


def shipped_symbols(family: str, names: tuple[str, ...]) -> dict[str, str] | None:
    """The symbols of ``names`` in the family's shipped binary; None where it was built from
    another source or lacks one of them."""
    entry = manifest()["families"].get(family)
    if entry is None or entry["digest"] != digest(family):
        return None
    symbols = entry["kernels"]
    return {n: symbols[n] for n in names} if all(n in symbols for n in names) else None


@functools.cache
def _load():
    import cupy as cp

    @cp.memoize(for_each_device=True)
    def shipped_module(family: str):
        try:
            module = cp.RawModule(path=str(BIN_DIR / f"{family}.fatbin"))
            module.get_function(next(iter(manifest()["families"][family]["kernels"].values())))
        except cp.cuda.driver.CUDADriverError as e:  # no image for this GPU, or an older driver
            _log.debug("compiling %s: its shipped binary does not load (%s)", family, e)
            return None
        return module

    @cp.memoize(for_each_device=True)
    def load(family: str, names: tuple[str, ...]) -> dict[str, Any]:
        symbols = shipped_symbols(family, names)
        module = None if symbols is None else shipped_module(family)
        if module is not None:
            return {name: module.get_function(symbols[name]) for name in names}
        module = cp.RawModule(code=source(family), options=OPTIONS, name_expressions=names)
        return {name: module.get_function(name) for name in names}

    return load
