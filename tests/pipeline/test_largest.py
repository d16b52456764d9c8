"""Keeping the k largest components and numbering by size: in memory, over chunks (dask and zarr)
and from the command line, against a whole-volume reference and against cc3d's ``largest_k``."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tests.conftest import write_zarr
from tilelabel.cli import main
from tilelabel.connectivity import structure
from tilelabel.synth import random_volume


def reference(img, conn, k=None, order="raster", min_size=None):
    """scipy's labels with only the k largest components (of equal sizes, the earlier first
    voxel counts as larger) within the size range, numbered in raster or size order."""
    lab, n = ndimage.label(img, structure(img.ndim, conn))
    size = np.bincount(lab.ravel(), minlength=n + 1)[1:]
    ok = np.flatnonzero(size >= (min_size or 0))
    ranked = ok[np.lexsort((ok, -size[ok]))][:k]
    keep = ranked if order == "size" else np.sort(ranked)
    lut = np.zeros(n + 1, np.int64)
    lut[keep + 1] = np.arange(1, keep.size + 1)
    return lut[lab], keep.size


CASES = [
    ((30, 31, 32), 0.2, 26, (8, 9, 10)),
    ((30, 31, 32), 0.3, 6, (30, 16, 7)),
    ((57, 63), 0.45, 8, (10, 11)),
    ((57, 63), 0.5, 4, (57, 9)),
]


@pytest.mark.parametrize("shape, density, conn, chunks", CASES)
@pytest.mark.parametrize("order", ["raster", "size"])
def test_in_memory_and_over_chunks(shape, density, conn, chunks, order):
    img = random_volume(shape, density, 1, seed=len(shape) + conn)
    n_all = ndimage.label(img, structure(img.ndim, conn))[1]
    cases = ((0, None), (1, None), (7, None), (7, 3), (n_all - 1, None), (n_all, 3))
    for k, min_size in cases:
        ref, rn = reference(img, conn, k, order, min_size)
        kw = {"largest_k": k, "order": order, "min_size": min_size}
        lab, n = tilelabel.label(img, conn, backend="cpu", **kw)
        assert n == rn, (k, min_size)
        np.testing.assert_array_equal(lab, ref)
        with dask.config.set(scheduler="sync"):
            x = da.from_array(img, chunks=chunks)
            lab, n = dask.compute(*tilelabel.label(x, conn, backend="cpu", **kw))
        assert int(n) == rn, (k, min_size)
        np.testing.assert_array_equal(lab, ref)


def test_size_order_of_every_component_in_memory():
    img = random_volume((40, 41), 0.5, 1, seed=2)
    ref, rn = reference(img, 8, None, "size")
    lab, n = tilelabel.label(img, order="size")
    assert n == rn
    np.testing.assert_array_equal(lab, ref)
    sizes = np.bincount(lab.ravel())[1:]
    assert (np.diff(sizes) <= 0).all()
    with pytest.raises(ValueError, match="order 'size' over chunks needs largest_k"):
        tilelabel.label(da.from_array(img, chunks=(20, 20)), order="size")
    with pytest.raises(ValueError, match="'order'"):
        tilelabel.label(img, order="volume")
    with pytest.raises(ValueError, match="'largest_k'"):
        tilelabel.label(img, largest_k=-1)


def test_exact_against_cc3d_largest_k():
    """Where the k-th and the (k+1)-th largest differ in size (cc3d ranks equal sizes in no
    stated order), the kept voxels and their partition into components equal cc3d's."""
    cc3d = pytest.importorskip("cc3d")
    checked = 0
    for seed in range(6):
        for shape, conn in (((26, 27, 28), 26), ((26, 27, 28), 6), ((26, 27, 28), 18)):
            img = random_volume(shape, 0.25, 1 + seed % 2, seed=seed)
            lab, n = ndimage.label(img, structure(3, conn))
            sizes = np.sort(np.bincount(lab.ravel())[1:])[::-1]
            for k in range(1, n):
                if sizes[k - 1] == sizes[k]:
                    continue
                want = cc3d.largest_k(img, k, connectivity=conn)
                got, m = tilelabel.label(img, conn, largest_k=k, order="size")
                assert m == k
                np.testing.assert_array_equal(got > 0, want > 0)
                if want.dtype != bool:  # one label of theirs is one of ours, and back
                    pairs = np.unique(np.stack([got[got > 0], want[want > 0]]), axis=1)
                    assert pairs.shape[1] == k == np.unique(pairs[1]).size
                checked += 1
    assert checked > 50


def test_zarr_run_table_and_cli(tmp_path, client, capsys):
    img = random_volume((36, 34, 30), 0.2, 1, seed=9)
    src = write_zarr(tmp_path / "in.zarr", img, (9, 17, 10))
    ref, rn = reference(img, 26, 6, "size")
    n, df = tilelabel.label_zarr(
        src,
        str(tmp_path / "out.zarr"),
        chunks=(18, 17, 10),
        client=client,
        largest_k=6,
        order="size",
        stats=True,
    )
    assert n == rn == 6
    out = zarr.open_array(str(tmp_path / "out.zarr"))
    np.testing.assert_array_equal(out[...], ref)
    assert out.attrs["tilelabel"]["largest_k"] == 6 and out.attrs["tilelabel"]["order"] == "size"
    assert list(df["label"]) == list(range(1, 7))
    np.testing.assert_array_equal(df["num_pixels"], np.bincount(ref.ravel())[1:])
    assert (np.diff(df["num_pixels"]) <= 0).all()
    # the command line, raster order, the table to Parquet
    path = tmp_path / "s.parquet"
    args = ["label", src, str(tmp_path / "o2.zarr"), "--largest-k", "4", "--stats", str(path)]
    assert main([*args, "--scheduler", client.scheduler.address, "-q"]) == 0
    ref, rn = reference(img, 26, 4)
    assert f"{rn:,} components" in capsys.readouterr().out
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "o2.zarr"))[...], ref)
    table = pd.read_parquet(path)
    np.testing.assert_array_equal(table["num_pixels"], np.bincount(ref.ravel())[1:])
    assert main(["label", src, str(tmp_path / "o3.zarr"), "--order", "size"]) == 2
    assert "needs largest_k" in capsys.readouterr().err


def test_resume_needs_the_same_kept_components_and_order(tmp_path):
    """A resume (or a run that finds the labels complete) with another ``largest_k`` or
    ``order`` is refused, naming the option: it would keep or number other components."""
    img = random_volume((12, 12, 12), 0.15, 1, seed=3)  # 19 components
    src = write_zarr(tmp_path / "in.zarr", img, (6, 6, 6))
    dst = str(tmp_path / "out.zarr")
    assert tilelabel.label_zarr(src, dst, largest_k=5, order="size", backend="cpu") == 5
    assert tilelabel.label_zarr(src, dst, largest_k=5, order="size", resume=True) == 5
    for other, named in [
        ({"largest_k": 5}, "order='size' where this run has order=None"),
        ({"largest_k": 4, "order": "size"}, "largest_k=5 where this run has largest_k=4"),
    ]:
        with pytest.raises(ValueError, match=named):
            tilelabel.label_zarr(src, dst, resume=True, backend="cpu", **other)
    # the raster order is the default: recorded as no order at all
    tilelabel.label_zarr(src, dst, largest_k=5, backend="cpu", overwrite=True)
    assert "order" not in zarr.open_array(dst).attrs["tilelabel"]
    assert tilelabel.label_zarr(src, dst, largest_k=5, order="raster", resume=True) == 5
    with pytest.raises(ValueError, match="largest_k=5 where this run has largest_k=None"):
        tilelabel.label_zarr(src, dst, resume=True, backend="cpu")
