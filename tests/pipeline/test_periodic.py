"""Periodic boundaries through the pipeline: dask arrays in any chunking, zarr runs on the real
LocalCluster, the command line and config, against the independent oracle
(:func:`tests.cases.periodic_label`); on a GPU, CUDA equals CPU."""

from __future__ import annotations

import importlib.util

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilelabel
from tests.cases import diagonal, periodic_label
from tests.conftest import write_zarr
from tilelabel.chunking import ChunkPlan, forward_steps
from tilelabel.cli import main
from tilelabel.config import validate
from tilelabel.connectivity import CONNECTIVITIES, structure
from tilelabel.synth import random_volume


def check(img, chunks, conn, wrap, backend="cpu"):
    want, n = periodic_label(img, structure(img.ndim, conn), wrap)
    labels, count = tilelabel.label(
        da.from_array(img, chunks=chunks), conn, wrap_axes=wrap, backend=backend
    )
    with dask.config.set(scheduler="sync"):
        got, count = dask.compute(labels, count)
    assert int(count) == n
    np.testing.assert_array_equal(got, want)


@st.composite
def volumes(draw):
    ndim = draw(st.sampled_from([2, 3]))
    shape = tuple(draw(st.integers(1, 11 if ndim == 3 else 24)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, s)) for s in shape)
    density = draw(st.sampled_from([0.05, 0.2, 0.35, 0.5, 0.8]))
    img = random_volume(shape, density, draw(st.integers(1, 3)), draw(st.integers(0, 2**31)))
    conn = draw(st.sampled_from(CONNECTIVITIES[ndim]))
    wrap = tuple(sorted(draw(st.sets(st.integers(0, ndim - 1), min_size=1))))
    return img, chunks, conn, wrap


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volumes())
def test_any_chunking_equals_the_oracle(case):
    check(*case)


@pytest.mark.parametrize("ndim", [2, 3])
def test_grids_of_one_and_two_chunks_and_tiny_chunks(ndim):
    # one chunk along a wrapped axis meets itself; two meet twice (inside and across the wrap)
    img = random_volume((6,) * ndim, 0.45, 1, seed=ndim)
    every = tuple(range(ndim))
    for conn in CONNECTIVITIES[ndim]:
        for chunks in (6, 3, 2, 1 if ndim == 2 else (2, 3, 1), (6, 1, 3)[:ndim]):
            check(img, chunks, conn, every)
            check(img, chunks, conn, (ndim - 1,))


@pytest.mark.parametrize("ndim", [2, 3])
def test_a_diagonal_closes_through_the_box_corner(ndim):
    # the diagonal's ends are the box's opposite corners: one ring under full connectivity
    img = diagonal((9,) * ndim)
    for chunks in (2, 3, 4, 9):
        check(img, chunks, CONNECTIVITIES[ndim][-1], tuple(range(ndim)))
        check(img, chunks, CONNECTIVITIES[ndim][0], tuple(range(ndim)))


def test_plan_pairs_the_chunks_at_both_ends_once_per_contact():
    plan = ChunkPlan((6, 9), ((3, 3), (3, 3, 3)), wrap=(1,))
    assert plan.chunk((0, 0)).open_faces == ((False, True), (True, True))
    assert plan.neighbour((0, 2), (0, 1)) == (0, 0)
    assert plan.neighbour((1, 0), (1, 0)) is None  # axis 0 does not wrap
    # every contact of the periodic tiling is visited once: through a forward step
    contacts = {
        (idx, step)
        for idx in plan.indices()
        for step in forward_steps(2)
        if plan.neighbour(idx, step)
    }
    assert len(contacts) == 6 * 4 - 3 * 3  # 4 steps per chunk, minus those leaving axis 0


@pytest.mark.parametrize("wrap", [(0, 1, 2), (1,)])
def test_zarr_run_on_a_cluster_with_statistics(tmp_path, client, wrap):
    from skimage.measure import regionprops_table

    img = random_volume((24, 20, 18), 0.3, 2, seed=sum(wrap))
    src = write_zarr(tmp_path / "in.zarr", img, (4, 5, 6))
    dst = str(tmp_path / "out.zarr")
    want, n = periodic_label(img, structure(3, 6), wrap)
    count, table = tilelabel.label_zarr(
        src, dst, connectivity=6, wrap_axes=wrap, chunks=(8, 10, 6), stats=True, client=client
    )
    assert count == n
    out = zarr.open_array(dst)
    np.testing.assert_array_equal(out[...], want)
    assert out.attrs["tilelabel"]["wrap_axes"] == list(wrap)
    ref = regionprops_table(want, properties=("label", "num_pixels", "bbox", "centroid"))
    for col, values in ref.items():
        np.testing.assert_allclose(table[col].to_numpy(), values, rtol=1e-12, err_msg=col)
    # the size filter and largest_k rank the wrapped components
    sizes = np.bincount(want.ravel())[1:]
    big = np.argsort(-sizes, kind="stable")[:3] + 1
    kept = tilelabel.label_zarr(
        src, dst, connectivity=6, wrap_axes=wrap, chunks=(8, 10, 6), largest_k=3,
        overwrite=True, client=client,
    )  # fmt: skip
    assert kept == 3
    np.testing.assert_array_equal(zarr.open_array(dst)[...], _ranked(want, big))


def test_regionprops_of_a_dask_array_equal_in_memory():
    img = random_volume((15, 14, 13), 0.3, 2, seed=9)
    x = da.from_array(img, chunks=(4, 7, 5))
    for wrap in ((0,), (1, 2)):
        with dask.config.set(scheduler="sync"):
            lazy = tilelabel.regionprops(x, 18, wrap_axes=wrap, backend="cpu")
        whole = tilelabel.regionprops(img, 18, wrap_axes=wrap, backend="cpu")
        assert list(lazy.columns) == list(whole.columns) and len(lazy) == len(whole)
        for col in ("label", "num_pixels", "bbox-0", "bbox-4", "centroid-1"):
            np.testing.assert_allclose(lazy[col], whole[col], rtol=1e-12, err_msg=col)


def _ranked(labels, kept):
    """``labels`` with only ``kept`` left, numbered 1.. in their (raster) order."""
    kept = np.sort(kept)
    out = np.searchsorted(kept, labels) + 1
    out[~np.isin(labels, kept)] = 0
    return out


def test_resume_needs_the_same_wrap(tmp_path):
    img = random_volume((12, 12), 0.4, 1, seed=2)
    src = write_zarr(tmp_path / "in.zarr", img, (4, 4))
    dst = str(tmp_path / "out.zarr")
    tilelabel.label_zarr(src, dst, wrap_axes=(0,), backend="cpu")
    assert tilelabel.label_zarr(src, dst, wrap_axes="y", resume=True, backend="cpu") > 0
    with pytest.raises(ValueError, match="wrap_axes"):
        tilelabel.label_zarr(src, dst, wrap_axes=(0, 1), resume=True, backend="cpu")
    with pytest.raises(ValueError, match="wrap_axes"):
        tilelabel.label_zarr(src, dst, resume=True, backend="cpu")


def test_command_line_and_config(tmp_path, capsys):
    img = random_volume((10, 12, 14), 0.35, 1, seed=4)
    src = write_zarr(tmp_path / "in.zarr", img, (5, 6, 7))
    dst = str(tmp_path / "out.zarr")
    want, n = periodic_label(img, structure(3, 18), (0, 2))
    assert main(["label", src, dst, "-c", "18", "--wrap", "z,x", "--backend", "cpu", "-q"]) == 0
    np.testing.assert_array_equal(zarr.open_array(dst)[...], want)
    assert f"{n:,} components" in capsys.readouterr().out
    assert validate({"wrap-axes": ["z", 2]}) == {"wrap_axes": ("z", 2)}
    with pytest.raises(SystemExit) as bad:
        main(["label", src, dst, "--wrap", "w", "--overwrite"])
    assert bad.value.code == 2
    assert "--wrap: expected axes as indices or names z, y, x" in capsys.readouterr().err
    assert main(["label", src, dst, "--wrap", "0,z", "--overwrite"]) == 2
    assert "wrap axis 0 is given twice" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="needs CuPy")
def test_cuda_pipeline_equals_cpu(tmp_path):
    from tilelabel.kernels.backends import cuda_available

    if not cuda_available():
        pytest.skip("needs a CUDA GPU usable through CuPy")
    rng = np.random.default_rng(5)
    for ndim in (2, 3):
        shape = (96, 80, 72)[:ndim] if ndim == 3 else (300, 280)
        img = random_volume(shape, 0.35, 1, seed=ndim)
        for conn in CONNECTIVITIES[ndim]:
            wrap = tuple(a for a in range(ndim) if rng.random() < 0.6) or (ndim - 1,)
            chunks = tuple(int(rng.integers(8, s + 1)) for s in shape)
            check(img, chunks, conn, wrap, backend="cuda")
        src = write_zarr(tmp_path / f"in{ndim}.zarr", img, (16,) * ndim)
        cpu = str(tmp_path / f"cpu{ndim}.zarr")
        gpu = str(tmp_path / f"gpu{ndim}.zarr")
        every = tuple(range(ndim))
        a, ta = tilelabel.label_zarr(src, cpu, wrap_axes=every, backend="cpu", stats=True)
        b, tb = tilelabel.label_zarr(src, gpu, wrap_axes=every, backend="cuda", stats=True)
        assert a == b
        np.testing.assert_array_equal(zarr.open_array(cpu)[...], zarr.open_array(gpu)[...])
        np.testing.assert_array_equal(ta["bbox-0"], tb["bbox-0"])
