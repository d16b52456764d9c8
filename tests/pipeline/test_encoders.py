"""GPU encoder turns: node-wide flock turns per device, taken without waiting."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from tilelabel.pipeline import encoders


def test_turns_per_option():
    assert encoders.turns(None) == encoders.DEFAULT_TURNS
    # by default, only an output large enough to repay loading the encoder in every worker
    big = encoders.MIN_BYTES_PER_WORKER
    assert encoders.turns(None, big) == encoders.DEFAULT_TURNS
    assert encoders.turns(None, big - 1) == 0
    # 16 workers, 4-byte labels: measured no faster at 1024^3, faster at 1536^3 and 2048^3
    assert encoders.turns(None, 4 * 1024**3 // 16) == 0
    assert encoders.turns(None, 4 * 1536**3 // 16) == encoders.DEFAULT_TURNS
    assert encoders.turns(True, 1) is None and encoders.turns(2, 1) == 2  # as asked
    assert encoders.turns(True) is None  # no limit: the GPU compresses every chunk
    assert encoders.turns(False) == 0
    assert encoders.turns(3) == 3
    for bad in (-1, 1.5, "2"):
        with pytest.raises(ValueError, match="gpu_encode must be true, false or a number"):
            encoders.turns(bad)


def test_turns_are_taken_up_to_the_limit_and_given_back(tmp_path):
    dev = f"test-{tmp_path.name}"
    with encoders.turn(dev, 2) as a, encoders.turn(dev, 2) as b, encoders.turn(dev, 2) as c:
        assert (a, b, c) == (True, True, False)
        with encoders.turn(f"{dev}-other", 1) as other:  # another GPU has turns of its own
            assert other
    with encoders.turn(dev, 1) as again:
        assert again
    with encoders.turn(dev, None) as unlimited, encoders.turn(dev, 0) as none:
        assert unlimited and not none


def _hold(dev, taken, release):
    with encoders.turn(dev, 1) as mine:
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
        with encoders.turn(dev, 1) as mine:
            assert not mine  # the other process has the only turn
    finally:
        holder.kill()  # no release: the kernel drops a dead process's lock
        holder.join()
    with encoders.turn(dev, 1) as mine:
        assert mine
