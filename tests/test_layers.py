"""The import layers of ``pyproject.toml`` hold, and their check fails on an arrow that runs up
a layer or closes a cycle, deferred imports included (``lint-imports``, as CI runs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def lint(tree: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the project's contracts over the package copied to ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "tilelabel",
        tmp_path / "tilelabel",
        ignore=shutil.ignore_patterns("*.cu*", "__pycache__"),
    )
    return tmp_path


def sneak(tree: Path, module: str, statement: str) -> None:
    """Add ``statement`` to ``module`` inside a function, as deferred imports are written."""
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n\ndef _sneaked():\n    {statement}  # noqa\n")


def test_the_package_keeps_its_layers(tree):
    done = lint(tree)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize(
    ("module", "statement", "says"),
    [
        # the kernels asking the run: up four layers, and dask into the kernels
        ("tilelabel.kernels.cpu.ops", "from tilelabel.workflow import run", "BROKEN"),
        # the policy asking the algorithm: two modules of one layer that stay apart
        ("tilelabel.resources.gpu", "from tilelabel.pipeline import kept", "BROKEN"),
        # a cycle inside one folder
        ("tilelabel.storage.errors", "from tilelabel.storage import arrays", ".errors -> .arrays"),
        # CuPy outside the kernels
        ("tilelabel.pipeline.local", "import cupy", "cupy"),
    ],
)
def test_an_arrow_up_or_round_fails_the_check(tree, module, statement, says):
    sneak(tree, module, statement)
    done = lint(tree)
    assert done.returncode != 0
    assert says in done.stdout
