"""Which outputs the GPU compresses."""

from __future__ import annotations

import math

from tilelabel.resources import encoding


def test_encodes_per_option():
    assert encoding.encodes(None)  # not known yet
    # by default the GPU compresses every chunk, of an output with enough tiles to repay
    # loading the encoder
    enough = encoding.MIN_OUTPUT_TILES
    assert encoding.encodes(None, enough)
    assert not encoding.encodes(None, enough - 1)
    # 128^3 storage chunks: 640^3 (125 tiles) and up measured faster with the GPU compressing,
    # 512^3 (64 tiles: one processing chunk of MIN_BATCH_TILES) no faster
    for side in (640, 768, 1024):
        assert encoding.encodes(None, math.ceil(side / 128) ** 3)
    assert not encoding.encodes(None, (512 // 128) ** 3)
    assert encoding.encodes(True, 1) and not encoding.encodes(False, 1000)  # as asked
