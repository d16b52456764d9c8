"""CPU kernels vs scipy.ndimage.label and cc3d, one thread, any connectivity (default 3D 26).

Usage::

    python benchmarks/kernels_cpu.py                      # 512^3, d 0.05/0.2/0.5, g 1/4
    python benchmarks/kernels_cpu.py --connectivity 6     # face connectivity, every algorithm
    python benchmarks/kernels_cpu.py --ndim 2 --connectivity 4 --size 11586   # 512^3 pixels
    python benchmarks/kernels_cpu.py --size 128 --repeat 2 --out /tmp/k

Every method runs once untimed on each volume (warm-up: numba loads its cache) and that result is
checked equal to scipy's (labels and count); then ``--repeat`` timed rounds that interleave the
methods; the median (and the minimum) is reported (wall clock, output allocation included for
every method; speedups are ratios of medians). Prints a Markdown table and writes
``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to ``--out`` (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``kernels_cpu_<machine>_<size>[_2d]_c<conn>``.
"""

from __future__ import annotations

import os

# One thread for everything, set before numba / numpy load their thread pools.
for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy import ndimage  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from report import cpu_model, default_name, device_tag, record  # noqa: E402

from tilelabel.connectivity import full_connectivity, structure  # noqa: E402
from tilelabel.kernels.registry import algorithms, get_kernel  # noqa: E402
from tilelabel.synth import random_volume  # noqa: E402


def methods(algorithms: list[str], dtype: np.dtype, ndim: int, conn: int) -> dict:
    """name -> callable(image) -> (labels, n); every one single-threaded."""
    import cc3d

    struct = structure(ndim, conn)
    out = {}
    for alg in algorithms:
        kernel = get_kernel("cpu", ndim, conn, alg)
        out[f"tilelabel {alg}"] = lambda img, k=kernel: k(img, dtype)
    # cc3d runs on one thread (it has no threading option); its own dtype choice is uint32 here.
    out["cc3d"] = lambda img: cc3d.connected_components(img, connectivity=conn, return_N=True)
    out["scipy"] = lambda img: ndimage.label(img, struct)
    return out


def run(
    size: int, repeat: int, densities, granularities, algorithms, dtype, ndim, conn, time_scipy
) -> list[dict]:
    """Check every method against scipy on each volume, then time ``repeat`` interleaved rounds."""
    rows = []
    for density in densities:
        for granularity in granularities:
            img = random_volume((size,) * ndim, density, granularity, seed=0)
            fns = methods(algorithms, dtype, ndim, conn)
            # Warm-up round: numba loads its cache, and every result is checked against scipy's.
            expected, exp_n = fns["scipy"](img)
            info = {}
            for name, fn in fns.items():
                if name == "scipy":
                    info[name] = (str(expected.dtype), int(exp_n))
                    continue
                labels, n = fn(img)
                if int(n) != int(exp_n) or not np.array_equal(labels, expected):
                    raise SystemExit(f"{name} differs from scipy at d={density} g={granularity}")
                info[name] = (str(labels.dtype), int(n))
                del labels
            del expected
            # Timed rounds interleave the methods, so that drifts of a shared machine spread
            # over all of them instead of landing on one.
            if not time_scipy:
                del fns["scipy"]
            times = {name: [] for name in fns}
            for _ in range(repeat):
                for name, fn in fns.items():
                    t = time.perf_counter()
                    result = fn(img)
                    times[name].append(time.perf_counter() - t)
                    del result
            for name in fns:
                med = statistics.median(times[name])
                rows.append(
                    {
                        "size": size,
                        "ndim": ndim,
                        "connectivity": conn,
                        "density": density,
                        "granularity": granularity,
                        "method": name,
                        "n": info[name][1],
                        "dtype": info[name][0],
                        "equal_to_scipy": True,
                        "times_s": times[name],
                        "median_s": med,
                        "min_s": min(times[name]),
                        "mvox_s": img.size / med / 1e6,
                    }
                )
                print(
                    f"  d={density} g={granularity} {name:16s} {med:8.3f} s "
                    f"(min {min(times[name]):.3f})",
                    flush=True,
                )
    return rows


def table(rows: list[dict]) -> str:
    """Markdown table: one line per volume and method, speedups against cc3d and scipy."""
    lines = [
        "| conn | d | g | method | labels | median s | min s | MVox/s | vs cc3d | vs scipy |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(r["density"], r["granularity"]) for r in rows})
    for d, g in keys:
        group = [r for r in rows if (r["density"], r["granularity"]) == (d, g)]
        ref = {r["method"]: r["median_s"] for r in group}
        for r in group:
            vs_scipy = f"{ref['scipy'] / r['median_s']:.2f}x" if "scipy" in ref else "-"
            lines.append(
                f"| {r['connectivity']} | {d} | {g} | {r['method']} | {r['n']} | "
                f"{r['median_s']:.3f} | {r['min_s']:.3f} | {r['mvox_s']:.1f} | "
                f"{ref['cc3d'] / r['median_s']:.2f}x | {vs_scipy} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and report it (table on stdout, JSON and table under --out)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", type=int, default=512, help="edge of the cubic volume (512)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per method (3)")
    p.add_argument("--densities", type=float, nargs="+", default=[0.05, 0.2, 0.5])
    p.add_argument("--granularities", type=int, nargs="+", default=[1, 4])
    p.add_argument("--ndim", type=int, default=3, choices=[2, 3], help="2D or 3D volumes (3)")
    p.add_argument(
        "--connectivity", type=int, default=None, help="4/8 (2D), 6/18/26 (3D); default full"
    )
    p.add_argument("--algorithms", nargs="+", help="default: every registered one")
    p.add_argument(
        "--no-scipy-timing",
        dest="time_scipy",
        action="store_false",
        help="check against scipy but do not time it (it is the slowest by far)",
    )
    p.add_argument("--dtype", default="uint32", choices=["uint32", "uint64"])
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = p.parse_args(argv)

    import cc3d
    import numba
    import scipy

    dtype = np.dtype(args.dtype)
    conn = args.connectivity or full_connectivity(args.ndim)
    if args.algorithms is None:
        args.algorithms = algorithms("cpu", args.ndim, conn)
    machine = {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "numba_threads": numba.config.NUMBA_NUM_THREADS,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "scipy": scipy.__version__,
        "cc3d": getattr(cc3d, "__version__", "unknown"),
    }
    edge = f"{args.size}^{args.ndim}"
    print(f"{edge}, {machine['cpu']}, numba threads {machine['numba_threads']}", flush=True)
    rows = run(
        args.size,
        args.repeat,
        args.densities,
        args.granularities,
        args.algorithms,
        dtype,
        args.ndim,
        conn,
        args.time_scipy,
    )
    md = table(rows)
    print(md)
    two_d = "2d" if args.ndim == 2 else ""
    u64 = "u64" if dtype == np.uint64 else ""
    name = args.name or default_name("kernels_cpu", device_tag(), args.size, two_d, f"c{conn}", u64)
    rounds = f"{args.repeat} round{'s' if args.repeat > 1 else ''}"
    notes = (
        f"{edge}, {conn}-connectivity, every method on one thread, tilelabel output {dtype}; "
        f"seconds, median (and minimum) of {rounds} after a warm-up, every result checked equal "
        "to scipy's."
    )
    record(
        args.out,
        name,
        title="CPU kernels, one thread",
        rows=rows,
        markdown=md,
        args=args,
        machine=machine,
        notes=notes,
        argv=argv,
    )


if __name__ == "__main__":
    main()
