"""The pipeline with backend "cuda" on a real dask_cuda.LocalCUDACluster (GPU machines only)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tests.cases import check_layout_kept, storage_layouts
from tests.conftest import gpu_memory_left, write_zarr
from tilelabel.connectivity import structure
from tilelabel.kernels.backends import cuda_available
from tilelabel.synth import random_volume

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU usable through CuPy"),
    pytest.mark.skipif(importlib.util.find_spec("dask_cuda") is None, reason="needs dask-cuda"),
]


def gpu_count() -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


@pytest.fixture(scope="module")
def cuda_client():
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    with LocalCUDACluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cl:
        with Client(cl, set_as_default=False) as c:
            yield c


CASES = [
    ((40, 37, 29), (8, 9, 10), (16, 18, 20), 26),
    ((40, 37, 29), (8, 9, 10), (8, 9, 10), 6),
    ((33, 31, 27), (5, 5, 5), (10, 15, 5), 18),
    ((45, 40, 50), (5, 8, 10), None, 26),
    ((130, 97), (16, 16), (32, 48), 8),
    ((130, 97), (16, 16), (16, 96), 4),
    ((300, 260), (64, 64), None, 8),
]


@pytest.mark.parametrize("shape, storage, chunks, conn", CASES)
def test_cuda_pipeline_equals_scipy(tmp_path, cuda_client, shape, storage, chunks, conn):
    for density, granularity in ((0.35, 1), (0.6, 2)):
        img = random_volume(shape, density, granularity, seed=sum(shape) + granularity)
        src = write_zarr(tmp_path / f"in{granularity}.zarr", img, storage)
        dst = str(tmp_path / f"out{granularity}.zarr")
        n = tilelabel.label_zarr(
            src,
            dst,
            connectivity=conn,
            chunks=chunks,
            backend="cuda",
            client=cuda_client,
            keep_input=granularity == 1,  # kept bits relabeled, or the input read again
        )
        ref, rn = ndimage.label(img, structure(len(shape), conn))
        assert n == rn
        np.testing.assert_array_equal(zarr.open_array(dst)[...], ref)


@pytest.mark.parametrize("name, zarr_format, layout", storage_layouts())
def test_input_codecs_and_layouts_on_the_gpu(tmp_path, cuda_client, name, zarr_format, layout):
    """zstd, gzip and LZ4 chunks, in shards or not, are decoded by nvCOMP where it is installed
    (and zstd outputs compressed by it), blosc and uncompressed arrays by zarr on the host; the
    output is written like the input either way."""
    img = random_volume((40, 36, 32), 0.35, 1, seed=len(name))
    src = tmp_path / "in.zarr"
    write_zarr(src, img, zarr_format=zarr_format, **layout)
    dst = str(tmp_path / "out.zarr")
    n = tilelabel.label_zarr(
        str(src), dst, chunks=(16, 16, 16), backend="cuda", client=cuda_client, gpu_encode=True
    )
    ref, rn = ndimage.label(img, np.ones((3, 3, 3)))
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(dst)[...], ref)
    check_layout_kept(str(src), dst)


def test_cpu_and_gpu_outputs_identical(tmp_path, cuda_client, client):
    img = random_volume((64, 48, 40), 0.3, 1, seed=11)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 8))
    for conn in (6, 26):
        a, b = str(tmp_path / f"cpu{conn}.zarr"), str(tmp_path / f"gpu{conn}.zarr")
        tilelabel.label_zarr(
            src, a, connectivity=conn, chunks=(32, 16, 16), backend="cpu", client=client
        )
        tilelabel.label_zarr(
            src, b, connectivity=conn, chunks=(16, 48, 8), backend="cuda", client=cuda_client
        )
        za, zb = zarr.open_array(a), zarr.open_array(b)
        assert za.dtype == zb.dtype and za.chunks == zb.chunks
        np.testing.assert_array_equal(za[...], zb[...])
        ma, mb = dict(za.attrs["tilelabel"]), dict(zb.attrs["tilelabel"])
        assert ma.pop("backend") == "cpu" and mb.pop("backend") == "cuda"
        # each run's own id and processing chunks (what a resumed run takes again)
        assert ma.pop("run") != mb.pop("run")
        assert ma.pop("chunks") == [32, 16, 16] and mb.pop("chunks") == [16, 48, 8]
        # the input's checksum is over those chunks': in the same chunks, the CPU's and the
        # GPU's are one (a run resumed on the other backend finds its input unchanged)
        assert ma.pop("input_checksum") != mb.pop("input_checksum")
        assert ma == mb
    same = str(tmp_path / "gpu-same.zarr")
    tilelabel.label_zarr(src, same, chunks=(32, 16, 16), backend="cuda", client=cuda_client)
    checksum = zarr.open_array(same).attrs["tilelabel"]["input_checksum"]
    assert checksum == zarr.open_array(a).attrs["tilelabel"]["input_checksum"]


AUTO_FROM_A_CLIENT_WITHOUT_GPU = """
import sys
from dask_cuda import LocalCUDACluster
from distributed import Client
import tilelabel
src, dst = sys.argv[1:]
with LocalCUDACluster(CUDA_VISIBLE_DEVICES="0", n_workers=1, dashboard_address=None) as cl:
    with Client(cl) as c:
        n = tilelabel.label_zarr(src, dst, client=c)
print(n)
"""


def test_auto_is_settled_on_the_workers(tmp_path):
    """backend "auto" with a client: the workers' GPUs decide, not the calling process's. The
    caller here sees no GPU; its GPU worker labels."""
    import subprocess
    import sys

    img = random_volume((48, 40, 36), 0.3, 1, seed=12)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 12))
    dst = str(tmp_path / "out.zarr")
    env = {**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-c", AUTO_FROM_A_CLIENT_WITHOUT_GPU, src, dst],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ref, rn = ndimage.label(img, np.ones((3, 3, 3)))
    assert done.stdout.split() == [str(rn)]
    out = zarr.open_array(dst)
    assert out.attrs["tilelabel"]["backend"] == "cuda"
    np.testing.assert_array_equal(out[...], ref)


def test_cupy_arrays_label_on_the_gpu():
    import cupy as cp

    img = random_volume((70, 50, 60), 0.3, 1, seed=3)
    labels, n = tilelabel.label(cp.asarray(img))
    assert isinstance(labels, cp.ndarray)
    ref, rn = ndimage.label(img, np.ones((3, 3, 3)))
    assert n == rn
    np.testing.assert_array_equal(labels.get(), ref)


def test_chunk_too_large_for_the_gpu(tmp_path, cuda_client):
    # nothing is written to this array: zarr serves its chunks as fill values
    big = zarr.create_array(
        str(tmp_path / "big.zarr"), shape=(8192, 8192, 8192), chunks=(512, 512, 512), dtype="u1"
    )
    with pytest.raises(ValueError, match=r"needs about .* GiB of GPU memory .* use --chunks"):
        tilelabel.label_zarr(
            big.store_path.store.root,
            str(tmp_path / "out.zarr"),
            chunks=(8192, 8192, 8192),
            backend="cuda",
            client=cuda_client,
        )
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.skipif(not cuda_available() or gpu_count() < 2, reason="needs two GPUs")
def test_two_gpus(tmp_path):
    from dask_cuda import LocalCUDACluster
    from distributed import Client, get_task_stream

    img = random_volume((96, 80, 72), 0.3, 1, seed=5)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 24))
    with LocalCUDACluster(CUDA_VISIBLE_DEVICES="0,1", dashboard_address=None) as cl:
        with Client(cl, set_as_default=False) as c:
            assert len(c.scheduler_info()["workers"]) == 2
            with get_task_stream(c) as ts:
                n = tilelabel.label_zarr(
                    src, str(tmp_path / "out.zarr"), chunks=(32, 32, 24), backend="cuda", client=c
                )
            assert len({t["worker"] for t in ts.data}) == 2  # both GPUs labeled chunks
    ref, rn = ndimage.label(img, np.ones((3, 3, 3)))
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)


def test_cuda_cluster_refuses_more_gpus_than_visible():
    from tilelabel.cluster.local import cuda_cluster

    with pytest.raises(ValueError, match=f"but only {gpu_count()} GPUs are visible"):
        cuda_cluster(gpu_count() + 1)


def test_default_gpu_cluster_puts_one_worker_on_each_gpu():
    import os

    import cupy
    from distributed import Client

    from tilelabel.cluster.local import cuda_cluster
    from tilelabel.resources.gpu import GPU_MEMORY_PER_WORKER, worker_threads

    gpus = gpu_count()
    cores = max(1, len(os.sched_getaffinity(0)) // gpus)
    free = cupy.cuda.Device(0).mem_info[0]
    threads = worker_threads(cores, free // GPU_MEMORY_PER_WORKER)
    with cuda_cluster(dashboard_address=None) as cl:
        with Client(cl, set_as_default=False) as c:
            workers = c.scheduler_info()["workers"].values()
            assert len(workers) == gpus
            assert {w["nthreads"] for w in workers} == {threads}


def test_default_gpu_cluster_fits_the_free_memory(tmp_path):
    """On a GPU that another process (here this one) mostly holds, the default cluster's worker
    has as many threads as its free memory has room for, and labels."""
    from distributed import Client

    from tilelabel.cluster.local import cuda_cluster
    from tilelabel.cores import usable_cores
    from tilelabel.resources.gpu import GPU_MEMORY_PER_WORKER, worker_threads

    img = random_volume((40, 33, 29), 0.3, 1, seed=13)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 16))
    # two workers' worth, and a half
    with gpu_memory_left(GPU_MEMORY_PER_WORKER * 5 // 2):
        threads = worker_threads(usable_cores(), 2)  # 2 threads
        with cuda_cluster(1, dashboard_address=None) as cl:
            with Client(cl, set_as_default=False) as c:
                workers = c.scheduler_info()["workers"].values()
                assert [w["nthreads"] for w in workers] == [threads]
                tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), backend="cuda", client=c)
    expected, _ = ndimage.label(img, np.ones((3, 3, 3)))
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[:], expected)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_gpu_encoded_output_equals_zarrs(tmp_path, cuda_client, zarr_format):
    """With nvCOMP the GPU compresses the output chunks itself: zarr reads them back as the
    labels zarr's own encoder would have stored (edge chunks included), and as scipy's."""
    import numcodecs

    from tilelabel.kernels.cuda.nvcomp import available
    from tilelabel.storage.arrays import raw_chunks

    if not available():
        pytest.skip("needs nvidia-libnvcomp 6")
    img = random_volume((70, 61, 45), 0.3, 1, seed=21)
    img[:16] = 0  # chunks with no label: not stored
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 16), zarr_format=zarr_format)

    def run(name, gpu_encode):
        dst = str(tmp_path / f"{name}.zarr")
        tilelabel.label_zarr(
            src, dst, chunks=(32, 32, 48), backend="cuda", client=cuda_client, gpu_encode=gpu_encode
        )
        return zarr.open_array(dst), _chunk_files(dst)

    out = {"gpu": run("gpu", True), "host": run("host", False)}
    assert raw_chunks(out["gpu"][0]) is not None
    ref, _ = ndimage.label(img, np.ones((3, 3, 3)))
    for arr, _ in out.values():
        np.testing.assert_array_equal(arr[...], ref)
    gpu, host = out["gpu"][1], out["host"][1]
    assert gpu.keys() == host.keys()  # the same chunks stored, under the same keys
    zstd = numcodecs.Zstd()
    assert all(zstd.decode(gpu[k]) == zstd.decode(host[k]) for k in gpu)
    assert any(gpu[k] != host[k] for k in gpu)  # nvCOMP's frames, not zarr's


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_ome_labels_compressed_on_the_gpu(tmp_path, cuda_client, zarr_format):
    """An OME-Zarr image's label image, with its t/c axes of one position in front, is
    compressed on the GPU like a plain output, and reads back as scipy's labels."""
    import numcodecs

    from tilelabel.kernels.cuda.nvcomp import available
    from tilelabel.storage.ome import DEFAULT_NAME

    if not available():
        pytest.skip("needs nvidia-libnvcomp 6")
    img = random_volume((40, 36, 30), 0.3, 1, seed=17)
    url = str(tmp_path / "img.zarr")
    # written by hand (NGFF 0.4 on zarr v2, 0.5 on v3): ome-zarr-py is an optional extra;
    # zstd, which zarr v2 does not default to; no fill value on v2 (the labels get 0 anyway)
    root = zarr.open_group(url, mode="w", zarr_format=zarr_format)
    level = root.create_array(
        "0",
        shape=(1, 1, *img.shape),
        chunks=(1, 1, 16, 16, 16),
        dtype="u1",
        fill_value=None if zarr_format == 2 else 0,
        compressors=numcodecs.Zstd(level=0) if zarr_format == 2 else "auto",
    )
    level[...] = img[None, None]
    axes = [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"}]
    axes += [{"name": a, "type": "space"} for a in "zyx"]
    scale = [{"type": "scale", "scale": [1.0] * 5}]
    ms = {"axes": axes, "datasets": [{"path": "0", "coordinateTransformations": scale}]}
    if zarr_format == 2:
        root.attrs.update({"multiscales": [{"version": "0.4", **ms}]})
    else:
        root.attrs.update({"ome": {"version": "0.5", "multiscales": [ms]}})

    n = tilelabel.label_zarr(url, None, backend="cuda", client=cuda_client, gpu_encode=True)
    tilelabel.label_zarr(
        url, None, backend="cuda", client=cuda_client, gpu_encode=False, ome_labels="host"
    )
    gpu, host = (_chunk_files(f"{url}/labels/{name}/0") for name in (DEFAULT_NAME, "host"))
    assert gpu.keys() == host.keys() and gpu != host  # nvCOMP's frames, not zarr's
    labels = zarr.open_array(f"{url}/labels/{DEFAULT_NAME}/0")[...]
    want, wn = ndimage.label(img, np.ones((3, 3, 3)))
    assert n == wn and labels.shape == (1, 1, *img.shape)
    np.testing.assert_array_equal(labels[0, 0], want)


def test_default_gpu_encoding_keeps_enough_tiles_per_chunk(tmp_path, caplog):
    """By default the GPU compresses an output of enough storage chunks, in processing chunks
    of at least MIN_BATCH_TILES of them where two per worker thread would hold fewer; a smaller
    output goes to the host in chunks that give every thread two."""
    import logging

    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from tilelabel.chunking import plan_for_run
    from tilelabel.kernels.cuda.nvcomp import available
    from tilelabel.resources.encoding import MIN_BATCH_TILES
    from tilelabel.resources.gpu import TARGET_VOXELS

    if not available():
        pytest.skip("needs nvidia-libnvcomp 6")
    tile, threads = (8, 8, 8), 8
    img = random_volume((64, 64, 64), 0.3, 1, seed=5)  # 512 tiles
    # 64 tiles, one processing chunk's worth: the host's
    cases = (((64, 64, 64), MIN_BATCH_TILES), ((8, 64, 64), 1))
    with LocalCUDACluster(n_workers=1, threads_per_worker=threads, dashboard_address=None) as cl:
        with Client(cl, set_as_default=False) as c:
            for shape, min_tiles in cases:
                part = np.ascontiguousarray(img[: shape[0]])
                src = write_zarr(tmp_path / f"in{shape[0]}.zarr", part, tile)
                dst = str(tmp_path / f"out{shape[0]}.zarr")
                caplog.clear()
                with caplog.at_level(logging.INFO, logger="tilelabel"):
                    tilelabel.label_zarr(src, dst, backend="cuda", client=c)
                (record,) = [r for r in caplog.records if "chunks of up to" in r.msg]
                plan = plan_for_run(shape, tile, None, threads, TARGET_VOXELS, min_tiles)
                assert record.args[2:] == (plan.nchunks, plan.max_block_shape())
                want, _ = ndimage.label(part, np.ones((3, 3, 3)))
                np.testing.assert_array_equal(zarr.open_array(dst)[...], want)
    # two chunks per thread alone would have cut the large output into chunks of fewer tiles
    big = plan_for_run((64,) * 3, tile, None, threads, TARGET_VOXELS, MIN_BATCH_TILES)
    assert plan_for_run((64,) * 3, tile, None, threads, TARGET_VOXELS).nchunks > big.nchunks == 8


@pytest.mark.parametrize("give_up", ["labels", "encoder", "both", "chunks"])
def test_defaults_given_up_on_a_full_gpu(tmp_path, caplog, give_up):
    """Where the GPU's free memory, taken here by this process, leaves room for the chunks but
    not for the kept labels, the encoder or both, or only for chunks smaller than the
    default's, a default run gives those up and still equals scipy; the same options asked for
    by name are refused and nothing is written."""
    import functools
    import logging
    import math

    import cupy as cp
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from tilelabel.chunking import plan_for_run
    from tilelabel.kernels.cuda.nvcomp import available
    from tilelabel.resources.gpu import TARGET_VOXELS
    from tilelabel.resources.gpu_memory import chunk_memory

    if give_up in ("labels", "encoder") and not available():
        pytest.skip("needs nvidia-libnvcomp 6")
    # 512 storage chunks: the GPU compresses by default
    shape, storage = (256, 256, 256), (32, 32, 32)
    img = random_volume(shape, 0.2, 1, seed=9)
    src = write_zarr(tmp_path / "in.zarr", img, storage)
    # one chunk of 256^3 where chunks are named; the default's for one thread, and its next
    # smaller, where they are not (eight chunks or more: no labels kept)
    default = plan_for_run(shape, storage, None, 1, TARGET_VOXELS).max_block_shape()
    half = math.prod(default) // 2
    smaller = plan_for_run(shape, storage, None, 1, half).max_block_shape()
    block = smaller if give_up == "chunks" else shape
    voxels = math.prod(block)
    labels, bits = 4 * voxels, voxels // 8  # one chunk's uint32 labels and packed input
    cp.cuda.runtime.memGetInfo()  # this process's CUDA context, before the free bytes are asked
    with LocalCUDACluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cl:
        with Client(cl, set_as_default=False) as c:

            def room(block, encode=False):
                ((need, device, pool, _),) = c.run(
                    chunk_memory, block, "uint32", 26, tile=storage, encode=encode
                ).values()
                return need, device + pool

            need = room(block)[0]
            extra = room(block, True)[0] - need
            if give_up == "chunks":  # eight chunks of each size: their bits are one chunk's
                larger = room(default)[0] + math.prod(default)
                want = (need + 8 * bits + larger) // 2
            else:
                want = {
                    "labels": need + extra + bits + labels // 2,
                    "encoder": need + bits + labels + (extra - labels) // 2,
                    "both": need + bits + labels // 2,
                }[give_up]
            # free bytes asked last: each call above may load nvCOMP's code onto the device
            free = room(block)[1]
            hog = cp.empty(free - want, dtype=cp.uint8)
            try:
                free = room(block)[1]
                assert abs(free - want) < voxels  # the window the case is meant for
                run = functools.partial(
                    tilelabel.label_zarr,
                    src,
                    str(tmp_path / "out.zarr"),
                    client=c,
                    backend="cuda",
                    # one chunk: without the encoder, the plan would cut it in two for the thread
                    chunks=None if give_up == "chunks" else shape,
                )
                # each run named here keeps what the window has no room for
                named = {
                    "labels": [{"keep_labels": labels, "gpu_encode": True}],
                    "encoder": [{"gpu_encode": True}],
                    "both": [{"keep_labels": labels}, {"gpu_encode": True}],
                    "chunks": [{"chunks": default}],
                }
                for option in named[give_up]:
                    with pytest.raises(ValueError, match="GiB of GPU memory per worker thread"):
                        run(**option)
                    assert not (tmp_path / "out.zarr").exists()
                caplog.clear()
                with caplog.at_level(logging.WARNING, logger="tilelabel"):
                    n = run()
            finally:
                del hog
                cp.get_default_memory_pool().free_all_blocks()
            # zarr's own frames, to tell the chunks the GPU compressed from the host's
            ref = str(tmp_path / "ref.zarr")
            tilelabel.label_zarr(src, ref, client=c, backend="cuda", gpu_encode=False)
            on_host = _chunk_files(str(tmp_path / "out.zarr")) == _chunk_files(ref)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert ("keeps no chunk labels" in said) == (give_up in ("labels", "both"))
    assert ("compresses the output on the host" in said) == (give_up != "labels")
    assert (f"labels in chunks of up to {smaller}" in said) == (give_up == "chunks")
    if give_up != "labels":
        assert on_host
    ref, rn = ndimage.label(img, np.ones((3, 3, 3)))
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)


def _chunk_files(root) -> dict[str, bytes]:
    import os

    return {
        os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
        for d, _, files in os.walk(root)
        for f in files
        if not f.startswith(".") and f != "zarr.json"
    }
