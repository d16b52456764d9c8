"""The multi-label CUDA kernel against cc3d, exactly, and CPU = GPU, through the kernel, the
in-memory API and the pipeline on a LocalCUDACluster (on a GPU; skipped where CuPy sees none)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilelabel
from tests.conftest import write_zarr
from tests.kernels.cpu.test_multilabel import CONNECTIVITIES, multilabel_volume, oracle
from tilelabel.kernels.backends import cuda_available, get_backend
from tilelabel.synth import voronoi_labels

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
]

#: value widths per connectivity: every width where full and face connectivity differ most, one
#: elsewhere (each width and connectivity is a compilation)
WIDTHS = {
    4: [np.int32],
    8: [np.uint8, np.int64],
    6: [np.bool_, np.int16, np.uint32, np.uint64],
    18: [np.int32],
    26: [np.uint8, np.int16, np.uint32, np.int64],
}


def check(img: np.ndarray, conn: int, dtype=np.uint32) -> None:
    import cupy as cp

    labels, n = get_backend("cuda").label(cp.asarray(img), conn, dtype, multilabel=True)
    ref, rn = oracle(img, conn)
    assert isinstance(labels, cp.ndarray) and labels.dtype == dtype
    assert n == rn, (img.shape, img.dtype, conn)
    np.testing.assert_array_equal(cp.asnumpy(labels), ref)


def test_registered_for_every_connectivity():
    from tilelabel.kernels.registry import algorithms

    for nd, conn in CONNECTIVITIES:
        assert algorithms("cuda", nd, conn, multilabel=True) == ["ke"]


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_volumes_equal_cc3d(nd, conn, data):
    shape = tuple(data.draw(st.integers(1, 40 if nd == 3 else 200)) for _ in range(nd))
    img = multilabel_volume(
        shape,
        data.draw(st.integers(1, 5)),
        data.draw(st.integers(1, 4)),
        data.draw(st.sampled_from(WIDTHS[conn])),
        data.draw(st.integers(0, 999)),
    )
    check(img, conn)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
def test_cpu_equals_gpu_on_a_voronoi_field(nd, conn):
    import cupy as cp

    shape = (96, 100, 110) if nd == 3 else (1000, 900)
    img = voronoi_labels(shape, cell=7, ids=300, seed=conn, dtype=np.uint32)
    check(img, conn, np.uint64)
    gpu, n = tilelabel.label(cp.asarray(img), conn, multilabel=True)
    cpu, m = tilelabel.label(img, conn, multilabel=True, backend="cpu")
    assert isinstance(gpu, cp.ndarray) and n == m
    np.testing.assert_array_equal(cp.asnumpy(gpu), cpu)


@pytest.mark.skipif(importlib.util.find_spec("dask_cuda") is None, reason="needs dask-cuda")
def test_pipeline_on_a_local_cuda_cluster(tmp_path):
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    img = voronoi_labels((70, 64, 90), cell=6, ids=40, seed=9, dtype=np.int64)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 30))
    ref, rn = oracle(img, 26)
    with LocalCUDACluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cl:
        with Client(cl, set_as_default=False) as client:
            n, table = tilelabel.label_zarr(
                src,
                str(tmp_path / "out.zarr"),
                chunks=(32, 32, 30),
                multilabel=True,
                backend="cuda",
                stats=True,
                client=client,
            )
    import zarr

    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)
    first = [img.reshape(-1)[np.flatnonzero(ref.reshape(-1) == i)[0]] for i in (1, 2, rn)]
    assert list(table["value"].iloc[[0, 1, -1]]) == first
