"""zstd for the output chunks: nvCOMP on the GPU against numcodecs on the host, P processes at once.

One block of labels (``--shape``, labeled from a ``tilelabel.synth`` volume at each density) is
cut into storage tiles (``--tile``) and compressed again and again by P processes started
together, as P pipeline workers would:

- ``gpu``: the CUDA backend's ``encoder.encode_tiles`` as the pipeline calls it (nvCOMP's
  scratch and frames from CuPy's pool);
- ``host``: the tiles as zarr writes them (C-ordered copies, then ``numcodecs.Zstd`` at zarr's
  default level), all-zero tiles left out as on the GPU.

Reports GB/s of uncompressed labels over all processes, the compression ratio, and for the GPU
the growth of one process's CuPy pool in its first encode after the pool was emptied, per byte
of labels: nvCOMP's scratch and the frames.

``--load`` instead times one encoding process while P - 1 others load the node as pipeline
workers do, to tell which contention slows the GPU's encoder inside the pipeline:

- ``host``: each other process compresses the tiles with numcodecs on a pool of one thread
  per core, as a worker's codec pool does in the writing pass (the cores oversubscribed);
- ``gpu``: each other process labels the block on the GPU, again and again (the GPU
  time-sliced between processes).

    python benchmarks/gpu_encode.py --shape 256,512,512 --procs 1 4 16 --out DIR
    python benchmarks/gpu_encode.py --procs 16 --encoders gpu --load none host gpu

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``gpu_encode_<machine>[_load]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import default_name, device_tag, record  # noqa: E402

from tilelabel.kernels.cuda.tiles import tile_slabs  # noqa: E402
from tilelabel.synth import random_volume  # noqa: E402

ENCODERS = ("gpu", "host")
LOADS = ("none", "host", "gpu")


def _labels(shape, density):
    import cupy as cp

    from tilelabel.kernels.backends import get_backend

    backend = get_backend("cuda")
    labels, n = backend.label(random_volume(shape, density, seed=1), 26, np.uint32)
    cp.cuda.get_current_stream().synchronize()
    return backend, labels, np.arange(n + 1, dtype=np.uint32)


def _host_encoder(labels_host, tile):
    import numcodecs

    codec = numcodecs.Zstd(level=0)

    def encode():
        frames = {}
        for indices, slab, nonzero in tile_slabs(labels_host, tile, np):
            for k, idx in enumerate(indices):
                if nonzero[k]:
                    frames[idx] = codec.encode(slab[k])
        return frames

    return encode


def _worker(encoder, shape, density, tile, reps, barrier, results):
    import cupy as cp

    backend, labels, lut = _labels(shape, density)
    growth = 0
    if encoder == "host":
        encode = _host_encoder(cp.asnumpy(labels), tile)
    else:

        def encode():
            return backend.encoder.encode_tiles(labels, lut, tile, "zstd")

        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        before = pool.total_bytes()
        encode()
        growth = pool.total_bytes() - before
    frames = encode()  # warm: codec, pinned pool, caches
    barrier.wait()
    t0 = time.perf_counter()
    for _ in range(reps):
        encode()
    seconds = time.perf_counter() - t0
    results.put(
        {
            "seconds": seconds,
            "in_bytes": int(labels.nbytes) * reps,
            "out_bytes": sum(len(f) for f in frames.values()),
            "growth": growth,
        }
    )


def _loader(load, shape, density, tile, barrier, stop):
    """Keep the node busy as a pipeline worker would, until ``stop`` (see ``--load``)."""
    import cupy as cp

    backend, labels, _ = _labels(shape, density)
    if load == "gpu":
        block = random_volume(shape, density, seed=2)
        barrier.wait()
        while not stop.is_set():
            backend.label(block, 26, np.uint32)
            cp.cuda.get_current_stream().synchronize()
        return
    import numcodecs

    codec = numcodecs.Zstd(level=0)
    tiles = [
        slab[k].copy()
        for _, slab, nonzero in tile_slabs(cp.asnumpy(labels), tile, np)
        for k in range(len(slab))
        if nonzero[k]
    ]
    from tilelabel.settings import codec_threads

    with ThreadPoolExecutor(codec_threads()) as pool:
        barrier.wait()
        while not stop.is_set():
            list(pool.map(codec.encode, tiles))


def run(encoder: str, procs: int, shape, density, tile, reps, load: str | None = None) -> dict:
    """``encoder`` in ``procs`` processes started together, every one timed; with ``load``, one
    timed while the other ``procs - 1`` apply that load (``"none"``: the one alone)."""
    ctx = mp.get_context("spawn")
    timed = procs if load is None else 1
    others = 0 if load in (None, "none") else procs - 1
    barrier, results, stop = ctx.Barrier(timed + others), ctx.Queue(), ctx.Event()
    ps = [
        ctx.Process(target=_worker, args=(encoder, shape, density, tile, reps, barrier, results))
        for _ in range(timed)
    ]
    ps += [
        ctx.Process(target=_loader, args=(load, shape, density, tile, barrier, stop))
        for _ in range(others)
    ]
    t0 = time.perf_counter()
    for p in ps:
        p.start()
    got = [results.get(timeout=600) for _ in range(timed)]
    stop.set()
    for p in ps:
        p.join()
    wall = max(r["seconds"] for r in got)
    in_bytes = sum(r["in_bytes"] for r in got)
    nbytes = int(np.prod(shape)) * 4
    return {
        "encoder": encoder,
        "load": load,
        "procs": timed + others,
        "density": density,
        "gb_per_s": in_bytes / wall / 1e9,
        "ratio": nbytes / got[0]["out_bytes"],
        "pool_growth_per_byte": got[0]["growth"] / nbytes,
        "seconds": wall,
        "total_seconds": time.perf_counter() - t0,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shape = lambda s: tuple(int(v) for v in s.split(","))  # noqa: E731
    p.add_argument("--shape", type=shape, default=(256, 512, 512))
    p.add_argument("--tile", type=shape, default=(128, 128, 128))
    p.add_argument("--densities", type=float, nargs="+", default=[0.05, 0.2])
    p.add_argument("--procs", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--encoders", nargs="+", default=list(ENCODERS), choices=ENCODERS)
    p.add_argument("--reps", type=int, default=10, help="encodes per process, timed")
    p.add_argument(
        "--load",
        nargs="+",
        choices=LOADS,
        help="time one encoding process under each load by the other P - 1 (see above)",
    )
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = p.parse_args()

    import cupy as cp

    device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    rows = []
    for density in args.densities:
        for procs in args.procs:
            for encoder, load in (
                (e, load) for e in args.encoders for load in (args.load or [None])
            ):
                try:
                    row = run(encoder, procs, args.shape, density, args.tile, args.reps, load)
                except Exception as e:  # e.g. out of GPU memory: record it, go on
                    row = {
                        "encoder": encoder,
                        "load": load,
                        "procs": procs,
                        "density": density,
                        "error": repr(e),
                    }
                rows.append(row)
                print(json.dumps(row), flush=True)

    head = (
        f"gpu_encode: {device}, {os.cpu_count()} cores, {platform.node()}, "
        f"{datetime.date.today()}; block {args.shape} in tiles {args.tile}, {args.reps} encodes "
        "per process"
    )
    lines = [
        "| density | processes | encoder | load by the others | GB/s (timed processes) | ratio "
        "| pool growth / byte |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        head = f"| {r['density']} | {r['procs']} | {r['encoder']} | {r.get('load') or ''} |"
        if "error" in r:
            lines.append(f"{head} {r['error']} | | |")
            continue
        growth = f"{r['pool_growth_per_byte']:.2f}" if r["encoder"] != "host" else ""
        lines.append(f"{head} {r['gb_per_s']:.2f} | {r['ratio']:.1f} | {growth} |")
    table = "\n".join(lines)
    print(head + "\n\n" + table)
    record(
        args.out,
        args.name or default_name("gpu_encode", device_tag(), "load" if args.load else ""),
        title="nvCOMP against the host's zstd",
        rows=rows,
        markdown=table,
        args=args,
        machine={"gpu": device, "cores": os.cpu_count(), "host": platform.node()},
        notes=(
            f"One block of uint32 labels {args.shape} cut into storage tiles {args.tile}, "
            f"compressed {args.reps} times by each of P processes started together; GB/s of "
            "uncompressed labels over all the timed processes, the compression ratio, and the "
            "growth of one process's CuPy pool in its first encode, per byte of labels."
        ),
    )


if __name__ == "__main__":
    main()
