"""Inputs and outputs given as fsspec URLs: file:// (worker processes) and memory:// (an
in-process cluster: the memory filesystem lives in one process), incl. overwrite and cleanup."""

from __future__ import annotations

import fsspec
import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tilelabel.cli import main
from tilelabel.storage import places
from tilelabel.synth import random_volume

FULL3 = np.ones((3, 3, 3))


@pytest.fixture(scope="module")
def threads():
    """A cluster of threads in this process, where memory:// is the same filesystem."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as lc,
        Client(lc, set_as_default=False) as c,
    ):
        yield c


@pytest.fixture
def memory_root(request):
    root = f"memory://tilelabel-{request.node.name}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


def write(url: str, data: np.ndarray, chunks, **kwargs) -> str:
    zarr.create_array(url, data=data, chunks=chunks, **kwargs)
    return url


def so(url: str) -> dict | None:
    """fsspec's local filesystem makes no parent folders unless asked."""
    return {"auto_mkdir": True} if url.startswith("file://") else None


def test_file_urls_on_worker_processes(tmp_path, client):
    img = random_volume((30, 26, 22), 0.3, 1, seed=21)
    src = "file://" + write(str(tmp_path / "in.zarr"), img, (10, 13, 11))
    dst = f"file://{tmp_path}/out.zarr"
    n = tilelabel.label_zarr(src, dst, chunks=(10, 13, 22), backend="cpu", client=client)
    ref, rn = ndimage.label(img, FULL3)
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)
    with pytest.raises(ValueError, match="already exists"):
        tilelabel.label_zarr(src, dst, client=client)
    with pytest.raises(ValueError, match="is the input"):  # the same store, URL or path
        tilelabel.label_zarr(src, str(tmp_path / "in.zarr"), client=client)
    tilelabel.label_zarr(src, dst, connectivity=1, overwrite=True, client=client)
    np.testing.assert_array_equal(zarr.open_array(dst)[...], ndimage.label(img)[0])


def test_memory_urls_in_and_out(threads, memory_root):
    img = random_volume((40, 36), 0.4, 1, seed=22)
    src = write(f"{memory_root}/in.zarr", img, (10, 12), zarr_format=2)
    dst = f"{memory_root}/out.zarr"
    n = tilelabel.label_zarr(src, dst, backend="cpu", client=threads)
    ref, rn = ndimage.label(img, np.ones((3, 3)))
    assert n == rn
    out = zarr.open_array(dst, mode="r")
    np.testing.assert_array_equal(out[...], ref)
    assert out.metadata.zarr_format == 2 and out.attrs["tilelabel"]["complete"] is True
    assert out.attrs["tilelabel"]["source"] == src
    with pytest.raises(ValueError, match="already exists"):
        tilelabel.label_zarr(src, dst, client=threads)
    tilelabel.label_zarr(src, dst, connectivity=1, overwrite=True, client=threads)
    np.testing.assert_array_equal(zarr.open_array(dst, mode="r")[...], ndimage.label(img)[0])


def test_memory_url_through_the_command_line(threads, memory_root, tmp_path, capsys):
    """An fsspec URL as the command's input (a memory:// output it refuses: test_cli)."""
    img = random_volume((20, 18, 16), 0.3, 1, seed=23)
    src = write(f"{memory_root}/in.zarr", img, (10, 9, 8))
    dst = str(tmp_path / "out.zarr")
    with threads.as_current():  # the command uses the active client when given no cluster
        assert main(["label", src, dst, "-q"]) == 0
        assert main(["label", f"{memory_root}/nothing.zarr", str(tmp_path / "o.zarr"), "-q"]) == 2
    assert "does not exist" in capsys.readouterr().err
    np.testing.assert_array_equal(zarr.open_array(dst)[...], ndimage.label(img, FULL3)[0])


def test_remove_of_an_unfinished_output(tmp_path, memory_root):
    """The cleanup of a failed write (places.remove) on each kind of URL; absent is fine."""
    for url in (f"{memory_root}/half.zarr", f"file://{tmp_path}/half.zarr", str(tmp_path / "p")):
        write(url, np.ones((4, 4), np.uint32), (2, 2), storage_options=so(url))
        assert places.found(url) == "zarr"
        places.remove(url)
        assert places.found(url) == "nothing"
        with pytest.raises(FileNotFoundError):
            zarr.open_array(url, mode="r")
        places.remove(url)  # nothing left: no error


def test_ome_image_in_memory(threads, memory_root):
    """An OME-Zarr image in memory:// (ome-zarr-py's reader takes no memory:// URLs; test_ome
    reads the same layout back through it from disk)."""
    pytest.importorskip("ome_zarr")
    from tests.storage.test_ome import ome_image

    data = np.stack([random_volume((24, 30), 0.4, 1, seed=s) for s in (1, 2)])
    image = ome_image(f"{memory_root}/img.zarr", data, "cyx", (1, 12, 15), "0.5")
    n = tilelabel.label_zarr(image, None, channel=1, ome_labels="x", client=threads)
    ref, rn = ndimage.label(data[1], np.ones((3, 3)))
    assert n == rn
    group = zarr.open_group(f"{image}/labels/x", mode="r")
    assert group.attrs["ome"]["image-label"]["source"]["image"] == "../../"
    np.testing.assert_array_equal(group["s0"][0], ref)
    np.testing.assert_array_equal(group["s1"][0], ref[::2, ::2])
    assert zarr.open_group(f"{image}/labels", mode="r").attrs["ome"]["labels"] == ["x"]
