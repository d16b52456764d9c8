"""The shipped kernel binaries are what the sources build, and a run loads them: a fresh GPU
node compiles nothing (``scripts/build_kernels.py`` rebuilds them)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilelabel.kernels.backends import cuda_available
from tilelabel.kernels.cuda import compile as cuda_compile
from tilelabel.kernels.cuda.shipped import instantiations

REBUILD = (
    "the CUDA sources changed since their binaries were built: python scripts/build_kernels.py"
)


def test_every_family_ships_what_its_source_builds():
    manifest = cuda_compile.manifest()["families"]
    families = {p.stem for p in cuda_compile.CUDA_DIR.glob("*.cu")}
    assert set(instantiations()) == families == set(manifest)
    for family, names in instantiations().items():
        entry = manifest[family]
        assert entry["digest"] == cuda_compile.digest(family), f"{family}: {REBUILD}"
        assert set(entry["kernels"]) == set(names), f"{family}'s kernels: {REBUILD}"
        data = (cuda_compile.BIN_DIR / f"{family}.fatbin").read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], f"{family}.fatbin: {REBUILD}"
        assert cuda_compile.shipped_symbols(family, names) is not None


def test_a_binary_is_not_used_for_another_source_or_a_kernel_it_lacks(monkeypatch):
    names = instantiations()["renumber"]
    assert cuda_compile.shipped_symbols("renumber", names + ("scan_tiles<float>",)) is None
    monkeypatch.setattr(cuda_compile, "OPTIONS", (*cuda_compile.OPTIONS, "-DEDITED"))
    cuda_compile.digest.cache_clear()
    try:
        assert cuda_compile.shipped_symbols("renumber", names) is None
    finally:
        monkeypatch.undo()
        cuda_compile.digest.cache_clear()


def test_the_digest_covers_the_headers(tmp_path, monkeypatch):
    """An edited header (pasted into the family's source) changes the family's digest."""
    for p in cuda_compile.CUDA_DIR.glob("*.cu*"):
        (tmp_path / p.name).write_text(p.read_text())
    before = cuda_compile.digest("block")
    (tmp_path / "common.cuh").write_text((tmp_path / "common.cuh").read_text() + "\n// edit\n")
    monkeypatch.setattr(cuda_compile, "CUDA_DIR", tmp_path)
    cuda_compile.source.cache_clear()
    cuda_compile.digest.cache_clear()
    try:
        assert cuda_compile.digest("block") != before
    finally:
        monkeypatch.undo()
        cuda_compile.source.cache_clear()
        cuda_compile.digest.cache_clear()


_VARIANTS = {
    "default": [],
    "c6": ["-c", "6"],
    "c18": ["-c", "18"],
    "stats": ["--stats", "{tmp}/st.parquet"],
    "multilabel": ["--multilabel"],
    "2d": ["-c", "4"],
}


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy")
@pytest.mark.parametrize("variant", list(_VARIANTS))
def test_a_fresh_process_compiles_nothing(tmp_path, variant):
    """A run with an empty CuPy cache leaves it empty: every kernel came from the binaries."""
    from tilelabel.synth import write_random_zarr

    shape = (96, 80) if variant == "2d" else (40, 48, 72)
    src, dst = str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr")
    write_random_zarr(src, shape, tuple(s // 2 for s in shape), 0.3, 1, 2)
    if variant == "multilabel":
        import zarr

        arr = zarr.open_array(src, mode="r+")
        arr[...] = (arr[...] * np.arange(1, shape[-1] + 1, dtype=np.uint8) % 3).astype(arr.dtype)
    cache = tmp_path / "cupy"
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache), "CUPY_CACHE_SAVE_CUDA_SOURCE": "1"}
    flags = [f.format(tmp=tmp_path) for f in _VARIANTS[variant]]
    cmd = [sys.executable, "-m", "tilelabel.cli", "label", src, dst, "-q", "--backend", "cuda"]
    done = subprocess.run([*cmd, *flags], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    compiled = (
        sorted(p.name for p in Path(cache).rglob("*") if p.is_file()) if cache.exists() else []
    )
    kernels = (
        [
            line.strip()
            for p in Path(cache).rglob("*.cu")
            for line in p.read_text().splitlines()
            if "__global__" in line
        ]
        if cache.exists()
        else []
    )
    assert not compiled, f"compiled in a fresh process: {kernels or compiled}"
