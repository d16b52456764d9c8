"""GPU memory that the workers of one cluster keep after label_zarr runs, and what gives it back.

Starts tilelabel's default GPU cluster (one worker per core), labels one volume twice, and after
each run prints, for the five workers holding most, nvidia-smi's bytes for the process, its CuPy
pool (total / free) and the device's free bytes; then frees the pools' blocks, synchronizes the
devices and trims the default stream-ordered pool, printing the same after each. A worker should
hold its CUDA context and its CuPy pool's free blocks, nothing else (RESULTS.md, fifth session).

``--codec-cost``: seconds per 64-tile batch of a 512^3 chunk compressed with nvCOMP, a new codec
each time against one codec reused (this process only, no cluster).

    python benchmarks/worker_gpu_memory.py [--size 1024] [--codec-cost]
"""

from __future__ import annotations

import argparse
import os
import time

from distributed import Client
from pipeline import gpu_processes  # benchmarks/pipeline.py, beside this script

import tilelabel
from tilelabel.pipeline.cluster import cuda_cluster
from tilelabel.synth import write_random_zarr


def state() -> dict:
    import cupy as cp

    pool = cp.get_default_memory_pool()
    return {
        "pid": os.getpid(),
        "pool_total_mib": pool.total_bytes() >> 20,
        "pool_free_mib": pool.free_bytes() >> 20,
        "device_free_mib": cp.cuda.Device().mem_info[0] >> 20,
    }


def free_blocks() -> None:
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()


def synchronize() -> None:
    import cupy as cp

    cp.cuda.runtime.deviceSynchronize()


def trim() -> None:
    import cupy as cp

    rt = cp.cuda.runtime
    rt.memPoolTrimTo(rt.deviceGetDefaultMemPool(cp.cuda.Device().id), 0)


def show(client: Client, tag: str) -> None:
    held = gpu_processes()
    rows = sorted(client.run(state).values(), key=lambda r: -held.get(r["pid"], 0))
    print(f"== {tag}: all processes {sum(held.values())} MiB", flush=True)
    for r in rows[:5]:
        print(f"   {held.get(r['pid'])} MiB {r}", flush=True)


def workers_after_runs(size: int) -> None:
    src, dst = "/tmp/tilelabel-gpumem-in.zarr", "/tmp/tilelabel-gpumem-out.zarr"
    write_random_zarr(src, (size,) * 3, (128,) * 3, 0.05, 1, seed=1, overwrite=True)
    with cuda_cluster(dashboard_address=None, memory_limit=0) as cl, Client(cl) as c:
        show(c, "fresh cluster")
        for k in range(2):
            r = tilelabel.label_zarr(
                src, dst, backend="cuda", client=c, overwrite=True, return_result=True
            )
            print(f"run {k}: {r.summary()}", flush=True)
            show(c, f"after run {k}")
        for name, fn in (
            ("freeing the pools' blocks", free_blocks),
            ("synchronizing", synchronize),
            ("trimming the stream-ordered pool", trim),
        ):
            c.run(fn)
            show(c, f"after {name}")


def codec_cost() -> None:
    import cupy as cp
    import numpy as np
    from nvidia import nvcomp

    from tilelabel.kernels import gpu_codec
    from tilelabel.kernels.tiles import tile_slabs
    from tilelabel.synth import random_volume

    img = random_volume((512,) * 3, 0.05, seed=1)
    labels = cp.asarray((np.arange(img.size, dtype=np.uint32).reshape(img.shape) // 3) * (img > 0))
    stream = cp.cuda.get_current_stream()
    gpu_codec.warm()
    for _ in range(3):
        t = time.perf_counter()
        gpu_codec.zstd_tiles(labels, (128,) * 3)
        print(f"zstd_tiles (a new codec) {time.perf_counter() - t:.4f} s", flush=True)
    tiles = [
        s.reshape(s.shape[0], -1)[k].view(np.uint8)
        for _, s, _ in tile_slabs(labels, (128,) * 3, cp)
        for k in range(s.shape[0])
    ]
    reused = gpu_codec._codec(stream)
    for new in (False, True, False, True, False, True):
        t = time.perf_counter()
        codec = gpu_codec._codec(stream) if new else reused
        codec.encode(nvcomp.as_arrays(tiles, stream.ptr))
        stream.synchronize()
        del codec
        kind = "new codec" if new else "reused codec"
        print(f"encode only, {kind} {time.perf_counter() - t:.4f} s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--codec-cost", action="store_true")
    args = p.parse_args()
    if args.codec_cost:
        codec_cost()
    else:
        workers_after_runs(args.size)


if __name__ == "__main__":
    main()
