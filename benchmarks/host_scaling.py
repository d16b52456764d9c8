"""Does this node's host scale with its cores? zstd on P processes at once, no GPU, no disk.

Strong scaling from one GPU to several on one node needs the node's host work (zarr decoding,
encoding and file I/O, a pipeline worker's share of every chunk) to get faster with the second
GPU's cores. This measures that ceiling alone: each of P processes, held to a core of its own
(CPU affinity), compresses the same block of uint32 labels with zarr's codec (numcodecs zstd,
level 0) for ``--seconds``; the table gives the bytes compressed per second by all of them,
and the speed-up over one process. Where 2P processes get no more done than P, no pipeline
run on 2P cores can either.

    python benchmarks/host_scaling.py --procs 1 8 16 24 32 --out DIR

Writes ``host_scaling.json`` and ``host_scaling.md`` to DIR (default: $OUT or benchmarks/out).
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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tilelabel.cores import usable_cores  # noqa: E402
from tilelabel.synth import random_volume  # noqa: E402


def _block(shape, density) -> np.ndarray:
    from scipy import ndimage

    labels, _ = ndimage.label(random_volume(shape, density, seed=1), np.ones((3, 3, 3), bool))
    return labels.astype(np.uint32)


def _worker(core, shape, density, seconds, barrier, results):
    import numcodecs

    if core is not None:
        os.sched_setaffinity(0, {core})
    block = _block(shape, density)
    codec = numcodecs.Zstd(level=0)
    codec.encode(block)  # warm
    barrier.wait()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        codec.encode(block)
        done += block.nbytes
    results.put((done, time.perf_counter() - t0))


def run(procs: int, shape, density, seconds) -> dict:
    ctx = mp.get_context("spawn")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if cores is not None and procs > len(cores):
        raise ValueError(f"{procs} processes, but this process may use {len(cores)} cores")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    ps = [
        ctx.Process(
            target=_worker,
            args=(cores[k] if cores else None, shape, density, seconds, barrier, results),
        )
        for k in range(procs)
    ]
    for p in ps:
        p.start()
    got = [results.get(timeout=seconds + 300) for _ in ps]
    for p in ps:
        p.join()
    rate = sum(n / s for n, s in got)
    return {"procs": procs, "gb_per_s": rate / 1e9, "per_process_gb_per_s": rate / procs / 1e9}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    shape = lambda s: tuple(int(v) for v in s.split(","))  # noqa: E731
    p.add_argument("--shape", type=shape, default=(128, 128, 128))
    p.add_argument("--density", type=float, default=0.2)
    p.add_argument("--seconds", type=float, default=5.0, help="compressing, per run")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()

    rows = []
    for procs in args.procs:
        row = run(procs, args.shape, args.density, args.seconds)
        rows.append(row)
        print(json.dumps(row), flush=True)
    base = next((r for r in rows if r["procs"] == 1), None)
    meta = {
        "date": str(datetime.date.today()),
        "host": platform.node(),
        "cores": usable_cores(),
        "processor": platform.processor() or platform.machine(),
        "shape": args.shape,
        "density": args.density,
        "seconds": args.seconds,
    }
    lines = [
        f"host_scaling: {meta['cores']} cores, {meta['date']}; zstd (numcodecs, level 0) on a "
        f"{args.shape} uint32 label block, d {args.density}, each process on a core of its own",
        "",
        "| processes | GB/s (all) | GB/s per process | speed-up over 1 | efficiency |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        up = r["gb_per_s"] / base["gb_per_s"] if base else None
        lines.append(
            f"| {r['procs']} | {r['gb_per_s']:.2f} | {r['per_process_gb_per_s']:.3f} | "
            + (f"{up:.2f} | {100 * up / r['procs']:.0f} % |" if up else " | |")
        )
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host_scaling.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "host_scaling.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
