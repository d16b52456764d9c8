"""Labels kept between the passes: the writing pass uses them where they are, and the output is
the same whatever the budget."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tests.conftest import write_zarr
from tilelabel.connectivity import structure
from tilelabel.pipeline import keep
from tilelabel.synth import random_volume


def test_budget_take_and_drop():
    labels = np.zeros((4, 4), np.uint32)  # 64 bytes
    a, b = keep.Slot("run-a", (0,), 100), keep.Slot("run-a", (1,), 100)
    other = keep.Slot("run-b", (0,), 100)
    assert keep.put(a, labels, 3)
    assert not keep.put(b, labels, 5)  # 128 bytes would pass the run's budget
    assert keep.put(other, labels, 1)  # another run has its own budget
    assert keep.take(b) is None
    got, n = keep.take(a)
    assert got is labels and n == 3
    assert keep.take(a) is None  # taken once
    assert keep.drop("run-a") == (1, 0)
    assert keep.drop("run-b") == (0, 1)
    assert keep.drop("run-b") == (0, 0)


@pytest.mark.parametrize(
    ("budget", "kept"),
    [(1 << 30, 8), (0, 0), (2 * 20 * 24 * 28 * 4, None)],  # all, none, some chunks per worker
)
def test_kept_labels_write_the_same_output(tmp_path, client, caplog, budget, kept):
    img = random_volume((40, 48, 56), 0.3, 1, seed=11)
    src = write_zarr(tmp_path / "in.zarr", img, (10, 12, 14))
    with caplog.at_level(logging.INFO, logger="tilelabel"):
        n = tilelabel.label_zarr(
            src,
            str(tmp_path / "out.zarr"),
            chunks=(20, 24, 28),
            backend="cpu",
            client=client,
            keep_labels=budget,
        )
    ref, ref_n = ndimage.label(img, structure(3, 26))
    assert n == ref_n
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)
    used = [r.getMessage() for r in caplog.records if "kept on the workers" in r.getMessage()]
    if budget == 0:
        assert not used
    else:
        taken = int(used[0].split()[2])
        assert taken == kept if kept is not None else 0 < taken < 8
    # nothing stays behind in the worker processes
    assert all(v == 0 for v in client.run(lambda: len(keep._kept)).values())


def test_negative_budget_refused_before_any_work(tmp_path, client):
    src = write_zarr(tmp_path / "in.zarr", np.ones((8, 8, 8), np.uint8), (4, 4, 4))
    with pytest.raises(ValueError, match="keep_labels"):
        tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client, keep_labels=-1)
    assert not (tmp_path / "out.zarr").exists()
