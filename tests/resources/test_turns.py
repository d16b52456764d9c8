"""GPU encoder turns: node-wide flock turns per device, taken at once or after a bounded wait."""

from __future__ import annotations

import math
import multiprocessing as mp
import threading
import time

from tilelabel.resources import turns


def test_turns_per_option():
    assert turns.turns(None) is None
    # by default the GPU compresses every chunk, of an output with enough tiles to repay
    # loading the encoder
    enough = turns.MIN_OUTPUT_TILES
    assert turns.turns(None, enough) is None
    assert turns.turns(None, enough - 1) == 0
    # 128^3 storage chunks: 640^3 (125 tiles) and up measured faster with the GPU compressing,
    # 512^3 (64 tiles: one processing chunk of MIN_BATCH_TILES) no faster
    for side in (640, 768, 1024):
        assert turns.turns(None, math.ceil(side / 128) ** 3) is None
    assert turns.turns(None, (512 // 128) ** 3) == 0
    assert turns.turns(True, 1) is None and turns.turns(2, 1) == 2  # as asked
    assert turns.turns(True) is None  # no limit: the GPU compresses every chunk
    assert turns.turns(False) == 0
    assert turns.turns(3) == 3


def test_turns_are_taken_up_to_the_limit_and_given_back(tmp_path):
    dev = f"test-{tmp_path.name}"
    with turns.turn(dev, 2) as a, turns.turn(dev, 2) as b, turns.turn(dev, 2) as c:
        assert (a, b, c) == (True, True, False)
        with turns.turn(f"{dev}-other", 1) as other:  # another GPU has turns of its own
            assert other
    with turns.turn(dev, 1) as again:
        assert again
    with turns.turn(dev, None) as unlimited, turns.turn(dev, 0) as none:
        assert unlimited and not none


def _hold(dev, taken, release):
    with turns.turn(dev, 1) as mine:
        taken.put(mine)
        release.wait(30)


def test_a_turn_holds_across_processes_and_dies_with_its_holder(tmp_path):
    dev = f"test-{tmp_path.name}"
    ctx = mp.get_context("spawn")
    taken, release = ctx.Queue(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(dev, taken, release))
    holder.start()
    try:
        assert taken.get(timeout=60) is True
        with turns.turn(dev, 1) as mine:
            assert not mine  # the other process has the only turn
    finally:
        holder.kill()  # no release: the kernel drops a dead process's lock
        holder.join()
    with turns.turn(dev, 1) as mine:
        assert mine


def test_a_write_waits_for_a_turn_up_to_its_limit(tmp_path):
    dev = f"test-{tmp_path.name}"
    got: list[tuple[bool, float]] = []

    def wait(seconds):
        t0 = time.monotonic()
        with turns.turn(dev, 1, wait=seconds) as mine:
            got.append((mine, time.monotonic() - t0))

    with turns.turn(dev, 1) as mine:
        assert mine
        late = threading.Thread(target=wait, args=(0.1,))
        late.start()
        late.join()  # gave up while the turn stayed taken
        patient = threading.Thread(target=wait, args=(30.0,))
        patient.start()
        time.sleep(0.2)
    patient.join()  # took the turn once it was given back
    (gave_up, waited), (took, took_after) = got
    assert not gave_up and waited >= 0.1
    assert took and 0.2 <= took_after < 30.0


def test_the_wait_grows_with_the_chunk():
    assert turns.wait_for(0) == 0
    assert turns.wait_for(1024 << 20) == 2 * turns.wait_for(512 << 20) > 0
