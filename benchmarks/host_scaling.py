"""Does this node's host scale with its cores? P processes at once, no GPU, no disk.

Strong scaling from one GPU to several on one node needs the node's host work (zarr decoding,
encoding and file I/O, a pipeline worker's share of every chunk) to get faster with the second
GPU's cores. This measures that ceiling alone: each of P processes, held to a core of its own
(CPU affinity), compresses the same block of uint32 labels with zarr's codec (numcodecs zstd,
level 0) for ``--seconds``; the table gives the bytes compressed per second by all of them,
and the speed-up over one process. Where 2P processes get no more done than P, no pipeline
run on 2P cores can either.

``--work`` picks what each process repeats: ``zstd`` (the above); ``fresh``, writing every
byte of a newly allocated ``--mib`` MiB array, as every pipeline chunk does with its decoded
input and its labels (arrays this large are mapped fresh from the kernel, so every page
faults and is zeroed first); ``reused``, the same writes into one array allocated once.
``fresh`` against ``reused`` is the cost of those page faults, and how it scales.

    python benchmarks/host_scaling.py --procs 1 8 16 24 32 --out DIR
    python benchmarks/host_scaling.py --work fresh --procs 1 4 8 16 --out DIR

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


def _task(work: str, shape, density, mib: int):
    """One repetition of ``work`` (a function of no arguments) and the bytes it handles."""
    if work == "zstd":
        import numcodecs

        block, codec = _block(shape, density), numcodecs.Zstd(level=0)
        return (lambda: codec.encode(block)), block.nbytes
    n = mib << 20
    if work == "fresh":
        return (lambda: np.empty(n, np.uint8).fill(1)), n
    if work == "reused":
        buf = np.empty(n, np.uint8)
        return (lambda: buf.fill(1)), n
    raise ValueError(f"unknown work {work!r}")


def _worker(core, work, shape, density, mib, seconds, barrier, results):
    if core is not None:
        os.sched_setaffinity(0, {core})
    task, nbytes = _task(work, shape, density, mib)
    task()  # warm
    barrier.wait()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        task()
        done += nbytes
    results.put((done, time.perf_counter() - t0))


def run(procs: int, shape, density, seconds, work: str = "zstd", mib: int = 512) -> dict:
    ctx = mp.get_context("spawn")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if cores is not None and procs > len(cores):
        raise ValueError(f"{procs} processes, but this process may use {len(cores)} cores")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    ps = [
        ctx.Process(
            target=_worker,
            args=(
                cores[k] if cores else None,
                work,
                shape,
                density,
                mib,
                seconds,
                barrier,
                results,
            ),
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
    p.add_argument("--work", choices=("zstd", "fresh", "reused"), default="zstd")
    p.add_argument("--mib", type=int, default=512, help="array size of fresh / reused")
    p.add_argument("--seconds", type=float, default=5.0, help="working, per run")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()

    rows = []
    for procs in args.procs:
        row = run(procs, args.shape, args.density, args.seconds, args.work, args.mib)
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
        "work": args.work,
        "mib": args.mib,
        "transparent_hugepage": _thp(),
    }
    what = {
        "zstd": f"zstd (numcodecs, level 0) on a {args.shape} uint32 label block, d {args.density}",
        "fresh": f"writing a newly allocated {args.mib} MiB array",
        "reused": f"writing one {args.mib} MiB array allocated once",
    }[args.work]
    lines = [
        f"host_scaling: {meta['cores']} cores, {meta['date']}; {what}, each process on a core "
        f"of its own (transparent huge pages: {meta['transparent_hugepage']})",
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
    stem = "host_scaling" if args.work == "zstd" else f"host_scaling_{args.work}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / f"{stem}.md").write_text(table + "\n")


def _thp() -> str | None:
    """The kernel's transparent huge page mode (the bracketed word), where it says."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else text.strip()


if __name__ == "__main__":
    main()
