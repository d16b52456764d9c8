"""The labeling pass's chunk tasks without dask: P processes of T threads over one volume.

Each process takes every P-th processing chunk of a zarr volume and runs the pipeline's own
labeling task on it (``summary_task``: read the compressed chunks, decode on the GPU, label,
cut the faces, count the rows), T chunks at a time in a thread pool. Every process first runs
T chunks to warm up (kernels, nvCOMP, CuPy's pools); then all start together, and the row's
time is the slowest process's.

With ``--dask``, each shape's tasks also run on a ``LocalCluster`` of P workers of T threads,
all submitted at once as the labeling pass submits them (without the merge behind it).
Beside ``benchmarks/pipeline.py``'s ``tilelabel-gpu@WxT`` rows this tells whether a gap
between one worker of 8 threads and two of 4 lies in tilelabel's task code (it shows in the
thread pools too), in the dask worker around it (only in its rows), or in the rest of the
pipeline's graph (in neither).

    python benchmarks/chunk_threads.py --size 2048 --density 0.05 --shapes 1x8 2x4 1x16 2x8
    python benchmarks/chunk_threads.py --size 2048 --density 0.05 --shapes 1x8 2x4 --dask

The input is ``tilelabel.synth``'s random volume in 128³ zstd chunks, as ``pipeline.py``
writes it. Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default:
$OUT or benchmarks/out); NAME: ``--name``, by default
``chunk_threads_<machine>_<size>_d<density>[_dask]``.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import multiprocessing as mp
import os
import queue
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import default_name, device_tag, record  # noqa: E402


def _task(url: str, chunk: int, idx: tuple[int, ...], backend: str) -> float:
    """Seconds the labeling task of chunk ``idx`` of ``url`` takes here."""
    from tilelabel.connectivity import full_connectivity
    from tilelabel.pipeline.local import Labeler, summary_task
    from tilelabel.storage.arrays import ZarrSource

    plan = _plan(url, chunk)
    labeler = Labeler(backend, full_connectivity(plan.ndim))
    t0 = time.perf_counter()
    summary_task(ZarrSource(url), chunk=plan.chunk(idx), labeler=labeler)
    return time.perf_counter() - t0


def _process(url, chunk, procs, rank, threads, backend, start, results) -> None:
    """Label this process's share of the chunks (every ``procs``-th from ``rank``) on
    ``threads`` threads, after a warm-up; put (seconds, CPU seconds, mean task seconds)."""
    import numpy as np

    mine = _chunks(url, chunk)[rank::procs]
    task = functools.partial(_task, url, chunk, backend=backend)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(task, mine[:threads]))
        start.wait()
        t0, c0 = time.perf_counter(), time.process_time()
        per_task = list(pool.map(task, mine))
        results.put((time.perf_counter() - t0, time.process_time() - c0, float(np.mean(per_task))))


@functools.cache
def _plan(url: str, chunk: int):
    """``url``'s processing chunks of edge ``chunk`` (a :class:`ChunkPlan`), read once per
    process: the tasks time the labeling, not the array's metadata."""
    import zarr

    from tilelabel.chunking import ChunkPlan, regular_chunks

    shape = zarr.open_array(url, mode="r").shape
    return ChunkPlan(tuple(shape), tuple(regular_chunks(s, chunk) for s in shape))


def _chunks(url: str, chunk: int) -> list[tuple[int, ...]]:
    """The indices of ``url``'s processing chunks of edge ``chunk``."""
    return list(_plan(url, chunk).indices())


def run_in_dask(url: str, chunk: int, procs: int, threads: int, backend: str) -> dict:
    """One row: the same tasks on a ``LocalCluster`` of ``procs`` workers of ``threads``
    threads (all seeing GPU 0), submitted at once, as the pipeline's labeling pass is."""
    from distributed import Client, LocalCluster, wait

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")  # the worker processes inherit it
    with (
        LocalCluster(
            n_workers=procs, threads_per_worker=threads, memory_limit=0, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        idxs = _chunks(url, chunk)
        warm = client.map(
            _task, [url] * procs * threads, chunk=chunk, idx=idxs[0], backend=backend, pure=False
        )
        wait(warm)
        t0 = time.perf_counter()
        cpu0 = sum(client.run(time.process_time).values())
        per_task = client.gather(
            client.map(
                _task,
                [url] * len(idxs),
                [chunk] * len(idxs),
                idxs,
                [backend] * len(idxs),
                pure=False,
            )
        )
        seconds = time.perf_counter() - t0
        cpu = sum(client.run(time.process_time).values()) - cpu0
    return {
        "processes": procs,
        "threads": threads,
        "dask": True,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 2),
        "task_ms": round(1e3 * sum(per_task) / len(per_task), 1),
    }


def run_shape(url: str, chunk: int, procs: int, threads: int, backend: str) -> dict:
    """One row: ``procs`` processes of ``threads`` threads over every chunk of ``url``."""
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(target=_process, args=(url, chunk, procs, r, threads, backend, start, results))
        for r in range(procs)
    ]
    for w in workers:
        w.start()
    got = []
    while len(got) < procs:  # a process that died would leave this waiting: the row fails
        try:
            got.append(results.get(timeout=1))
        except queue.Empty:
            if any(w.exitcode not in (None, 0) for w in workers):
                for w in workers:
                    w.kill()
                raise RuntimeError(f"a process of {procs}x{threads} failed") from None
    for w in workers:
        w.join()
    return {
        "processes": procs,
        "threads": threads,
        "dask": False,
        "seconds": round(max(g[0] for g in got), 3),
        "cpu_seconds": round(sum(g[1] for g in got), 2),
        "task_ms": round(1e3 * sum(g[2] for g in got) / procs, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--density", type=float, default=0.05)
    p.add_argument("--chunk", type=int, default=512, help="processing chunk edge")
    p.add_argument("--shapes", nargs="+", default=["1x8", "2x4", "1x16", "2x8"], help="PxT")
    p.add_argument("--backend", default="cuda")
    p.add_argument(
        "--dask",
        action="store_true",
        help="also run every shape's tasks on a LocalCluster of P workers of T threads",
    )
    p.add_argument("--workdir", default=os.environ.get("TMPDIR", "/tmp") + "/tilelabel-bench")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = p.parse_args()

    from tilelabel import __version__
    from tilelabel.synth import write_random_zarr

    url = str(Path(args.workdir) / f"in-{args.size}-{args.density}-128.zarr")
    if not Path(url + ".complete").exists():  # pipeline.py's input, where it left one
        shape = (args.size,) * 3
        write_random_zarr(url, shape, (128,) * 3, args.density, 1, seed=args.size, overwrite=True)
        Path(url + ".complete").touch()
    rows = []
    for spec in args.shapes:
        procs, threads = map(int, spec.split("x"))
        row = {"size": args.size, "density": args.density, "chunk": args.chunk}
        for run in (run_shape, run_in_dask) if args.dask else (run_shape,):
            rows.append(row | run(url, args.chunk, procs, threads, args.backend))
            print(json.dumps(rows[-1]), flush=True)

    device = "cpu"
    if args.backend == "cuda":
        import cupy as cp

        device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    meta = {
        "device": device,
        "cores": os.cpu_count(),
        "date": str(datetime.date.today()),
        "version": __version__,
        "backend": args.backend,
    }
    head = f"{device}, {meta['cores']} cores, {meta['date']}, tilelabel {__version__}"
    lines = [
        "| size | density | processes × threads | in | s | CPU s | ms / task |",
        "|---|---|---|---|---:|---:|---:|",
        *(
            f"| {r['size']}³ | {r['density']} | {r['processes']} × {r['threads']} | "
            f"{'dask workers' if r['dask'] else 'thread pools'} | "
            f"{r['seconds']:.2f} | {r['cpu_seconds']:.1f} | {r['task_ms']:.0f} |"
            for r in rows
        ),
    ]
    print(head + "\n\n" + "\n".join(lines))
    dask = "dask" if args.dask else ""
    name = args.name or default_name(
        "chunk_threads", device_tag(), args.size, f"d{args.density}", dask
    )
    record(
        args.out,
        name,
        title="The labeling task in thread pools and dask workers",
        rows=rows,
        markdown="\n".join(lines),
        args=args,
        machine=meta,
        notes=(
            f"tilelabel {__version__}, {args.backend} backend: the labeling pass's task "
            f"(`summary_task`) on every {args.chunk}³ processing chunk of a random volume in 128³ "
            "zstd chunks, P processes of T threads (or, in dask workers, a `LocalCluster` of P "
            "workers of T threads); seconds of the slowest process, CPU seconds of all, and the "
            "mean time of one task."
        ),
    )


if __name__ == "__main__":
    main()
