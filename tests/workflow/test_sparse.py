"""Cost follows the stored data: chunks never written (fill value 0) are background that no
task reads, labels or writes, so a volume of (2^20)^3 voxels with a few stored chunks labels
as fast as those chunks do, exactly. With a nonzero fill value, a chunk never written is one
constant block, labeled once and never read."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tests.kernels.test_backends import BACKENDS
from tilelabel.connectivity import structure
from tilelabel.storage.arrays import stored_chunks
from tilelabel.synth import random_volume

C = 64  # storage chunk edge (the 256 is the benchmark's; 64 keeps CI quick)


def sparse_volume(path: Path, shape, chunks: dict, dtype=np.uint8, c: int = C) -> str:
    """A zarr array of ``shape`` in chunks of ``c``^3 where only the chunks ``chunks`` (grid
    index -> block) are stored, an all-zero block among them too."""
    arr = zarr.create_array(
        str(path),
        shape=shape,
        chunks=(c,) * 3,
        dtype=dtype,
        fill_value=0,
        config={"write_empty_chunks": True},
    )
    for idx, block in chunks.items():
        arr[tuple(slice(i * c, (i + 1) * c) for i in idx)] = block
    return str(path)


def clusters(seed: int):
    """Two clusters of 2 x 2 x 1 stored chunks, touching within each, far apart: their labels,
    numbered in the raster order of the whole volume, are each cluster's own, the far one's
    after the near one's."""
    near = random_volume((C, 2 * C, 2 * C), 0.3, seed=seed)
    far = random_volume((C, 2 * C, 2 * C), 0.3, seed=seed + 1)
    far[:, 0, :] = 1  # one component across the far cluster's chunks
    return near, far


def blocks(vol, at):
    """The stored chunks of a cluster ``vol`` whose first chunk is grid index ``at``."""
    z, y, x = at
    return {
        (z, y + j, x + i): vol[:, j * C : (j + 1) * C, i * C : (i + 1) * C]
        for j in range(2)
        for i in range(2)
    }


@pytest.mark.parametrize("conn", [6, 26])
def test_a_huge_volume_with_few_stored_chunks_labels_exactly(tmp_path, conn):
    shape = (1 << 20,) * 3
    near, far = clusters(seed=conn)
    grid = (1 << 20) // C
    far_at = (grid - 1, grid - 2, grid // 2)
    src = sparse_volume(
        tmp_path / "in.zarr", shape, {**blocks(near, (0, 0, 0)), **blocks(far, far_at)}
    )
    assert len(stored_chunks(zarr.open_array(src))) == 8
    out = tmp_path / "out.zarr"
    started = time.perf_counter()
    n = tilelabel.label_zarr(src, str(out), connectivity=conn, backend="cpu")
    took = time.perf_counter() - started
    s = structure(3, conn)
    ref_near, n_near = ndimage.label(near, s)
    ref_far, n_far = ndimage.label(far, s)
    ref_far[ref_far > 0] += n_near
    assert n == n_near + n_far
    arr = zarr.open_array(str(out))
    assert arr.shape == shape
    np.testing.assert_array_equal(arr[:C, : 2 * C, : 2 * C], ref_near)
    z, y, x = (a * C for a in far_at)
    np.testing.assert_array_equal(arr[z : z + C, y : y + 2 * C, x : x + 2 * C], ref_far)
    # only the chunks that hold labels are stored
    assert len(stored_chunks(arr)) == 8
    assert took < 120, took  # a grid of 2^42 chunks walked would never end


def test_a_run_visits_only_the_stored_chunks_and_writes_no_empty_one(tmp_path):
    """A small volume, half its chunks stored and one stored chunk all zero: the output equals
    scipy's labels and stores no all-zero chunk."""
    img = random_volume((4 * C, 2 * C, 2 * C), 0.25, seed=5)
    grid = {(z, y, x) for z in range(4) for y in range(2) for x in range(2)}
    kept = {i for i in grid if (i[0] + i[1] + i[2]) % 2 == 0}
    stored = {
        i: img[i[0] * C : (i[0] + 1) * C, i[1] * C : (i[1] + 1) * C, i[2] * C : (i[2] + 1) * C]
        for i in kept
    }
    zero = sorted(kept)[-1]
    stored[zero] = np.zeros((C, C, C), np.uint8)
    full = np.zeros_like(img)
    for (z, y, x), b in stored.items():
        full[z * C : (z + 1) * C, y * C : (y + 1) * C, x * C : (x + 1) * C] = b
    src = sparse_volume(tmp_path / "in.zarr", img.shape, stored)
    out = tmp_path / "out.zarr"
    n = tilelabel.label_zarr(src, str(out), chunks=(C, C, C), backend="cpu")
    ref, n_ref = ndimage.label(full, structure(3, 26))
    assert n == n_ref
    arr = zarr.open_array(str(out))
    np.testing.assert_array_equal(arr[...], ref)
    written = {tuple(map(int, r)) for r in stored_chunks(arr)}
    assert written == kept - {zero}


def test_a_run_of_more_tasks_than_the_cluster_can_hold_is_refused_before_any_work(tmp_path, capsys):
    """Past ``tilelabel.max-tasks`` the command says so in one line, naming chunks that would
    do, and makes nothing; those chunks then run."""
    import dask

    from tilelabel.cli import main

    img = random_volume((4 * C, 2 * C, 2 * C), 0.25, seed=6)
    src = sparse_volume(tmp_path / "in.zarr", img.shape, blocks(img[:C], (0, 0, 0)))
    sparse_volume(tmp_path / "dense.zarr", img.shape, {})
    dense = zarr.open_array(str(tmp_path / "dense.zarr"), mode="r+")
    dense[...] = img
    out = tmp_path / "out.zarr"
    with dask.config.set({"tilelabel.max-tasks": 200}):
        argv = ["label", str(tmp_path / "dense.zarr"), str(out), "--chunks", f"{C},{C},{C}"]
        assert main([*argv, "-q"]) == 2
        err = capsys.readouterr().err
        assert "16 chunks of (64, 64, 64) would make about 640 tasks, more than" in err, err
        assert err.count("\n") == 1 and not out.exists()
        hint = err.split("--chunks ")[1].split()[0]
        assert main([*argv[:-1], hint, "-q"]) == 0
        np.testing.assert_array_equal(
            zarr.open_array(str(out))[...], ndimage.label(img, structure(3, 26))[0]
        )
        # the stored chunks, not the grid, count: 4 of 16 here
        assert tilelabel.label_zarr(src, str(tmp_path / "o2.zarr"), chunks=(C, C, C)) > 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("multilabel", [False, True])
def test_chunks_of_a_nonzero_fill_are_one_block_labeled_once(tmp_path, multilabel, backend):
    """Fill value 3: the chunks not stored are one component with their neighbours' 3s (or
    every nonzero, binary), labeled once per shape and never read; the labels equal scipy's
    (cc3d's) of the whole volume, for any chunking."""
    import cc3d

    from tilelabel.pipeline.local import constant_block

    c = 16
    shape = (4 * c, 3 * c, 5 * c)
    rng = np.random.default_rng(7)
    arr = zarr.create_array(
        str(tmp_path / "in.zarr"), shape=shape, chunks=(c,) * 3, dtype="u1", fill_value=3
    )
    for idx in [(0, 0, 0), (1, 1, 2), (2, 0, 4), (3, 2, 1)]:
        block = rng.choice(np.array([0, 0, 3, 5], np.uint8), size=(c,) * 3)
        block[:, :, 4] = 0  # a wall: some fill chunks meet only through others
        arr[tuple(slice(i * c, (i + 1) * c) for i in idx)] = block
    full = arr[...]
    for chunks, conn in [((c,) * 3, 26), ((2 * c, c, 3 * c), 6)]:
        constant_block.cache_clear()
        out = tmp_path / f"out{conn}.zarr"
        n = tilelabel.label_zarr(
            str(tmp_path / "in.zarr"),
            str(out),
            chunks=chunks,
            connectivity=conn,
            backend=backend,
            multilabel=multilabel,
        )
        if multilabel:
            ref = cc3d.connected_components(full, connectivity=conn).astype(np.uint32)
            n_ref = int(ref.max())
        else:
            ref, n_ref = ndimage.label(full, structure(3, conn))
        assert n == n_ref
        np.testing.assert_array_equal(zarr.open_array(str(out))[...], ref)
        # labeled once per chunk shape (at most 2^3 of them), and then found again
        info = constant_block.cache_info()
        assert 0 < info.misses <= 8 and info.hits > info.misses, info


def test_an_array_without_a_fill_value_is_read_whole(tmp_path):
    """zarr v2's fill value None: nothing is taken for background or constant, every chunk is
    read as zarr reads it."""
    img = random_volume((40, 36, 30), 0.3, seed=17)
    src = str(tmp_path / "v2.zarr")
    arr = zarr.create_array(
        src, shape=img.shape, chunks=(16, 16, 16), dtype="u1", zarr_format=2, fill_value=None
    )
    arr[...] = img
    out = str(tmp_path / "out.zarr")
    n = tilelabel.label_zarr(src, out, backend="cpu")
    ref, n_ref = ndimage.label(img, structure(3, 26))
    assert n == n_ref
    np.testing.assert_array_equal(zarr.open_array(out)[...], ref)
