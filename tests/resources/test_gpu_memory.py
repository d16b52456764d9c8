"""Whether a run fits its GPUs: the check against what workers report, and what a run gives up.

The GPUs here are what workers would report (bytes needed and free per worker): the decisions
are arithmetic on those reports. The same decisions on a real GPU whose memory is taken are in
tests/pipeline/test_gpu_pipeline.py.
"""

from __future__ import annotations

import functools
import logging
import math

import pytest

from tilelabel.chunking import plan_for_run
from tilelabel.resources import RunPlan, gpu_memory
from tilelabel.resources.encoding import MIN_BATCH_TILES
from tilelabel.resources.gpu import TARGET_VOXELS
from tilelabel.resources.gpu_memory import shortfall
from tilelabel.resources.host import TARGET_VOXELS as CPU_TARGET


def fit(ask, planned, conn, threads, encode, keep_labels, keep_input, may_drop, may_shrink=False):
    return gpu_memory.first_that_fits(
        check=ask,
        chunks_for=planned,
        connectivity=conn,
        threads=threads,
        codec="zstd" if encode else None,
        keep_labels=keep_labels,
        keep_input=keep_input,
        may_drop_encoder=may_drop,
        may_shrink=may_shrink,
    )


def test_gpu_memory_check_counts_every_thread_sharing_a_gpu():
    gib = 1 << 30
    block, storage = (512, 512, 512), (128, 128, 128)
    # one worker, one thread: 2 GiB needed, 3 GiB free
    assert shortfall({"a": (2 * gib, 3 * gib, 0, "g0")}, {"a": 1}, block, storage) is None
    # four single-threaded workers on one GPU: 8 GiB needed; their pools' free blocks count
    four = {w: (2 * gib, 3 * gib, 0, "g0") for w in "abcd"}
    msg = shortfall(four, dict.fromkeys("abcd", 1), block, storage)
    assert "4 worker threads share a GPU with 3.0 GiB free" in msg
    assert "use --chunks 256,256,256 or smaller (or fewer worker threads per GPU)" in msg
    pooled = {w: (2 * gib, 3 * gib, 2 * gib, "g0") for w in "abcd"}
    assert shortfall(pooled, dict.fromkeys("abcd", 1), block, storage) is None
    # the same four workers on four GPUs fit; two threads each on one GPU do not
    spread = {w: (2 * gib, 3 * gib, 0, f"g{i}") for i, w in enumerate("abcd")}
    assert shortfall(spread, dict.fromkeys("abcd", 1), block, storage) is None
    assert "2 worker threads" in shortfall(
        spread, {**dict.fromkeys("abcd", 1), "c": 2}, block, storage
    )
    # what each worker keeps between the passes counts once per worker
    assert shortfall(spread, dict.fromkeys("abcd", 1), block, storage, gib) is None
    assert shortfall(spread, dict.fromkeys("abcd", 1), block, storage, gib + 1)
    assert shortfall(pooled, dict.fromkeys("abcd", 1), block, storage, gib // 2) is None
    assert shortfall(pooled, dict.fromkeys("abcd", 1), block, storage, gib)
    # a lone thread gets the plain message
    alone = shortfall({"a": (4 * gib, 3 * gib, 0, "g0")}, {"a": 1}, block, storage)
    assert "a worker's GPU has 3.0 GiB free" in alone and "fewer worker" not in alone


def test_gpu_memory_check_counts_the_encoder_for_every_thread():
    gib = 1 << 30
    block, storage = (512, 512, 512), (128, 128, 128)
    four = {"w": (gib, 12 * gib, 0, "g0")}
    threads = {"w": 4}
    # 4 x 1 GiB to label; 2 GiB more to compress for each thread where the GPU compresses
    assert shortfall(four, threads, block, storage, 0, 0) is None
    assert shortfall(four, threads, block, storage, 0, 2 * gib) is None
    msg = shortfall(four, threads, block, storage, 0, 2 * gib + 1)
    assert "(and 2.0 GiB more to compress it there)" in msg
    assert msg.endswith("(or fewer worker threads per GPU)")
    one = {"a": (gib, 3 * gib, 0, "g0")}
    assert shortfall(one, {"a": 1}, block, storage, 0, 2 * gib) is None


#: bytes per voxel of the largest chunk that a synthetic GPU needs per thread to label it, and
#: more to compress it
NEED, ENCODE = 15, 45


def gpu(free: int, storage: tuple[int, ...], threads: int = 1):
    """``fit``'s ``ask`` for one worker of ``threads`` threads on a GPU with ``free`` bytes."""

    def ask(plan, encode):
        voxels = math.prod(plan.max_block_shape())
        report = {"w": (NEED * voxels, free, 0, "g0")}
        extra = ENCODE * voxels if encode else 0
        block = plan.max_block_shape()
        return functools.partial(shortfall, report, {"w": threads}, block, storage, encode=extra)

    return ask


def planner(shape, storage, threads, chunks=None):
    def planned(encoding, largest=None):
        tiles = MIN_BATCH_TILES if encoding else 1
        return plan_for_run(shape, storage, chunks, threads, largest or TARGET_VOXELS, tiles)

    return planned


def test_run_gives_up_default_labels_then_gpu_compression_to_fit(caplog):
    # eight chunks for eight threads: the default keeps each one's labels
    shape, storage, threads = (1024,) * 3, (128,) * 3, 8
    planned = planner(shape, storage, threads, (512,) * 3)
    v = 512**3
    need, encode = threads * NEED * v, threads * ENCODE * v  # every thread may compress
    labels, bits = 4 * v, v  # a chunk's labels, eight chunks' bits

    def run(free, keep_labels=None, may_drop_encoder=True):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tilelabel"):
            got = fit(
                gpu(free, storage, threads),
                planned,
                26,
                threads,
                True,
                keep_labels,
                True,
                may_drop_encoder,
            )
        return got.encode, got.label_budget, " ".join(r.getMessage() for r in caplog.records)

    assert run(need + encode + bits + labels) == (True, labels, "")
    on_gpu, budget, said = run(need + encode + bits + labels - 1)
    assert (on_gpu, budget) == (True, 0) and "keeps no chunk labels between the passes:" in said
    on_gpu, budget, said = run(need + encode + bits - 1)
    assert (on_gpu, budget) == (False, labels) and "so it compresses the output on the host" in said
    on_gpu, budget, said = run(need + bits + labels - 1)
    assert (on_gpu, budget) == (False, 0)
    assert "keeps no chunk labels between the passes and compresses the output on the host" in said
    assert "needs about 1.9 GiB of GPU memory per worker thread" in said  # with the defaults
    with pytest.raises(ValueError, match="use --chunks 384,384,384 or smaller"):
        run(need + bits - 1)
    # what the user asked for by name is not given up
    assert run(need + encode + bits - 1, keep_labels=labels)[:2] == (False, labels)
    with pytest.raises(ValueError, match="each worker keeps 0.6 GiB between the passes"):
        run(need + bits + labels - 1, keep_labels=labels)
    assert run(need + encode + bits, may_drop_encoder=False)[:2] == (True, 0)
    with pytest.raises(ValueError, match=r"\(and 5.6 GiB more to compress it there\)"):
        run(need + encode + bits - 1, may_drop_encoder=False)


def test_run_without_the_encoder_is_planned_again():
    """Without the GPU compressing output, chunks need not hold many tiles: a small output gets
    smaller chunks again, which may fit where the encoder's did not."""
    shape, storage, threads = (512,) * 3, (64,) * 3, 8
    planned = planner(shape, storage, threads)
    big, small = planned(True), planned(False)
    assert big.max_block_shape() == (256, 256, 256) and small.nchunks > big.nchunks
    v = math.prod(small.max_block_shape())
    free = threads * NEED * v
    got = fit(gpu(free, storage, threads), planned, 26, threads, True, None, False, True)
    assert got.chunks == small and not got.encode and got.label_budget == 0


def test_cpu_runs_keep_their_budgets():
    plan = plan_for_run((64, 64, 64), (16, 16, 16), None, 2, CPU_TARGET)
    v = math.prod(plan.max_block_shape())
    assert plan.nchunks == 8
    assert RunPlan.of(plan, 26, 8, None, True) == RunPlan(plan, 4 * v, 4 * v)
    assert RunPlan.of(plan, 26, 7, None, True) == RunPlan(plan, 0, 4 * v)  # more chunks: none
    assert RunPlan.of(plan, 26, 2, 5, False).held(26) == (5, 0)


def test_default_chunks_shrink_until_the_run_fits(caplog):
    """16 threads on a GPU with room for 16 chunks of 256^3 and no more: the default's 512^3
    chunks are halved until they fit, without the encoder; named chunks are refused."""
    shape, storage, threads = (2048,) * 3, (128,) * 3, 16
    free = threads * NEED * 256**3 + 4 * 256**3  # the chunks, and each worker's bits

    def run(chunks=None, may_drop_encoder=True):
        planned = planner(shape, storage, threads, chunks)
        ask = gpu(free, storage, threads)
        return fit(
            ask, planned, 26, threads, True, None, True, may_drop_encoder, may_shrink=chunks is None
        )

    with caplog.at_level(logging.WARNING, logger="tilelabel"):
        got = run()
    assert got.chunks.max_block_shape() == (256, 256, 256) and not got.encode
    assert got.label_budget == 0  # 512 chunks for 16 threads
    said = caplog.records[-1].getMessage()
    assert "compresses the output on the host and labels in chunks of up to (256, 256, 256)" in said
    assert "GiB free; use" not in said and said.endswith("share a GPU with 3.8 GiB free")
    with pytest.raises(ValueError, match="use --chunks 128,128,128 or smaller"):  # with a margin
        run(chunks=(512,) * 3)
    # the encoder named by the user stays, in chunks small enough for it beside the rest
    kept = run(may_drop_encoder=False)
    v = math.prod(kept.chunks.max_block_shape())
    assert kept.encode and v < 256**3
    assert threads * (NEED + ENCODE) * v + 4 * v <= free


def test_shrink_to_fit_keeps_storage_multiples():
    from tilelabel.resources.gpu_memory import shrink_to_fit

    fit = shrink_to_fit((1024, 1024, 1024), (64, 64, 64), 0.3)
    assert all(f % 64 == 0 for f in fit)
    assert fit[0] * fit[1] * fit[2] <= 0.3 * 1024**3
    assert shrink_to_fit((1024, 1024, 1024), (128, 128, 128), 0.001) == (128, 128, 128)
