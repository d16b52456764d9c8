"""What each worker may hold besides its chunks: the budgets of labels and packed input kept
between the passes."""

from __future__ import annotations

from tilelabel.resources.plan import DEFAULT_LABEL_CHUNKS, label_budget


def test_the_default_label_budget_is_one_chunk_where_chunks_are_no_more_than_threads():
    chunk = 512 << 20
    assert label_budget(None, chunk) == DEFAULT_LABEL_CHUNKS * chunk
    assert DEFAULT_LABEL_CHUNKS == 1
    assert label_budget(None, chunk, 16, 16) == chunk
    assert label_budget(None, chunk, 17, 16) == 0
    assert label_budget(0, chunk) == 0  # asked for: nothing kept
    assert label_budget(8 << 30, 1, 64, 1) == 8 << 30


def test_the_input_budget_holds_32_chunks_for_each_thread_of_a_worker():
    """One worker per GPU labels the chunks that 16 single-threaded workers would share: it
    keeps the bits of as many of them."""
    from tilelabel.chunking import plan_for_run
    from tilelabel.resources.plan import RunPlan

    plan = plan_for_run((1024, 1024, 1024), (128, 128, 128), (128, 128, 128), 8, 1 << 30)
    bits = 128**3 // 8
    for per_worker in (1, 8):
        run = RunPlan.of(plan, 26, 8, None, True, per_worker=per_worker)
        assert run.held(26)[1] == 32 * per_worker * bits  # of 512 chunks
    assert RunPlan.of(plan, 26, 8, None, False, per_worker=8).held(26)[1] == 0
