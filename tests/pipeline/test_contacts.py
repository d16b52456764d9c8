"""The region graph through the pipeline (:mod:`tilelabel.pipeline.contacts`): random volumes in
odd chunkings against the whole volume's contacts (tilelabel's kernel and cc3d's), binary and
multi-label, 2D and 3D, periodic, with size filters; and ``--contacts`` runs on zarr stores, on a
local cluster, from the command line, with a resume and the errors that refuse a run."""

from __future__ import annotations

import cc3d
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr

import tilelabel
from tests.conftest import write_zarr
from tilelabel.cli import main
from tilelabel.kernels.cpu.contacts import contacts as whole_contacts
from tilelabel.pipeline.lazy import contacts_dask, label_dask
from tilelabel.pipeline.local import Labeler


def segmentation(shape, seed: int, values: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, values, shape).astype(np.uint16)


def graph_of(x: np.ndarray, chunks, conn: int, graph: int, multilabel: bool, **kw):
    """The labels of ``x`` and their region graph, both chunk by chunk."""
    labeler = Labeler("cpu", conn, multilabel=multilabel)
    arr = da.from_array(x, chunks=chunks)
    filters = {k: v for k, v in kw.items() if k in ("min_size", "largest_k", "order")}
    labels = label_dask(arr, labeler=labeler, dtype="auto", **filters, wrap=kw.get("wrap", ()))
    df = contacts_dask(arr, labeler=labeler, connectivity=graph, **kw)
    return labels[0].compute(), df


def expect_whole(labels, df, graph: int, spacing=None, wrap=False) -> None:
    pairs, counts, areas = whole_contacts(labels, graph, spacing, wrap=wrap)
    np.testing.assert_array_equal(df[["label_a", "label_b"]].to_numpy(), pairs.astype(np.int64))
    np.testing.assert_array_equal(df["count"].to_numpy(), counts)
    np.testing.assert_allclose(df["area"].to_numpy(), areas, rtol=1e-12)


@pytest.mark.parametrize("conn", [6, 18, 26])
@pytest.mark.parametrize("seed", range(4))
def test_multilabel_graph_equals_the_whole_volumes(conn, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(5, 16, 3))
    chunks = tuple(int(c) for c in rng.integers(2, 7, 3))
    x = segmentation(shape, seed)
    labels, df = graph_of(x, chunks, conn, conn, True, spacing=(1.0, 2.5, 0.5))
    expect_whole(labels, df, conn, (1.0, 2.5, 0.5))
    # each label's source value: the input at its first voxel
    first = {int(v): i for i, v in reversed(list(enumerate(labels.reshape(-1)))) if v}
    for col, lab in (("value_a", "label_a"), ("value_b", "label_b")):
        want = [x.reshape(-1)[first[int(v)]] for v in df[lab]]
        np.testing.assert_array_equal(df[col].to_numpy(), want)
    assert df["value_a"].dtype == np.uint16


@pytest.mark.parametrize(("conn", "graph"), [(6, 18), (6, 26), (18, 26), (6, 6)])
def test_multilabel_graph_at_another_connectivity(conn, graph):
    x = segmentation((11, 9, 13), 7)
    labels, df = graph_of(x, (4, 3, 5), conn, graph, True)
    expect_whole(labels, df, graph)


@pytest.mark.parametrize(("conn", "graph"), [(6, 18), (6, 26), (18, 26)])
@pytest.mark.parametrize("seed", range(3))
def test_binary_components_touch_through_the_graphs_extra_neighbours(conn, graph, seed):
    x = np.random.default_rng(seed).random((12, 10, 14)) < 0.3
    labels, df = graph_of(x, (5, 3, 4), conn, graph, False)
    assert len(df) > 0
    expect_whole(labels, df, graph)
    assert "value_a" not in df


@pytest.mark.parametrize(("conn", "graph"), [(4, 4), (4, 8), (8, 8)])
def test_2d(conn, graph):
    x = segmentation((23, 19), 3).astype(np.int32)
    labels, df = graph_of(x, (4, 7), conn, graph, True, spacing=(2.0, 3.0))
    expect_whole(labels, df, graph, (2.0, 3.0))


@pytest.mark.parametrize("chunks", [(3, 4, 5), (9, 8, 10), (2, 8, 10)])
def test_periodic_boundaries(chunks):
    x = segmentation((9, 8, 10), 11)
    labels, df = graph_of(x, chunks, 26, 26, True, wrap=(0, 1, 2))
    expect_whole(labels, df, 26, wrap=True)


def test_size_filters_drop_their_components_pairs():
    x = segmentation((12, 11, 10), 5)
    labels, df = graph_of(x, (5, 4, 3), 6, 6, True, min_size=3)
    expect_whole(labels, df, 6)
    labels, df = graph_of(x, (5, 4, 3), 6, 6, True, largest_k=30, order="size")
    assert labels.max() == 30
    expect_whole(labels, df, 6)


@pytest.mark.parametrize("conn", [6, 18, 26])
def test_against_cc3d(conn):
    """cc3d's own numbers: counts where the image's outermost voxels are 0 (cc3d counts some
    edge pairs more than once at 26), and areas with an anisotropy everywhere."""
    x = np.pad(segmentation((14, 12, 13), 2, values=6), 1)
    labels, df = graph_of(x, (5, 6, 4), conn, conn, True, spacing=(1.5, 1.0, 2.0))
    counts = cc3d.contacts(labels, connectivity=conn, surface_area=False)
    assert dict(zip(zip(df.label_a, df.label_b, strict=True), df["count"], strict=True)) == {
        k: int(v) for k, v in counts.items()
    }
    areas = cc3d.contacts(labels, connectivity=conn, anisotropy=(1.5, 1.0, 2.0))
    got = dict(zip(zip(df.label_a, df.label_b, strict=True), df["area"], strict=True))
    assert set(got) == set(areas)
    np.testing.assert_allclose([got[k] for k in areas], list(areas.values()), rtol=1e-6)
    assert set(zip(df.label_a, df.label_b, strict=True)) == cc3d.region_graph(labels, conn)


def test_an_empty_volume_has_an_empty_graph():
    labels, df = graph_of(np.zeros((6, 5, 4), np.uint8), (3, 3, 3), 26, 26, False)
    assert len(df) == 0 and list(df.columns) == ["label_a", "label_b", "count", "area"]


# -- runs on zarr stores ---------------------------------------------------------------------


def _read(path) -> pd.DataFrame:
    return pd.read_parquet(path).sort_values(["label_a", "label_b"]).reset_index(drop=True)


def test_a_run_writes_the_graph_of_its_labels(tmp_path):
    x = segmentation((30, 28, 26), 1)
    src = write_zarr(tmp_path / "in.zarr", x, (8, 8, 8))
    out, graph = tmp_path / "out.zarr", tmp_path / "graph.parquet"
    n = tilelabel.label_zarr(
        src, str(out), multilabel=True, connectivity=18, contacts=str(graph), chunks=(16, 16, 8)
    )
    labels = zarr.open_array(str(out))[:]
    assert n == labels.max()
    df = _read(graph)
    expect_whole(labels, df, 18)
    assert zarr.open_array(str(out)).attrs["tilelabel"]["contacts_connectivity"] == 18


def test_a_run_on_a_local_cluster_with_spacing(tmp_path, client):
    x = np.random.default_rng(3).random((24, 20, 22)) < 0.35
    src = write_zarr(tmp_path / "in.zarr", x, (8, 10, 11))
    out, graph = tmp_path / "out.zarr", tmp_path / "graph.parquet"
    tilelabel.label_zarr(
        src, str(out), client=client, connectivity=6, contacts=str(graph), spacing=(2, 1, 1)
    )
    expect_whole(zarr.open_array(str(out))[:], _read(graph), 26, (2.0, 1.0, 1.0))


def test_the_command_line(tmp_path, capsys):
    x = segmentation((20, 18, 16), 4)
    src = write_zarr(tmp_path / "in.zarr", x, (8, 8, 8))
    out, graph = tmp_path / "out.zarr", tmp_path / "graph.parquet"
    args = ["label", src, str(out), "--multilabel", "-c", "6", "--contacts", str(graph)]
    assert main([*args, "--contacts-connectivity", "26"]) == 0
    expect_whole(zarr.open_array(str(out))[:], _read(graph), 26)


def test_a_resume_writes_a_missing_graph(tmp_path):
    x = segmentation((18, 16, 14), 6)
    src = write_zarr(tmp_path / "in.zarr", x, (8, 8, 8))
    out, graph = tmp_path / "out.zarr", tmp_path / "graph.parquet"
    kw = {"multilabel": True, "contacts": str(graph)}
    tilelabel.label_zarr(src, str(out), **kw)
    want = _read(graph)
    graph.unlink()
    tilelabel.label_zarr(src, str(out), resume=True, **kw)
    pd.testing.assert_frame_equal(_read(graph), want)
    tilelabel.label_zarr(src, str(out), resume=True, **kw)  # complete with its graph: nothing
    with pytest.raises(ValueError, match="already exists"):
        tilelabel.label_zarr(src, str(tmp_path / "other.zarr"), **kw)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"connectivity": 26}, "never touch under connectivity 26"),
        ({"connectivity": 6, "contacts_connectivity": 6}, "never touch under connectivity 6"),
        ({"multilabel": True, "dust": 5}, "dust writes the input's values"),
        ({"contacts": None, "contacts_connectivity": 18}, "goes with contacts"),
        ({"multilabel": True, "stats": "SAME"}, "is the statistics table"),
    ],
)
def test_refused_before_any_work(tmp_path, kw, message):
    src = write_zarr(tmp_path / "in.zarr", segmentation((8, 8, 8), 0), (4, 4, 4))
    graph = str(tmp_path / "g.parquet")
    kw = {"contacts": graph, **kw}
    if kw.get("stats") == "SAME":
        kw["stats"] = graph
    with pytest.raises(ValueError, match=message):
        tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), **kw)
    assert not (tmp_path / "out.zarr").exists()
