"""OME-Zarr images (written by ome-zarr-py) in; labels into their labels/ group, read back with
ome-zarr-py's Reader as labels of the image; level 0 equal to scipy on the selected plane."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tilelabel.cli import main
from tilelabel.synth import random_volume

ome_zarr = pytest.importorskip("ome_zarr")
from ome_zarr import format as ome_format  # noqa: E402
from ome_zarr.io import parse_url  # noqa: E402
from ome_zarr.reader import Label, Reader  # noqa: E402
from ome_zarr.writer import write_image  # noqa: E402

FORMATS = {"0.4": ome_format.FormatV04(), "0.5": ome_format.FormatV05()}


def ome_image(path, data: np.ndarray, axes: str, chunks, version: str = "0.4", **kwargs) -> str:
    """An OME-Zarr image with ome-zarr-py's default pyramid (2x in y and x per level)."""
    fmt = FORMATS[version]
    root = zarr.open_group(str(path), mode="w", zarr_format=fmt.zarr_format)
    write_image(data, root, axes=axes, fmt=fmt, storage_options={"chunks": chunks}, **kwargs)
    return str(path)


def stack(shape, seed, n=1):
    return np.stack([random_volume(shape, 0.15, 1, seed=seed + i) for i in range(n)])


def read_labels(image: str, name: str):
    """ome-zarr-py's view: the node of labels/<name> (a Label node) and the image node."""
    nodes = list(Reader(parse_url(image))())
    (img,) = [n for n in nodes if n.zarr.path.rstrip("/") == image.rstrip("/")]
    (lab,) = [n for n in nodes if n.zarr.path.rstrip("/").endswith(f"labels/{name}")]
    return img, lab


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_channel_and_timepoint_into_labels_group(tmp_path, client, version):
    t, c = 2, 3
    data = stack((16, 40, 36), seed=10, n=t * c).reshape(t, c, 16, 40, 36).astype(np.uint16)
    image = ome_image(tmp_path / "img.zarr", data, "tczyx", (1, 1, 8, 10, 12), version)
    n = tilelabel.label_zarr(
        image, None, channel=2, timepoint=1, ome_labels="cells", client=client, backend="cpu"
    )
    ref, rn = ndimage.label(data[1, 2], np.ones((3, 3, 3)))
    assert n == rn and rn > 10
    img, lab = read_labels(image, "cells")
    assert lab.load(Label) is not None and lab.metadata["name"] == "cells"
    assert lab.zarr.root_attrs  # the label group's own metadata, read by ome-zarr-py
    assert [a["name"] for a in lab.metadata["axes"]] == list("tczyx")
    levels = [np.asarray(d) for d in lab.data]
    np.testing.assert_array_equal(levels[0][0, 0], ref)
    assert levels[0].shape == (1, 1, 16, 40, 36)
    # lower levels: nearest subsampling, the shape of the image's level of the same scale
    assert len(levels) >= 3
    for i, level in enumerate(levels[1:], 1):
        assert level.shape[2:] == img.data[i].shape[2:]
        np.testing.assert_array_equal(level[0, 0], ref[:, :: 2**i, :: 2**i])
    # the image lists its labels; the label image points back at the image
    root = zarr.open_group(image, mode="r")
    ngff = root["labels"].attrs.get("ome", root["labels"].attrs)
    assert ngff["labels"] == ["cells"]
    label_group = root["labels/cells"].attrs
    meta = label_group.get("ome", label_group)
    assert meta["image-label"]["source"]["image"] == "../../"
    arr = zarr.open_array(f"{image}/labels/cells/s0", mode="r")  # ome-zarr-py's level names
    assert arr.attrs["tilelabel"]["complete"] is True
    assert arr.metadata.zarr_format == (2 if version == "0.4" else 3)


def test_cli_2d_image_default_name_overwrite_and_refusals(tmp_path, cluster, capsys):
    sched = cluster.scheduler_address
    data = random_volume((50, 60), 0.45, 1, seed=3)
    image = ome_image(tmp_path / "img.zarr", data, "yx", (16, 16), "0.5")
    assert main(["label", image, "--scheduler", sched, "-c", "4", "-q"]) == 0
    _, lab = read_labels(image, "tilelabel")
    np.testing.assert_array_equal(np.asarray(lab.data[0]), ndimage.label(data)[0])
    # again: refused without --overwrite, replaced with it
    assert main(["label", image, "--scheduler", sched, "-q"]) == 2
    assert "already exist" in capsys.readouterr().err
    assert main(["label", image, "--scheduler", sched, "--overwrite", "-q"]) == 0
    _, lab = read_labels(image, "tilelabel")
    np.testing.assert_array_equal(np.asarray(lab.data[0]), ndimage.label(data, np.ones((3, 3)))[0])
    # a second label image is added to the list
    assert main(["label", image, "--ome-labels", "b", "--scheduler", sched, "-q"]) == 0
    labels = zarr.open_group(f"{image}/labels", mode="r").attrs["ome"]["labels"]
    assert labels == ["tilelabel", "b"]


def test_plain_output_from_an_ome_image(tmp_path, client):
    data = stack((30, 20, 24), seed=5, n=2)
    image = ome_image(tmp_path / "img.zarr", data, "czyx", (1, 10, 10, 12), "0.4")
    out = tmp_path / "out.zarr"
    n = tilelabel.label_zarr(image, str(out), channel=1, connectivity=6, client=client)
    ref, rn = ndimage.label(data[1])
    assert n == rn
    arr = zarr.open_array(str(out), mode="r")
    assert arr.shape == (30, 20, 24) and arr.chunks == (10, 10, 12)
    np.testing.assert_array_equal(arr[...], ref)


def test_size_one_axes_need_no_selection(tmp_path, client):
    data = random_volume((20, 24, 28), 0.3, 1, seed=8)[None, None]
    image = ome_image(tmp_path / "img.zarr", data, "tczyx", (1, 1, 10, 12, 14), "0.4")
    n = tilelabel.label_zarr(image, None, client=client)
    ref, rn = ndimage.label(data[0, 0], np.ones((3, 3, 3)))
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(f"{image}/labels/tilelabel/s0")[0, 0], ref)


def test_bad_selections(tmp_path, client):
    data = stack((10, 12, 14), seed=1, n=6).reshape(2, 3, 10, 12, 14)
    image = ome_image(tmp_path / "img.zarr", data, "tczyx", (1, 1, 5, 6, 7), "0.4")
    plain = tmp_path / "plain.zarr"
    zarr.create_array(str(plain), data=data[0, 0])
    cases = [
        (
            {"timepoint": 0},
            "3 positions along its channel axis 'c'; choose one with --channel 0..2",
        ),
        ({"channel": 0}, "along its time axis 't'; choose one with --timepoint 0..1"),
        ({"channel": 3, "timepoint": 0}, "channel 3 is out of range 0..2"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            tilelabel.label_zarr(image, None, client=client, **kwargs)
    with pytest.raises(ValueError, match="is not one"):
        tilelabel.label_zarr(str(plain), str(tmp_path / "o.zarr"), channel=0, client=client)
    with pytest.raises(ValueError, match="needs an OME-Zarr image"):
        tilelabel.label_zarr(str(plain), None, ome_labels="x", client=client)
    with pytest.raises(ValueError, match="missing OUTPUT"):
        tilelabel.label_zarr(str(plain), None, client=client)
    with pytest.raises(ValueError, match="bad label name"):
        tilelabel.label_zarr(image, None, channel=0, timepoint=0, ome_labels="a/b", client=client)
    assert "labels" not in zarr.open_group(image, mode="r")


def test_statistics_take_the_image_scale(tmp_path, client):
    """The table's physical columns use the image's scale as spacing unless one is given."""
    from skimage.measure import regionprops_table

    data = random_volume((16, 20, 24), 0.2, 1, seed=6).astype(np.uint8)
    image = ome_image(tmp_path / "img.zarr", data, "zyx", (8, 10, 12))
    # a voxel of 2 x 0.5 x 0.25 (um, say): every level's scale, as a microscope's image has it
    group = zarr.open_group(image, mode="r+")
    multiscales = group.attrs["multiscales"]
    for ds in multiscales[0]["datasets"]:
        for t in ds["coordinateTransformations"]:
            if t["type"] == "scale":
                t["scale"] = [a * b for a, b in zip(t["scale"], (2.0, 0.5, 0.25), strict=True)]
    group.attrs["multiscales"] = multiscales
    ref = ndimage.label(data, np.ones((3, 3, 3)))[0]
    props = ("area", "centroid", "axis_major_length")
    for given, spacing in ((None, (2.0, 0.5, 0.25)), ((1.0, 1.0, 3.0), (1.0, 1.0, 3.0))):
        out = str(tmp_path / f"out-{given}.zarr")
        n, df = tilelabel.label_zarr(
            image, out, stats=True, spacing=given, client=client, backend="cpu"
        )
        want = regionprops_table(ref, properties=props, spacing=spacing)
        for col, w in want.items():
            np.testing.assert_allclose(df[col], w, rtol=1e-9, atol=1e-6, err_msg=col)
        np.testing.assert_allclose(df["bbox_scaled-3"], df["bbox-3"] * spacing[0])
