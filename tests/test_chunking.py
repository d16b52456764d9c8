import pytest

from tilelabel.chunking import ChunkPlan, forward_steps, plan_for_storage
from tilelabel.resources.gpu import TARGET_VOXELS as GPU_TARGET
from tilelabel.resources.host import TARGET_VOXELS as CPU_TARGET


def plan_for_run(shape, storage, chunks, target, threads, min_tiles=1):
    """The plan of a run on ``threads`` worker threads with the ``target`` of a backend."""
    from tilelabel.chunking import plan_for_run as plan

    return plan(shape, storage, chunks, threads, target, min_tiles)


CUDA, CPU = GPU_TARGET, CPU_TARGET


def test_forward_steps_cover_every_neighbour_once():
    for ndim in (2, 3):
        steps = forward_steps(ndim)
        assert len(steps) == (3**ndim - 1) // 2
        both = set(steps) | {tuple(-s for s in st) for st in steps}
        assert len(both) == 3**ndim - 1


def test_default_plan_groups_storage_chunks_near_cubic():
    plan = plan_for_storage((1000, 1000, 1000), (64, 64, 64), target_voxels=256**3)
    assert plan.max_block_shape() == (256, 256, 256)
    assert plan.grid == (4, 4, 4)
    assert all(sum(c) == 1000 for c in plan.chunks)


def test_requested_chunks_must_be_multiples_of_storage():
    plan = plan_for_storage((100, 70), (10, 10), chunks=(30, 20))
    assert plan.chunks == ((30, 30, 30, 10), (20, 20, 20, 10))
    with pytest.raises(
        ValueError, match="whole multiple of the storage chunk size 10; use e.g. 20"
    ):
        plan_for_storage((100, 70), (10, 10), chunks=(15, 20))


def test_chunk_larger_than_axis_is_clipped():
    plan = plan_for_storage((5, 7), (4, 4), chunks=(8, 64))
    assert plan.chunks == ((5,), (7,))


def test_plan_geometry():
    plan = ChunkPlan((5, 7), ((2, 3), (4, 3)))
    assert list(plan.indices()) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert plan.slices((1, 1)) == (slice(2, 5), slice(4, 7))
    assert plan.neighbour((1, 1), (1, 0)) is None
    assert plan.neighbour((0, 0), (1, 1)) == (1, 1)
    with pytest.raises(ValueError):
        ChunkPlan((5,), ((2, 2),))


def test_run_plan_gives_every_thread_two_chunks_of_small_volumes():
    # 512^3 voxels, 16 threads: at most 2**27 / 32 = 2**22 voxels per chunk
    plan = plan_for_run((512, 512, 512), (64, 64, 64), None, CUDA, 16)
    assert plan.max_block_shape() == (128, 128, 192) and plan.nchunks >= 32
    # a large volume keeps the backend's target (512^3 for cuda, 256^3 for cpu)
    big = plan_for_run((4096, 4096, 4096), (128, 128, 128), None, CUDA, 16)
    assert big.max_block_shape() == (512, 512, 512)
    cpu = plan_for_run((4096, 4096, 4096), (128, 128, 128), None, CPU, 16)
    assert cpu.max_block_shape() == (256, 256, 256)
    # explicit chunks win; a tiny volume still gets its storage chunks
    assert plan_for_run((512,) * 3, (64,) * 3, (256,) * 3, CUDA, 16).nchunks == 8
    assert plan_for_run((8, 8), (4, 4), None, CPU, 64).max_block_shape() == (4, 4)


def test_run_plan_keeps_enough_tiles_for_a_gpu_encoder():
    # 1024^3 in 128^3 tiles, 16 threads: 48 chunks of 24 tiles, or 8 of 64 where the GPU
    # compresses the output (it compresses one chunk's tiles side by side)
    assert plan_for_run((1024,) * 3, (128,) * 3, None, CUDA, 16).nchunks == 48
    gpu = plan_for_run((1024,) * 3, (128,) * 3, None, CUDA, 16, min_tiles=64)
    assert gpu.max_block_shape() == (512, 512, 512) and gpu.nchunks == 8
    # never above the backend's target, however large the tiles
    huge = plan_for_run((2048,) * 3, (256,) * 3, None, CUDA, 16, min_tiles=64)
    assert huge.max_block_shape() == (512, 512, 512)
    # more tiles than the floor where the volume allows two chunks per thread anyway
    small_tiles = plan_for_run((1024,) * 3, (64,) * 3, None, CUDA, 16, min_tiles=64)
    assert all(b >= 256 for b in small_tiles.max_block_shape())
    # explicit chunks win
    assert plan_for_run((1024,) * 3, (128,) * 3, (256,) * 3, CUDA, 16, 64).nchunks == 64
