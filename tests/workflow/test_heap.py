"""The client's heap is frozen while runs are in flight and thawed after the last."""

from __future__ import annotations

import gc
import threading

import pytest

import tilelabel
from tests.conftest import write_zarr
from tilelabel.storage import outputs
from tilelabel.synth import random_volume
from tilelabel.workflow import heap, opening


def is_frozen(obj) -> bool:
    """Frozen objects are in none of the collector's generations."""
    return not any(o is obj for o in gc.get_objects())


def test_objects_of_before_the_run_are_frozen_during_it_and_thawed_after():
    mine = [[]]  # a container the collector tracks
    assert not is_frozen(mine)
    with heap.frozen():
        assert is_frozen(mine)
        made_during = [[]]
        assert not is_frozen(made_during)  # collected as usual
    assert not is_frozen(mine)
    assert gc.get_freeze_count() == 0


def test_the_heap_stays_frozen_until_the_last_of_overlapping_runs_ends():
    mine = [[]]
    first_in, second_done, release = threading.Event(), threading.Event(), threading.Event()

    def first():
        with heap.frozen():
            first_in.set()
            release.wait(10)

    t = threading.Thread(target=first)
    t.start()
    try:
        assert first_in.wait(10)
        with heap.frozen():
            pass
        second_done.set()
        assert is_frozen(mine)  # the first run is still going
    finally:
        release.set()
        t.join(10)
    assert second_done.is_set() and not is_frozen(mine)


def test_a_process_that_turned_the_collector_off_is_left_as_it_is():
    mine = [[]]
    gc.disable()
    try:
        with heap.frozen():
            assert not is_frozen(mine) and not gc.isenabled()
    finally:
        gc.enable()
    assert gc.get_freeze_count() == 0


def test_label_zarr_runs_with_the_heap_frozen_and_thaws_it_however_it_ends(
    tmp_path, client, monkeypatch
):
    mine = [[]]
    seen = []
    check = outputs.open_output

    def observed(*args, **kwargs):  # called inside the run, before the cluster is used
        # the freeze count, not a list of the collector's objects: the cluster's threads run
        # now, and such a list would hold any tuple they are still building (CPython gh-101855)
        seen.append(gc.get_freeze_count() > 0)
        return check(*args, **kwargs)

    monkeypatch.setattr(opening, "open_output", observed)
    img = random_volume((16, 16, 16), 0.3, seed=2)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client)
    assert seen == [True] and not is_frozen(mine) and gc.get_freeze_count() == 0
    with pytest.raises(ValueError, match="already exists"):
        tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client)
    assert seen == [True, True] and gc.get_freeze_count() == 0
