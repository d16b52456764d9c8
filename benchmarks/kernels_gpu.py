"""GPU kernels against ``cupyx.scipy.ndimage.label``, all in one run on one GPU.

Protocol (the papers'): input already on the device, uint32 output, output allocation included,
timed with CUDA events up to the result cupyx gives (labels 1..n in scipy's numbering and n as a
Python int). Median of repeated runs after a warm-up. Also: the memory floor (input read once and
labels written once at the device-to-device copy bandwidth measured in this run) and the time of
each step ("average with steps").

    python benchmarks/kernels_gpu.py [--quick] [--only 3d1024] [--out DIR]
    python benchmarks/kernels_gpu.py --conns 6,18,4 --algs uf,ke,seg   # face connectivities
    python benchmarks/kernels_gpu.py --table JSON   # Markdown tables from a run's JSON

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out), again after every case; NAME: ``--name``, by default
``kernels_gpu_<machine>[_quick][_<only>][_c<conns>][_<algs>]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cupy as cp  # noqa: E402
import cupyx.scipy.ndimage as cndi  # noqa: E402
from report import default_name, device_tag, record  # noqa: E402

from tilelabel.connectivity import structure  # noqa: E402
from tilelabel.kernels.cuda.ccl import ALGORITHMS, Labeling  # noqa: E402
from tilelabel.kernels.registry import get_kernel  # noqa: E402
from tilelabel.synth import random_block  # noqa: E402

# The same volumes as tilelabel.synth.random_volume, generated on the device.
_SYNTH = cp.RawKernel(
    r"""
typedef unsigned long long u64;
__device__ u64 sm(u64 x) {
    u64 z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
extern "C" __global__ void synth(unsigned char* out, u64 D, u64 H, u64 W, u64 g, u64 cH,
                                 u64 cW, u64 seedh, double density) {
    u64 N = D * H * W;
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (u64)gridDim.x * blockDim.x) {
        u64 z = v / (H * W), r = v % (H * W), y = r / W, x = r % W;
        u64 cell = ((z / g) * cH + y / g) * cW + x / g;
        u64 h = sm(cell ^ seedh);
        double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
        out[v] = u < density ? 1 : 0;
    }
}
""",
    "synth",
)


def _sm(x: int) -> int:
    m = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def volume(shape, density, g, seed=0):
    D, H, W = (1, *shape) if len(shape) == 2 else shape
    out = cp.empty(shape, cp.uint8)
    cells = [-(-s // g) for s in (D, H, W)]
    args = (out, *map(np.uint64, (D, H, W, g, cells[1], cells[2], _sm(seed))), np.float64(density))
    _SYNTH((1 << 16,), (256,), args)
    return out


def timed(fn, reps, warm=1):
    for _ in range(warm):
        r = fn()
        del r
    ts = []
    s, e = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(reps):
        s.record()
        r = fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
        del r
    return statistics.median(ts), ts


def copy_bandwidth():
    nbytes = 1 << 32
    a = cp.ones(nbytes, cp.uint8)
    b = cp.empty_like(a)

    def go():
        b.data.copy_from_device_async(a.data, nbytes)

    t, _ = timed(go, 20, warm=3)
    return 2 * nbytes / (t * 1e-3)  # bytes read + written per second


def step_times(img, conn, alg, reps):
    """Median time of each step, run back to back with events between (no syncs)."""
    per = {}
    for _ in range(reps + 1):
        run = Labeling(img, np.uint32, conn, alg)
        steps = run.steps()
        ev = [cp.cuda.Event() for _ in range(len(steps) + 1)]
        ev[0].record()
        for i, (_, fn) in enumerate(steps):
            fn()
            ev[i + 1].record()
        n = run.count()
        ev[-1].synchronize()
        for i, (name, _) in enumerate(steps):
            per.setdefault(name, []).append(cp.cuda.get_elapsed_time(ev[i], ev[i + 1]))
        del run, n
    return {k: statistics.median(v[1:]) for k, v in per.items()}


_CUPYX_OUT = [cp.uint32]


def cupyx_label(img, st):
    try:
        return cndi.label(img, structure=st, output=_CUPYX_OUT[0])
    except Exception as e:  # older CuPy: int32 only
        if _CUPYX_OUT[0] is None:
            raise
        print(f"cupyx label with uint32 output failed ({e}); using its int32 default")
        _CUPYX_OUT[0] = None
        return cndi.label(img, structure=st)


def dump(out, run_name, device, bw, rows, args):
    """The run so far, through ``report.record`` (after every case: a run stopped at a time
    limit keeps what it has)."""
    machine = dict(gpu=device, copy_GBps=bw / 1e9, cupy=cp.__version__)
    notes = (
        f"CuPy {cp.__version__}. uint32 labels, input already on the device, output allocation "
        "included, CUDA events, median of 10 runs (5 from 2^29 voxels) after a warm-up; "
        "`cupyx.scipy.ndimage.label` in the same run. The floor: 1 B in and 4 B out per voxel "
        f"at the device-to-device copy bandwidth measured in the run ({bw / 1e9:.0f} GB/s, read "
        "+ write). Cells: ms (× cupyx, × floor), the fastest of a case in bold."
    )
    try:
        md = tables(rows)
    except Exception as e:  # the rows are saved whatever the tables make of them
        md = f"(no tables: {e!r}; `python benchmarks/kernels_gpu.py --table JSON`)"
    record(
        out,
        run_name,
        title="GPU kernels",
        rows=rows,
        markdown=md,
        args=args,
        machine=machine,
        notes=notes,
    )


BLOCK = [a for a, spec in ALGORITHMS.items() if spec.blocks]
PIXEL = [a for a, spec in ALGORITHMS.items() if not spec.blocks]


def kernel(conn, alg):
    """The registered kernel (its ndim follows from the connectivity)."""
    return get_kernel("cuda", 2 if conn in (4, 8) else 3, conn, alg)


def table(path):
    """Print the tables of a run's JSON (this script's, old or new)."""
    print(tables(json.loads(Path(path).read_text())["rows"]))
    return 0


def tables(rows):
    """The tables of a run (block algorithms, pixel algorithms, 3D 1024^3 steps), in Markdown."""
    cases = {}
    for r in rows:
        cases.setdefault((r["size"], r["conn"], r["density"], r["granularity"]), []).append(r)
    order = {"3d512": 0, "3d1024": 1, "2d8192": 2}
    out = []
    for title, conns, algs in (
        ("Block algorithms", (26, 8), BLOCK + ["uf", "ke", "seg"]),
        ("Pixel algorithms", (18, 6, 4), PIXEL),
    ):
        keys = [k for k in cases if k[1] in conns]
        if not keys:  # no case of these connectivities in the run
            continue
        head = "| case | conn | cupyx ms | floor ms | " + " | ".join(algs) + " |"
        out += [f"### {title}", "", head]
        out.append("|---" * (4 + len(algs)) + "|")
        keys.sort(key=lambda k: (order.get(k[0], len(order)), conns.index(k[1]), k[2], k[3]))
        for k in keys:
            by = {r["alg"]: r for r in cases[k]}
            best = min((by[a]["ms"] for a in algs if a in by), default=None)
            r0 = cases[k][0]
            cells = []
            for a in algs:
                r = by.get(a)
                if r is None:
                    cells.append("-")
                    continue
                c = f"{r['ms']:.2f} ({r['speedup']:.1f}x, {r['floor_ratio']:.1f})"
                c = f"**{c}**" if r["ms"] == best else c
                cells.append(c + ("" if r["ok"] else " MISMATCH"))
            case = f"{k[0]} d={k[2]} g={k[3]}"
            out.append(
                f"| {case} | {k[1]} | {r0['cupyx_ms']:.1f} | {r0['floor_ms']:.2f} | "
                + " | ".join(cells)
                + " |"
            )
        out.append("")
    names = [
        "alloc",
        "init",
        "merge",
        "compress",
        "reduce",
        "compress+mark",
        "scan",
        "final",
        "roots",
    ]
    steps = [r for r in rows if r["size"] == "3d1024" and r["conn"] == 26 and r["alg"] in BLOCK]
    if steps:
        out += ["### Steps (ms), 3D 1024^3, 26-connectivity", ""]
        head = "| case | alg | " + " | ".join(names) + " | total |"
        out += [head, "|---" * (len(names) + 3) + "|"]
    for r in steps:
        stp = " | ".join(f"{r['steps'][n]:.2f}" if n in r["steps"] else "-" for n in names)
        out.append(
            f"| d={r['density']} g={r['granularity']} | {r['alg']} | {stp} | {r['ms']:.2f} |"
        )
    return "\n".join(out).strip("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes only (smoke test)")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    ap.add_argument("--only", default="", help="comma list of size tags to run, e.g. 3d1024")
    ap.add_argument("--conns", default="", help="comma list of connectivities (default all)")
    ap.add_argument("--algs", default="", help="comma list of algorithms (default all)")
    ap.add_argument(
        "--profile", default="", help="ALG: label d=0.2 g=1 twice (for ncu), first of --conns"
    )
    ap.add_argument("--table", default="", help="JSON: print the Markdown tables of a run")
    ap.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = ap.parse_args()
    if args.table:
        return table(args.table)
    if args.profile:
        conn = int(args.conns.split(",")[0]) if args.conns else 26
        img = volume((8192,) * 2 if conn in (4, 8) else (1024,) * 3, 0.2, 1)
        for _ in range(2):
            labels, n = kernel(conn, args.profile)(img, np.uint32)
        cp.cuda.Device().synchronize()
        print("profiled", args.profile, n)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_name = args.name or default_name(
        "kernels_gpu",
        device_tag(),
        "quick" if args.quick else "",
        args.only.split(",") if args.only else "",
        "c" + args.conns.replace(",", "-") if args.conns else "",
        args.algs.split(",") if args.algs else "",
    )

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    bw = copy_bandwidth()
    cp.get_default_memory_pool().free_all_blocks()
    print(f"device: {name}; device-to-device copy: {bw / 1e9:.0f} GB/s (read + write)", flush=True)

    # the on-device generator equals tilelabel.synth
    for shp, d, g in (((13, 17, 19), 0.3, 1), ((11, 9, 10), 0.5, 4), ((33, 35), 0.2, 2)):
        want = random_block(shp, (0,) * len(shp), shp, d, g, seed=0)
        assert np.array_equal(cp.asnumpy(volume(shp, d, g)), want)

    if args.quick:
        sizes = [("3d128", (128,) * 3), ("2d1024", (1024, 1024))]
    else:
        sizes = [("3d512", (512,) * 3), ("3d1024", (1024,) * 3), ("2d8192", (8192, 8192))]
    if args.only:
        keep = set(args.only.split(","))
        sizes = [s for s in sizes if s[0] in keep]

    rows = []
    for tag, shape in sizes:
        nd = len(shape)
        N = int(np.prod(shape))
        big = N >= 1 << 29
        reps = 5 if big else 10
        floor_ms = N * (1 + 4) / bw * 1e3
        conns = (8, 4) if nd == 2 else (26, 18, 6)
        if args.conns:
            conns = [c for c in conns if str(c) in args.conns.split(",")]
            if not conns:
                continue
        for density in (0.05, 0.2, 0.5):
            for g in (1, 4):
                img = volume(shape, density, g)
                for conn in conns:
                    st = cp.asarray(structure(nd, conn))
                    full = conn == 3**nd - 1
                    algs = BLOCK + PIXEL if full else PIXEL
                    if args.algs:
                        algs = [a for a in algs if a in args.algs.split(",")]
                    ref, rn = cupyx_label(img, st)
                    t_cx, _ = timed(lambda st=st, img=img: cupyx_label(img, st), 3 if big else reps)
                    case = f"{tag} d={density} g={g} c={conn}"
                    print(f"{case}: cupyx {t_cx:.2f} ms, n={rn}", flush=True)
                    for alg in algs:
                        kern = kernel(conn, alg)
                        labels, n = kern(img, np.uint32)
                        ok = n == rn and bool(cp.array_equal(labels, ref))
                        del labels
                        t, ts = timed(lambda kern=kern, img=img: kern(img, np.uint32), reps)
                        steps = step_times(img, conn, alg, 3 if big else 5)
                        row = dict(
                            size=tag, shape=shape, density=density, granularity=g, conn=conn,
                            alg=alg, n=n, ok=ok, ms=t, all_ms=ts, cupyx_ms=t_cx,
                            gvox=N / t / 1e6, speedup=t_cx / t, floor_ms=floor_ms,
                            floor_ratio=t / floor_ms, steps=steps,
                        )  # fmt: skip
                        rows.append(row)
                        st_s = " ".join(f"{k}={v:.2f}" for k, v in steps.items())
                        print(
                            f"  {alg:7s} {t:8.2f} ms {row['gvox']:7.1f} GVox/s "
                            f"x{row['speedup']:6.1f} vs cupyx  {row['floor_ratio']:5.1f}x floor "
                            f"{'OK' if ok else 'MISMATCH'}  [{st_s}]",
                            flush=True,
                        )
                    ref = None
                    dump(out, run_name, name, bw, rows, args)
                img = None
                cp.get_default_memory_pool().free_all_blocks()

    dump(out, run_name, name, bw, rows, args)
    bad = [r for r in rows if not r["ok"]]
    print(f"{len(rows)} rows, {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
