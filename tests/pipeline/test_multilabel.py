"""Multi-label mode through the pipeline: random volumes and chunkings against cc3d, exactly,
on dask arrays and zarr stores, with statistics, size filters, the command line and a config."""

from __future__ import annotations

import cc3d
import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilelabel
from tests.conftest import write_zarr
from tests.kernels.cpu.test_multilabel import CONNECTIVITIES, DTYPES, multilabel_volume, oracle
from tilelabel.cli import main
from tilelabel.pipeline.borders import POSITION_BITS, chunk_pairs, contact
from tilelabel.synth import voronoi_labels


def _chunks(data, shape) -> tuple[int, ...]:
    return tuple(data.draw(st.integers(1, max(1, s))) for s in shape)


@pytest.mark.parametrize("nd, conn", CONNECTIVITIES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_dask_chunkings_equal_cc3d(nd, conn, data):
    shape = tuple(data.draw(st.integers(1, 12 if nd == 3 else 30)) for _ in range(nd))
    img = multilabel_volume(
        shape,
        data.draw(st.integers(1, 4)),
        data.draw(st.integers(1, 3)),
        data.draw(st.sampled_from(DTYPES)),
        data.draw(st.integers(0, 99)),
    )
    x = da.from_array(img, chunks=_chunks(data, shape))
    labels, n = tilelabel.label(x, conn, multilabel=True, backend="cpu")
    with dask.config.set(scheduler="sync"):
        labels, n = dask.compute(labels, n)
    ref, rn = oracle(img, conn)
    assert int(n) == rn
    np.testing.assert_array_equal(labels, ref)


def test_border_pairs_compare_values():
    """Two chunks side by side, every voxel foreground: only voxels of one value pair."""
    from tests.conftest import summarize_block
    from tilelabel.chunking import Chunk
    from tilelabel.pipeline.local import Labeler, summarize

    left = np.array([[1, 1], [2, 2], [3, 3]], np.int64)
    right = np.array([[1, 7], [3, 3], [2, 2]], np.int64)
    faces = ((False, False), (False, True))
    binary = summarize_block(left, (0, 0), (3, 4), faces, 8)
    a_chunk = Chunk((0, 0), (0, 0), (3, 2), (3, 4), faces)
    b_chunk = Chunk((0, 1), (0, 2), (3, 2), (3, 4), ((False, False), (True, False)))
    ml = Labeler("cpu", 4, multilabel=True)
    a = summarize(left, chunk=a_chunk, labeler=ml).borders
    b = summarize(right, chunk=b_chunk, labeler=ml).borders
    assert binary.borders.values is None and list(a.values) == [1, 2, 3]
    # b's border labels 1, 3, 4 (positions 1, 2, 3) hold 1, 3, 2; a's 1, 2, 3 hold 1, 2, 3
    for conn, want in ((4, {(1, 1)}), (8, {(1, 1), (2, 3), (3, 2)})):
        pairs = chunk_pairs(a, 0, [((0, 1), contact(b, (0, 1), high=False), 1)], conn)
        low = (1 << POSITION_BITS) - 1  # a name's position in its chunk's border ids
        got = {(int(p & low) + 1, int(q & low) + 1) for p, q in pairs}
        # positions in the sorted border ids: a's labels 1, 2, 3; b's 1 (1), 2 (3), 3 (2)
        assert got == want, conn


def test_regionprops_dask_has_values():
    img = voronoi_labels((30, 33, 36), cell=5, ids=12, seed=4, dtype=np.int32)
    x = da.from_array(img, chunks=(11, 16, 9))
    with dask.config.set(scheduler="sync"):
        table = tilelabel.regionprops(x, 18, multilabel=True, backend="cpu", min_size=5)
    ref = cc3d.connected_components(img, connectivity=18)
    sizes = np.bincount(ref.ravel())
    kept = [i for i in range(1, sizes.size) if sizes[i] >= 5]
    assert list(table["num_pixels"]) == [sizes[i] for i in kept]
    first = [img.reshape(-1)[np.flatnonzero(ref.reshape(-1) == i)[0]] for i in kept]
    assert list(table["value"]) == first
    assert table["value"].dtype == np.int32


@pytest.mark.parametrize("conn, chunks", [(26, (16, 16, 16)), (6, (8, 24, 16)), (18, None)])
def test_label_zarr_on_a_cluster(tmp_path, client, conn, chunks):
    img = voronoi_labels((40, 48, 44), cell=6, ids=30, seed=conn, dtype=np.uint16)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    n, table = tilelabel.label_zarr(
        src,
        str(tmp_path / "out.zarr"),
        connectivity=conn,
        chunks=chunks,
        multilabel=True,
        stats=True,
        min_size=3,
        backend="cpu",
        client=client,
    )
    ref = cc3d.connected_components(img, connectivity=conn)
    sizes = np.bincount(ref.ravel())
    kept = np.flatnonzero(sizes >= 3)
    kept = kept[kept > 0]
    lut = np.zeros(sizes.size, np.int64)
    lut[kept] = np.arange(1, kept.size + 1)
    out = zarr.open_array(str(tmp_path / "out.zarr"))
    assert n == kept.size and out.attrs["tilelabel"]["multilabel"] is True
    np.testing.assert_array_equal(out[...], lut[ref])
    values = [img.reshape(-1)[np.flatnonzero(ref.reshape(-1) == i)[0]] for i in kept]
    assert list(table["value"]) == values and list(table["num_pixels"]) == list(sizes[kept])
    with pytest.raises(ValueError, match="multilabel"):  # not resumed as a binary run
        tilelabel.label_zarr(
            src, str(tmp_path / "out.zarr"), connectivity=conn, min_size=3, resume=True
        )


def test_uint64_ids_past_int64_reach_the_parquet_table(tmp_path, client):
    """The table's ``value`` keeps the source's dtype: ids of 2^63 and more are written as
    they are, not cast to int64."""
    import pandas as pd

    img = np.zeros((8, 8), np.uint64)
    img[:3, :3] = 2**64 - 1
    img[5:, 5:] = 2**63 + 5
    img[0, 7] = 7
    src = write_zarr(tmp_path / "in.zarr", img, (4, 4))
    path = tmp_path / "stats.parquet"
    tilelabel.label_zarr(
        src, str(tmp_path / "out.zarr"), multilabel=True, stats=str(path), client=client
    )
    table = pd.read_parquet(path)
    assert table["value"].dtype == np.uint64
    assert list(table["value"]) == [2**64 - 1, 7, 2**63 + 5]


def test_float_input_refused_before_output(tmp_path, client):
    src = write_zarr(tmp_path / "in.zarr", np.ones((8, 8), np.float32), (4, 4))
    with pytest.raises(ValueError, match="integer or bool"):
        tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), multilabel=True, client=client)
    assert not (tmp_path / "out.zarr").exists()


def test_cli_flag_and_config_key(tmp_path, cluster):
    img = voronoi_labels((50, 60), cell=5, ids=6, seed=2, dtype=np.int64)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16))
    flags = ["--scheduler", cluster.scheduler_address, "--backend", "cpu", "-q"]
    assert main(["label", src, str(tmp_path / "a.zarr"), "--multilabel", "-c", "4", *flags]) == 0
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"output: {tmp_path / 'b.zarr'}\nmultilabel: true\nconnectivity: 4\n")
    assert main(["label", src, "--config", str(cfg), *flags]) == 0
    ref = cc3d.connected_components(img, connectivity=4)
    for name in ("a.zarr", "b.zarr"):
        np.testing.assert_array_equal(zarr.open_array(str(tmp_path / name))[...], ref)
