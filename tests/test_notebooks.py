"""The notebooks: stored without outputs; the CPU quickstart is executed (the GPU one where a GPU
and dask-cuda are usable)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("matplotlib")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def execute(name: str, tmp_path: Path):
    """Run a notebook in a fresh kernel, in a scratch folder; figures come back as PNG."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    try:
        client.execute()
    finally:
        monkeypatch.undo()
    return nb


@pytest.mark.parametrize("name", ["quickstart.ipynb", "gpu.ipynb"])
def test_stored_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, name


def test_quickstart_runs(tmp_path):
    nb = execute("quickstart.ipynb", tmp_path)
    text = "".join(
        out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
    )
    assert "identical to scipy.ndimage.label" in text
    assert "dashboard: http" in text
    images = [
        out
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]
    assert len(images) == 2  # the overlaid slices and the size histogram


@pytest.mark.gpu
def test_gpu_notebook_runs(tmp_path):
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available() or importlib.util.find_spec("dask_cuda") is None:
        pytest.skip("needs a usable GPU and dask-cuda")
    nb = execute("gpu.ipynb", tmp_path)
    text = "".join(out.get("text", "") for c in nb.cells for out in c.get("outputs", []))
    assert "identical to scipy.ndimage.label" in text
