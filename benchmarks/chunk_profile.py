"""Where one processing chunk's time goes, step by step, in the pipeline's two passes.

For each backend, one chunk of a zarr volume is taken through the steps a pipeline task does:
read (zarr decode), the labeling pass (``summarize``: label + faces + keys + row counts) and the
relabel pass (label again, LUT, back to the host) and the write (zarr encode), each timed alone
(median of ``--repeat``); then ``--threads`` chunks run at once in as many threads, as a worker
runs them, against a plain copy of the same chunks (read uint8, write uint32), to show which
step stops scaling with threads.

    python benchmarks/chunk_profile.py --size 1024 --chunk 512 --threads 1 8 16 --backend cuda

Writes ``chunk_profile.json`` to --out (default: $OUT or benchmarks/out).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zarr  # noqa: E402

from tilelabel.pipeline import numbering  # noqa: E402
from tilelabel.pipeline.graph import relabel  # noqa: E402
from tilelabel.pipeline.local import label_block, summarize  # noqa: E402
from tilelabel.pipeline.plan import plan_for_storage  # noqa: E402
from tilelabel.pipeline.zarr_io import ZarrSource, ZarrTarget  # noqa: E402
from tilelabel.synth import write_random_zarr  # noqa: E402


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


class Sampler:
    """Where the pool's threads are, every 2 ms: the innermost frame of each stack, and the
    innermost frame in tilelabel's own code (a poor man's profiler, for finding what stops
    scaling with threads)."""

    def __init__(self, prefix: str):
        import collections
        import threading

        self.prefix = prefix
        self.inner = collections.Counter()
        self.ours = collections.Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        import threading

        while not self.stop.wait(0.002):
            names = {t.ident: t.name for t in threading.enumerate()}
            for tid, frame in sys._current_frames().items():
                if not names.get(tid, "").startswith(self.prefix):
                    continue
                f = frame
                self.inner[f"{Path(f.f_code.co_filename).name}:{f.f_code.co_name}"] += 1
                while f is not None and "tilelabel" not in f.f_code.co_filename:
                    f = f.f_back
                if f is not None:
                    name = f"{Path(f.f_code.co_filename).name}:{f.f_lineno} {f.f_code.co_name}"
                    self.ours[name] += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def report(self, top: int = 8) -> dict:
        total = sum(self.inner.values()) or 1
        out = {}
        for title, counter in (("innermost", self.inner), ("in tilelabel", self.ours)):
            out[title] = [(k, round(v / total, 3)) for k, v in counter.most_common(top)]
            print(f"      {title}: " + ", ".join(f"{k} {v:.0%}" for k, v in out[title]))
        return out


def identity_spec(n: int) -> numbering.LutSpec:
    """A LUT spec that maps local label i to i (the numbering's cost without a merge)."""
    none = np.empty(0, np.int64)
    one_row = np.array([n], np.int64)  # every label's first voxel in one row, at offset 0
    return numbering.LutSpec.of(n, one_row, np.zeros(1, np.int64), none, none, none)


def profile_backend(backend: str, plan, source: ZarrSource, target: ZarrTarget, args) -> list:
    """Rows of (step or pass, threads, seconds) for one backend."""
    shape = plan.shape
    idxs = list(plan.indices())
    rows = []
    idx = idxs[0]
    sl = plan.slices(idx)
    args_sum = (
        f"chunk {idx}",
        plan.offset(idx),
        shape,
        tuple((True, True) for _ in range(3)),
        backend,
        26,
        None,
    )
    block = source(sl)
    summarize(block, *args_sum)  # warm-up: kernels compiled and loaded
    n = {i: label_block(source(plan.slices(i)), backend, 26, None)[1] for i in idxs}
    u32 = np.dtype(np.uint32)
    out = relabel(block, identity_spec(n[idx]), backend, 26, None, u32)
    step = {
        "read": lambda: source(sl),
        "label": lambda: label_block(block, backend, 26, None),
        "summarize": lambda: summarize(block, *args_sum),
        "relabel": lambda: relabel(block, identity_spec(n[idx]), backend, 26, None, u32),
        "write": lambda: target(sl, out),
        "write 0/1": lambda: target(sl, block.astype(np.uint32)),
    }
    if backend == "cuda":  # the transfers alone, pageable host memory as the pipeline has it
        import cupy as cp

        labels_d = cp.asarray(out)
        step["d2h labels"] = lambda: cp.asnumpy(labels_d)

        def sync():
            cp.cuda.Device().synchronize()

        step["h2d input"] = lambda: (cp.asarray(block), sync())
    for name, fn in step.items():
        s = median_time(fn, args.repeat)
        rows.append({"backend": backend, "what": f"step: {name}", "threads": 1, "s": s})
        print(f"{backend:5s} step {name:10s} {s * 1e3:9.1f} ms", flush=True)

    def pass1(i):
        summarize(source(plan.slices(i)), *args_sum)

    def pass2(i):
        blk = source(plan.slices(i))
        spec = identity_spec(n[i])
        target(plan.slices(i), relabel(blk, spec, backend, 26, None, u32, staging=True))

    def copy(i):
        target(plan.slices(i), source(plan.slices(i)).astype(np.uint32))

    for threads in args.threads:
        chosen = (idxs * threads)[:threads]  # one chunk per thread
        for name, fn in (("labeling pass", pass1), ("relabel+write", pass2), ("copy", copy)):
            with ThreadPoolExecutor(threads, "profiled") as ex, Sampler("profiled") as sampler:
                t = time.perf_counter()
                list(ex.map(fn, chosen))
                s = time.perf_counter() - t
            print(f"{backend:5s} {threads:3d} threads x 1 chunk: {name:14s} {s:7.2f} s", flush=True)
            where = sampler.report() if args.sample else None
            rows.append(
                {"backend": backend, "what": name, "threads": threads, "s": s, "where": where}
            )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--chunk", type=int, default=512)
    p.add_argument("--storage-chunk", type=int, default=128)
    p.add_argument("--density", type=float, default=0.2)
    p.add_argument("--backend", nargs="+", default=["cuda"])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sample", action="store_true", help="print where the threads spend time")
    p.add_argument("--workdir", default=os.environ.get("TMPDIR", "/tmp") + "/tilelabel-prof")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    shape = (args.size,) * 3
    src = str(work / "in.zarr")
    write_random_zarr(
        src, shape, (args.storage_chunk,) * 3, args.density, 1, seed=1, overwrite=True
    )
    plan = plan_for_storage(shape, (args.storage_chunk,) * 3, (args.chunk,) * 3, 0)
    source = ZarrSource(src)
    z = zarr.open_array(src)
    dst = str(work / "out.zarr")
    zarr.create_array(
        dst, shape=shape, chunks=z.chunks, dtype="uint32", compressors=z.compressors, overwrite=True
    )
    rows = []
    for backend in args.backend:
        rows += profile_backend(backend, plan, source, ZarrTarget(dst), args)
    meta = {
        "date": datetime.date.today().isoformat(),
        "size": args.size,
        "chunk": args.chunk,
        "storage_chunk": args.storage_chunk,
        "density": args.density,
        "cpus": os.cpu_count(),
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "chunk_profile.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
