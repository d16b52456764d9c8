"""Labels or packed input kept between the passes: the writing pass uses them where they are,
and the output is the same whatever the budgets."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tests.conftest import write_zarr
from tilelabel.connectivity import structure
from tilelabel.kernels.backends import get_backend
from tilelabel.pipeline import kept
from tilelabel.synth import random_volume


def test_budget_take_and_drop():
    labels = np.zeros((4, 4), np.uint32)  # 64 bytes
    a, b = kept.Slot("run-a", (0,), 100), kept.Slot("run-a", (1,), 100)
    other = kept.Slot("run-b", (0,), 100)
    assert kept.put(a, labels, 3)
    assert not kept.put(b, labels, 5)  # 128 bytes would pass the run's budget
    assert kept.put(other, labels, 1)  # another run has its own budget
    assert kept.take(b) is None
    got = kept.take(a)
    assert got.labels is labels and got.n == 3 and got.packed is None
    assert kept.take(a) is None  # taken once
    assert kept.drop("run-a") == (1, 0, 0)
    assert kept.drop("run-b") == (0, 0, 1)
    assert kept.drop("run-b") == (0, 0, 0)


def test_packed_input_when_labels_do_not_fit():
    be = get_backend("cpu")
    blocks = [random_volume((5, 6, 7), 0.4, 1, seed=s) for s in range(3)]
    packs = []

    def packer(block):
        def pack():
            packs.append(block)
            return be.pack(be.foreground(block))

        return pack

    labels = np.zeros((5, 6, 7), np.uint32)  # 840 bytes, 27 bytes of bits
    slots = [kept.Slot("run-c", (i,), 0, 60) for i in range(3)]
    assert kept.put(slots[0], labels, 2, packer(blocks[0]))
    assert kept.put(slots[1], labels, 4, packer(blocks[1]))
    assert not kept.put(slots[2], labels, 6, packer(blocks[2]))  # 81 bytes > 60
    assert len(packs) == 2  # the third was not even packed
    assert not kept.put(kept.Slot("run-c", (3,), 0, 0), labels, 1)  # no pack, no label budget
    got = kept.take(slots[1])
    assert got.labels is None and got.n == 4 and got.shape == (5, 6, 7)
    np.testing.assert_array_equal(be.unpack(got.packed, got.shape), blocks[1] != 0)
    assert kept.drop("run-c") == (0, 1, 1)


@pytest.mark.parametrize(
    ("budget", "keep_input", "labels_kept", "from_input"),
    [
        (1 << 30, True, 8, 0),  # all labels
        (0, False, 0, 0),  # nothing: every chunk read again
        (0, True, 0, 8),  # every chunk's bits
        (2 * 20 * 24 * 28 * 4, True, None, None),  # some labels, the rest's bits
        (2 * 20 * 24 * 28 * 4, False, None, 0),  # some labels, the rest read again
    ],
)
def test_kept_chunks_write_the_same_output(
    tmp_path, client, caplog, budget, keep_input, labels_kept, from_input
):
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
            keep_input=keep_input,
        )
    ref, ref_n = ndimage.label(img, structure(3, 26))
    assert n == ref_n
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)
    used = [r.getMessage() for r in caplog.records if "kept on the workers" in r.getMessage()]
    if budget == 0 and not keep_input:
        assert not used
    else:
        words = used[0].split()
        taken, packed = int(words[2]), int(words[12])
        assert taken == labels_kept if labels_kept is not None else 0 < taken < 8
        if from_input is not None:
            assert packed == from_input
        else:
            assert taken + packed == 8
    # nothing stays behind in the worker processes
    assert all(v == 0 for v in client.run(lambda: len(kept._kept)).values())


def test_negative_budget_refused_before_any_work(tmp_path, client):
    src = write_zarr(tmp_path / "in.zarr", np.ones((8, 8, 8), np.uint8), (4, 4, 4))
    with pytest.raises(ValueError, match="keep_labels"):
        tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client, keep_labels=-1)
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.parametrize("chunks, labels_kept", [((20, 24, 28), False), ((40, 48, 28), True)])
def test_default_keeps_labels_where_each_thread_labels_one_chunk(
    tmp_path, client, caplog, chunks, labels_kept
):
    """Eight chunks on the two threads: no labels kept, the bits of all; two chunks: each
    worker keeps the labels of the chunk it labeled (one worker may have labeled both)."""
    img = random_volume((40, 48, 56), 0.3, 1, seed=12)
    src = write_zarr(tmp_path / "in.zarr", img, (10, 12, 14))
    with caplog.at_level(logging.INFO, logger="tilelabel"):
        n = tilelabel.label_zarr(
            src, str(tmp_path / "out.zarr"), chunks=chunks, backend="cpu", client=client
        )
    ref, ref_n = ndimage.label(img, structure(3, 26))
    assert n == ref_n
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)
    (used,) = [r.getMessage() for r in caplog.records if "kept on the workers" in r.getMessage()]
    words = used.split()
    taken, total, packed = int(words[2]), int(words[4]), int(words[12])
    assert taken + packed == total == (2 if labels_kept else 8)
    assert taken >= 1 if labels_kept else taken == 0
