"""The continuous CUDA kernel (cc3d's ``delta``) against cc3d and the CPU's kernel, exactly,
through the backend, the in-memory API, dask in chunks and the pipeline on a LocalCUDACluster
(on a GPU; skipped where CuPy sees none)."""

from __future__ import annotations

import importlib.util

import cc3d
import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import tilelabel
from tests.conftest import write_zarr
from tests.pipeline.test_delta import brute_force, volume
from tilelabel.kernels.backends import cuda_available, get_backend

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
]

#: value dtypes per connectivity (each dtype and connectivity is a compilation)
DTYPES = {
    4: [np.float32],
    8: [np.int16],
    6: [np.bool_, np.uint8, np.float64],
    18: [np.int32],
    26: [np.uint16, np.int64, np.float32, np.float64],
}


@pytest.mark.parametrize("conn", DTYPES)
def test_backend_equals_the_cpu_and_cc3d(conn):
    import cupy as cp

    nd = 2 if conn in (4, 8) else 3
    shape = (61, 57) if nd == 2 else (23, 19, 37)
    cpu, gpu = get_backend("cpu"), get_backend("cuda")
    for dtype in DTYPES[conn]:
        for seed, delta in ((1, 0), (2, 1.5), (3, 4)):
            img = volume(shape, dtype, seed)
            if dtype != np.bool_ and np.dtype(dtype).kind == "f":
                img[img > 9.5] = np.nan
            want, n = cpu.label_delta(img, conn, np.uint32, delta)
            got, m = gpu.label_delta(cp.asarray(img), conn, np.uint32, delta)
            assert isinstance(got, cp.ndarray) and m == n
            np.testing.assert_array_equal(got.get(), want)
            if conn != 8 or delta == 0:  # cc3d strays from its rule in 2D at 8
                np.testing.assert_array_equal(
                    want, cc3d.connected_components(img, connectivity=conn, delta=delta)
                )


def test_every_pair_joins_at_the_dtype_s_top_and_float16():
    import cupy as cp

    gpu = get_backend("cuda")
    img = volume((9, 10, 11), np.uint8, 5)
    got, n = gpu.label_delta(cp.asarray(img), 26, np.uint32, 255)
    want, m = tilelabel.label(img != 0, 26)
    assert n == m
    np.testing.assert_array_equal(got.get(), want)
    half = volume((9, 10, 11), np.float16, 6)
    got, n = gpu.label_delta(cp.asarray(half), 6, np.uint32, 0)
    want, m = get_backend("cpu").label_delta(half, 6, np.uint32, 0)
    assert n == m
    np.testing.assert_array_equal(got.get(), want)
    with pytest.raises(TypeError, match="float16"):
        gpu.label_delta(cp.asarray(half), 6, np.uint32, 1)


def test_cupy_in_cupy_out_and_dask_on_the_gpu_with_wrap():
    import cupy as cp

    img = volume((7, 9, 8), np.float32, 7)
    for wrap in ((), (0, 1, 2)):
        ref, rn = brute_force(img, 26, 1.5, wrap)
        labels, n = tilelabel.label(cp.asarray(img), 26, delta=1.5, wrap_axes=wrap)
        assert isinstance(labels, cp.ndarray) and n == rn
        np.testing.assert_array_equal(labels.get(), ref)
        x = da.from_array(img, chunks=(4, 5, 3))
        lazy, count = tilelabel.label(x, 26, delta=1.5, wrap_axes=wrap, backend="cuda")
        with dask.config.set(scheduler="threads"):
            lazy, count = dask.compute(lazy, count)
        assert int(count) == rn
        np.testing.assert_array_equal(lazy, ref)


@pytest.mark.skipif(importlib.util.find_spec("dask_cuda") is None, reason="needs dask-cuda")
def test_pipeline_on_a_local_cuda_cluster(tmp_path):
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    img = volume((70, 64, 90), np.float32, 9, background=0.4)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 30))
    ref, rn = cc3d.connected_components(img, connectivity=6, delta=2, return_N=True)
    with LocalCUDACluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cl:
        with Client(cl, set_as_default=False) as client:
            n, table = tilelabel.label_zarr(
                src,
                str(tmp_path / "out.zarr"),
                chunks=(32, 32, 30),
                connectivity=6,
                delta=2,
                backend="cuda",
                stats=True,
                client=client,
            )
    assert n == rn and "value" not in table.columns
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)
    assert list(table["num_pixels"]) == list(np.bincount(ref.ravel())[1:])
