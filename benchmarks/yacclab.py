"""Every registered CUDA algorithm on the papers' synthetic images, the YACCLAB way, in one run.

Images: ``tilelabel.synth`` noise (made on the device, as ``kernels_gpu.volume``) of density
0 %–100 % in steps of 10 % and granularities 1–16, 2D 2048² (and a larger 2D size) and 3D 256³
and 512³. For each image and connectivity every algorithm the registry lists runs on the input
already on the device, uint32 labels, timed with CUDA events as in the papers: *alloc incl.*
from an empty CuPy pool (every buffer a cudaMalloc, freed after, YACCLAB's PerformLabeling), and
*alloc excl.* with the run's buffers made before the first event (YACCLAB's steps without
Alloc). Every output is checked equal to ``cupyx.scipy.ndimage.label``.

Also: OLE's (and BE's) iterations (TPDS 2020, Table 4), HA4 against the pixel 4-connectivity
labelers (its paper: 1.8–2.7x), and HA4's analysis (labels, sizes, boxes and centroids in one
pass) against labeling then tilelabel's statistics kernel.

    python benchmarks/yacclab.py                    # the published grid
    python benchmarks/yacclab.py --quick            # a small grid (smoke test)
    python benchmarks/yacclab.py --table JSON       # the Markdown tables of a run's JSON

Writes ``NAME.json`` (``report.record``'s envelope, with the run's ``meta`` and ``stats`` rows
beside) and ``NAME.md`` to ``--out`` (default: $OUT or benchmarks/out), again after every image;
NAME: ``--name``, by default ``yacclab_<machine>[_quick|_smoke][_<only>]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from report import default_name, device_tag, record  # noqa: E402

from tilelabel.connectivity import structure  # noqa: E402
from tilelabel.kernels.cuda.ccl import make_labeling  # noqa: E402
from tilelabel.kernels.registry import algorithms  # noqa: E402

try:
    import cupy as cp
    from kernels_gpu import cupyx_label, volume
except ImportError:  # without CuPy: --table only
    cp = None

#: TPDS 2020, Table 4: OLE's iterations by density (%) at granularity 1 (2048², 8-connectivity)
TABLE4 = dict(
    zip(range(0, 101, 10), (1.0, 4.0, 5.0, 5.0, 7.2, 5.0, 5.0, 4.0, 3.9, 3.0, 2.0), strict=True)
)
#: (name, shape, connectivities, densities, granularities)
FULL = [
    ("2d2048", (2048, 2048), (8, 4), range(0, 101, 10), (1, 2, 4, 8, 16)),
    ("3d256", (256, 256, 256), (26,), range(0, 101, 10), (1, 2, 4, 8, 16)),
    ("3d512", (512, 512, 512), (26,), (10, 30, 50, 70, 90), (1, 4, 16)),
    ("2d8192", (8192, 8192), (8, 4), (10, 40, 70, 100), (1, 4, 16)),
]
#: a few images of each size and connectivity: every kernel compiled once, every one checked
SMOKE = [
    ("2d2048", (2048, 2048), (8, 4), (0, 40, 100), (1,)),
    ("3d256", (256, 256, 256), (26,), (40,), (1,)),
]
QUICK = [
    ("2d2048", (2048, 2048), (8, 4), (0, 20, 40, 60, 100), (1, 4, 16)),
    ("3d256", (256, 256, 256), (26,), (0, 30, 60, 100), (1, 4)),
]


def _events(fn) -> float:
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    fn()
    e.record()
    e.synchronize()
    return cp.cuda.get_elapsed_time(s, e)


def time_alg(img, conn: int, alg: str, reps: int) -> tuple[float, float, int]:
    """Median ms with allocation included and excluded, and the run's iterations (0: direct)."""
    pool = cp.get_default_memory_pool()

    def whole():
        run = make_labeling(img, np.uint32, conn, alg)
        for _, step in run.steps():
            step()
        run.count()
        return run

    whole()  # warm: kernels loaded
    incl, excl = [], []
    iters = 0
    for _ in range(reps):
        pool.free_all_blocks()
        incl.append(_events(whole))
        run = make_labeling(img, np.uint32, conn, alg)
        steps = run.steps()
        steps[0][1]()  # alloc, outside the events
        cp.cuda.get_current_stream().synchronize()

        def rest(run=run, steps=steps):
            for _, step in steps[1:]:
                step()
            run.count()

        excl.append(_events(rest))
        iters = getattr(run, "iterations", 0)
        del run, steps
    return statistics.median(incl), statistics.median(excl), iters


def time_stats(img, reps: int) -> dict:
    """HA4's analysis against labeling then the statistics kernel (both uint32), ms."""
    from tilelabel.kernels.cuda.ccl import label_device
    from tilelabel.kernels.cuda.ha4 import label_analysis
    from tilelabel.kernels.cuda.stats import label_stats_device
    from tilelabel.kernels.registry import DEFAULTS

    default = DEFAULTS[("cuda", 2, 4)]

    def two(alg):
        def go():
            labels, n, first = label_device(img, np.uint32, 4, alg, want_first=True)
            label_stats_device(labels, n)

        return go

    def one():
        label_analysis(img, np.uint32)

    out = {}
    for name, fn in (
        ("ha4_analysis", one),
        ("ha4+stats", two("ha4")),
        (f"{default}+stats", two(default)),
    ):
        fn()
        out[name] = statistics.median(_events(fn) for _ in range(reps))
    labels, n, _ = label_device(img, np.uint32, 4, "ha4", want_first=True)
    out["stats_kernel"] = statistics.median(
        _events(lambda: label_stats_device(labels, n)) for _ in range(reps)
    )
    out["ha4"] = statistics.median(
        _events(lambda: label_device(img, np.uint32, 4, "ha4")) for _ in range(reps)
    )
    return out


def run_grid(grid, reps: int, log, budget: float, dump) -> tuple[list, list, list]:
    """The rows of every image of ``grid``, and the images skipped once ``budget`` seconds
    have passed."""
    rows, stats_rows, skipped = [], [], []
    t_start = time.perf_counter()
    for tag, shape, conns, densities, grans in grid:
        nd = len(shape)
        for g in grans:
            for d in densities:
                if time.perf_counter() - t_start > budget:
                    skipped.append(f"{tag} d={d} g={g}")
                    continue
                img = volume(shape, d / 100, g, seed=d * 31 + g)
                for conn in conns:
                    ref, rn = cupyx_label(img, cp.asarray(structure(nd, conn)))
                    t0 = time.perf_counter()
                    for alg in algorithms("cuda", nd, conn):
                        run = make_labeling(img, np.uint32, conn, alg)
                        for _, step in run.steps():
                            step()
                        n = run.count()
                        ok = n == rn and bool(cp.array_equal(run.L, ref))
                        del run
                        incl, excl, iters = time_alg(img, conn, alg, reps)
                        rows.append(
                            dict(size=tag, shape=shape, conn=conn, density=d, granularity=g,
                                 alg=alg, n=n, ok=ok, ms_incl=incl, ms_excl=excl,
                                 iterations=iters)
                        )  # fmt: skip
                        if not ok:
                            log(f"MISMATCH {tag} c={conn} d={d} g={g} {alg}: n={n} want {rn}")
                    log(f"{tag} c={conn} d={d} g={g}: n={rn} ({time.perf_counter() - t0:.1f} s)")
                    del ref
                    if nd == 2 and conn == 4 and tag == grid[0][0]:
                        stats_rows.append(
                            dict(size=tag, density=d, granularity=g, **time_stats(img, reps))
                        )
                del img
                cp.get_default_memory_pool().free_all_blocks()
                dump(rows, stats_rows, skipped)
    return rows, stats_rows, skipped


# -- tables ---------------------------------------------------------------------------------


def _mean(rows, key):
    return statistics.fmean(r[key] for r in rows)


def tables(data: dict) -> str:
    rows, srows, meta = data["rows"], data["stats"], data["meta"]
    out = [
        f"Device: {meta['device']}; date {meta['date']}; CuPy {meta['cupy']}; "
        f"{meta['mismatches']} outputs differing from cupyx of {len(rows)}.",
        "",
    ]
    if meta.get("skipped"):
        out += [f"Not run (time budget): {', '.join(meta['skipped'])}.", ""]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["size"], r["conn"]), []).append(r)
    # 1. ordering (Table 2's, on the synthetic sets): mean over the grid
    out += ["### Mean time over the grid (ms; alloc incl. / excl.), fastest first", ""]
    for (size, conn), rs in groups.items():
        algs = sorted({r["alg"] for r in rs}, key=lambda a: _mean(_of(rs, a), "ms_incl"))
        best = _mean(_of(rs, algs[0]), "ms_incl")
        cells = [
            f"{a} {_mean(_of(rs, a), 'ms_incl'):.2f} / {_mean(_of(rs, a), 'ms_excl'):.2f} "
            f"({_mean(_of(rs, a), 'ms_incl') / best:.1f}x)"
            for a in algs
        ]
        out.append(f"- **{size}, {conn}-conn.**: " + ", ".join(cells))
    out.append("")
    # 2. by granularity: mean over densities
    for (size, conn), rs in groups.items():
        algs = sorted({r["alg"] for r in rs}, key=lambda a: _mean(_of(rs, a), "ms_incl"))
        grans = sorted({r["granularity"] for r in rs})
        out += [f"### {size}, {conn}-connectivity: ms by granularity (mean over densities), "
                "alloc incl. / excl.", ""]  # fmt: skip
        out += ["| g | " + " | ".join(algs) + " |", "|---" * (len(algs) + 1) + "|"]
        for g in grans:
            by = [r for r in rs if r["granularity"] == g]
            cells = [
                f"{_mean(_of(by, a), 'ms_incl'):.2f} / {_mean(_of(by, a), 'ms_excl'):.2f}"
                for a in algs
            ]
            out.append(f"| {g} | " + " | ".join(cells) + " |")
        out.append("")
    # 3. Table 4: OLE's iterations at granularity 1
    for size, conn in [k for k in groups if k[0].startswith("2d")]:
        rs = [r for r in groups[(size, conn)] if r["granularity"] == 1]
        ds = sorted({r["density"] for r in rs})
        out += [f"### Iterations at granularity 1, {size}, {conn}-connectivity (TPDS 2020 "
                "Table 4: OLE, 8-connectivity)", ""]  # fmt: skip
        out += ["| density % | " + " | ".join(map(str, ds)) + " |", "|---" * (len(ds) + 1) + "|"]
        if conn == 8:
            out.append("| TPDS 2020 | " + " | ".join(f"{TABLE4.get(d, '-')}" for d in ds) + " |")
        for alg in ("ole", "be"):
            it = {r["density"]: r["iterations"] for r in rs if r["alg"] == alg}
            if it:
                out.append(f"| {alg} | " + " | ".join(str(it.get(d, "-")) for d in ds) + " |")
        out.append("")
    # 4. HA4 against the pixel 4-connectivity labelers
    for size, conn in [k for k in groups if k[1] == 4]:
        rs = groups[(size, conn)]
        grans = sorted({r["granularity"] for r in rs})
        others = [a for a in ("uf", "uf_ic", "ke", "seg", "ole") if _of(rs, a)]
        out += [f"### HA4's speed-up over the other 4-connectivity labelers, {size} "
                "(mean time ratio over densities, alloc excl.; its paper: 1.8–2.7x over "
                "Playne's UF / KE)", ""]  # fmt: skip
        out += ["| g | " + " | ".join(others) + " |", "|---" * (len(others) + 1) + "|"]
        for g in grans:
            by = [r for r in rs if r["granularity"] == g]
            h = _mean(_of(by, "ha4"), "ms_excl")
            out.append(
                f"| {g} | "
                + " | ".join(f"{_mean(_of(by, a), 'ms_excl') / h:.2f}" for a in others)
                + " |"
            )
        out.append("")
    # 5. HA4's analysis against labeling + the statistics kernel
    if srows:
        keys = [k for k in srows[0] if k not in ("size", "density", "granularity")]
        out += [f"### Labels with sizes, boxes and centroids, {srows[0]['size']}, "
                "4-connectivity (ms, alloc incl.)", ""]  # fmt: skip
        out += ["| d % | g | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
        for r in srows:
            out.append(
                f"| {r['density']} | {r['granularity']} | "
                + " | ".join(f"{r[k]:.3f}" for k in keys)
                + " |"
            )
        mean = {k: statistics.fmean(r[k] for r in srows) for k in keys}
        out.append("| mean | | " + " | ".join(f"{mean[k]:.3f}" for k in keys) + " |")
        out.append("")
    return "\n".join(out)


def _of(rows, alg):
    return [r for r in rows if r["alg"] == alg]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a small grid")
    ap.add_argument("--smoke", action="store_true", help="a few images (every kernel once)")
    ap.add_argument("--only", default="", help="comma list of sizes to run, e.g. 2d2048,3d256")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per algorithm and image")
    ap.add_argument(
        "--budget", type=float, default=1e9, help="seconds after which no new image starts"
    )
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    ap.add_argument("--table", default="", help="JSON: print the Markdown tables of a run")
    ap.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = ap.parse_args()
    if args.table:
        print(tables(json.loads(Path(args.table).read_text())))
        return 0
    grid = SMOKE if args.smoke else QUICK if args.quick else FULL
    if args.only:
        grid = [s for s in grid if s[0] in args.only.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_name = args.name or default_name(
        "yacclab",
        device_tag(),
        "smoke" if args.smoke else "quick" if args.quick else "",
        args.only.split(",") if args.only else "",
    )
    notes = (
        f"uint32 labels in scipy's numbering, input already on the device, CUDA events, median of "
        f"{args.reps} runs; *alloc incl.*: from an empty CuPy pool (every buffer a `cudaMalloc`, "
        "as YACCLAB's `PerformLabeling`), *alloc excl.*: the run's buffers made before the first "
        "event. Every output is checked against `cupyx.scipy.ndimage.label`'s."
    )
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.1f}] {msg}", flush=True)

    def dump(rows, srows, skipped):
        bad = sum(not r["ok"] for r in rows)
        meta = dict(
            device=name, date=datetime.date.today().isoformat(), cupy=cp.__version__,
            reps=args.reps, mismatches=bad, skipped=skipped, command=" ".join(sys.argv),
        )  # fmt: skip
        data = dict(meta=meta, rows=rows, stats=srows)
        try:
            md = tables(data)
        except Exception as e:  # the rows are saved whatever the tables make of them
            md = f"(no tables: {e!r}; `python benchmarks/yacclab.py --table JSON`)"
        record(
            out,
            run_name,
            title="GPU algorithms side by side, YACCLAB's way",
            rows=rows,
            markdown=md,
            args=args,
            machine=dict(gpu=name, cupy=cp.__version__),
            notes=notes,
            extra=dict(meta=meta, stats=srows),
        )
        return data

    data = dump(*run_grid(grid, args.reps, log, args.budget, dump))
    bad = data["meta"]["mismatches"]
    md = tables(data)
    print(md)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
