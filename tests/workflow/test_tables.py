"""The tables' writer and grouping (:mod:`tilelabel.workflow.tables`): small pieces held until
they fill a row group, in order; the region graph's futures gathered as they are done; the
statistics gathered in pieces of a bounded number of rows."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import tilelabel
from tests.conftest import write_zarr
from tilelabel.synth import random_volume
from tilelabel.workflow import tables


def _piece(start: int, n: int) -> dict[str, np.ndarray]:
    a = np.arange(start, start + n, dtype=np.int64)
    return {"label_a": a, "label_b": a + 1, "count": a % 7, "area": a * 0.5}


def test_small_pieces_make_few_row_groups_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "SMALL_PIECE", 100)
    empty = {c: v[:0] for c, v in _piece(0, 0).items()}
    sink = tables.ParquetSink(str(tmp_path / "t.parquet"), empty)
    sizes = [30, 30, 0, 30, 30, 250, 10, 5]
    start = 0
    for n in sizes:
        sink.write(_piece(start, n))
        start += n
    sink.close()
    f = pq.ParquetFile(tmp_path / "t.parquet")
    # 30 + 30 + 30 + 30 held until 120 rows, then 250 alone, then the last 15 at close
    assert [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)] == [120, 250, 15]
    got = f.read().to_pandas()
    np.testing.assert_array_equal(got["label_a"], np.arange(start))
    np.testing.assert_array_equal(got["area"], np.arange(start) * 0.5)
    stats = f.metadata.row_group(0)
    assert stats.column(0).statistics is not None  # the labels' min / max, for readers
    assert stats.column(3).statistics is None


def test_ready_runs_take_what_is_done_after_the_next():
    futures = [Future() for _ in range(7)]
    for i in (1, 2, 3, 5, 6):
        futures[i].set_result(i)
    runs = [[futures.index(f) for f in run] for run in tables.ready_runs(futures, 3)]
    assert runs == [[0, 1, 2], [3], [4, 5, 6]]


@pytest.mark.parametrize("where", ["threads", "cluster"])
@pytest.mark.parametrize(
    "kw", [{}, {"min_size": 3}, {"largest_k": 40, "order": "size"}], ids=["all", "min", "size"]
)
def test_statistics_are_gathered_in_pieces_of_at_most_a_bucket(
    tmp_path, monkeypatch, request, where, kw
):
    """With buckets of a few rows, every piece the client gathers and writes has at most that
    many, and the table equals the one gathered a slab at a time; an empty slab is gathered
    whole."""
    img = random_volume((40, 35, 30), 0.25, 1, seed=5)
    img[32:] = 0  # the last slab of chunks holds no component
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    opts = dict(chunks=(16, 16, 8), connectivity=6, backend="cpu", overwrite=True, **kw)
    if where == "cluster":
        opts["client"] = request.getfixturevalue("client")
    whole = tmp_path / "whole.parquet"
    n = tilelabel.label_zarr(src, str(tmp_path / "a.zarr"), stats=str(whole), **opts)
    assert n >= 40

    sizes: list[int] = []
    write = tables.ParquetSink.write

    def counted(sink, cols):
        sizes.append(len(cols["label"]))
        write(sink, cols)

    monkeypatch.setattr(tables, "BUCKET", 7)
    monkeypatch.setattr(tables.ParquetSink, "write", counted)
    pieces = tmp_path / "pieces.parquet"
    assert tilelabel.label_zarr(src, str(tmp_path / "b.zarr"), stats=str(pieces), **opts) == n
    assert max(sizes) <= 7 and sum(sizes) == n and len(sizes) > n // 7
    pd.testing.assert_frame_equal(pd.read_parquet(pieces), pd.read_parquet(whole))
