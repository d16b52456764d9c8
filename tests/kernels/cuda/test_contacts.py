"""The GPU's contacts (``contacts.cu``) against the CPU's kernel, exactly: random label images
of both label types in 2D and 3D at every connectivity, tiles that overflow a block's table, a
table that has to grow, labels too wide to pack, and the region graph of a run on a
LocalCUDACluster (on a GPU; skipped where CuPy sees none)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr

import tilelabel
from tests.conftest import write_zarr
from tilelabel.kernels.backends import cuda_available, get_backend
from tilelabel.kernels.cpu.contacts import contact_classes
from tilelabel.pipeline.lazy import contacts_dask
from tilelabel.pipeline.local import Labeler

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
]


def _same(labels: np.ndarray, conn: int, n=None) -> None:
    import cupy as cp

    want = contact_classes(labels, conn)
    got = get_backend("cuda").contacts(cp.asarray(labels), conn, n)
    order = np.lexsort((got[0][:, 1], got[0][:, 0]))  # the GPU's come in no order
    np.testing.assert_array_equal(got[0][order], want[0])
    np.testing.assert_array_equal(got[1][order], want[1])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize(("shape", "conn"), [((33, 45), 4), ((33, 45), 8), ((17, 30, 41), 6),
                                             ((17, 30, 41), 18), ((17, 30, 41), 26)])  # fmt: skip
def test_random_labels_equal_the_cpus(shape, conn, dtype):
    rng = np.random.default_rng(conn)
    _same(rng.integers(0, 40, shape).astype(dtype), conn)
    # blobs: runs of one pair along the rows
    blobs = np.repeat(rng.integers(0, 6, (*shape[:-1], shape[-1] // 8 + 1)), 8, axis=-1)
    _same(blobs[..., : shape[-1]].astype(dtype), conn)


def test_a_table_too_small_grows():
    labels = np.random.default_rng(1).integers(0, 5000, (40, 40, 40)).astype(np.uint32)
    _same(labels, 26, n=1)


@pytest.mark.parametrize(("shape", "conn"), [((8, 16, 300), 26), ((70, 300), 8)])
def test_tiles_of_more_pairs_than_a_blocks_table_holds(shape, conn):
    # every voxel its own label: each tile has far more pairs than the shared table's slots
    size = int(np.prod(shape))
    labels = np.random.default_rng(3).permutation(size).reshape(shape).astype(np.uint32) + 1
    _same(labels, conn)


def test_labels_of_32_bits_are_counted_on_the_host():
    labels = np.random.default_rng(2).integers(0, 4, (9, 8, 7)).astype(np.uint64)
    labels[labels == 3] = 1 << 40
    _same(labels, 18)


def test_an_empty_image():
    _same(np.zeros((4, 5, 6), np.uint32), 26)


@pytest.mark.parametrize("conn", [6, 26])
def test_the_region_graph_of_dask_chunks_equals_the_cpus(conn):
    x = np.random.default_rng(conn).integers(0, 5, (40, 36, 44)).astype(np.uint16)
    arr = da.from_array(x, chunks=(16, 20, 11))
    frames = [
        contacts_dask(arr, labeler=Labeler(b, conn, multilabel=True), connectivity=26)
        for b in ("cpu", "cuda")
    ]
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_a_run_on_a_local_cuda_cluster(tmp_path):
    x = np.random.default_rng(5).random((64, 60, 56)) < 0.3
    src = write_zarr(tmp_path / "in.zarr", x, (32, 32, 32))
    graphs = []
    for backend in ("cpu", "cuda"):
        graph = tmp_path / f"{backend}.parquet"
        tilelabel.label_zarr(
            src, str(tmp_path / f"{backend}.zarr"), backend=backend, connectivity=6,
            contacts=str(graph), workers=1 if backend == "cuda" else None,
        )  # fmt: skip
        graphs.append(pd.read_parquet(graph).sort_values(["label_a", "label_b"], ignore_index=True))
    pd.testing.assert_frame_equal(graphs[0], graphs[1])
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "cpu.zarr"))[:],
        zarr.open_array(str(tmp_path / "cuda.zarr"))[:],
    )
