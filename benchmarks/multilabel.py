"""Multi-label labeling of a segmentation-like volume vs cc3d, on the CPU and the GPU.

Usage::

    python benchmarks/multilabel.py                          # 512^3, connectivity 26 and 6
    python benchmarks/multilabel.py --sizes 512,1024 --conns 26
    python benchmarks/multilabel.py --sizes 512 --pipeline   # + label_zarr, binary vs multi
    python benchmarks/multilabel.py --sizes 128 --repeat 2 --out /tmp/m

The volume is a Voronoi label field (:func:`tilelabel.synth.voronoi_labels`: one seed per
16^3 cell, values 1..4096, 10 % of the cells background; uint32), made on the GPU where there is
one. Per size and connectivity, each method first labels a small volume (numba and CuPy compile
then), then labels the volume ``--repeat`` times, timed; its first result is checked equal to
cc3d's and the median reported (wall clock, output allocation included):

- ``cc3d``: ``cc3d.connected_components`` (one thread; it has no threading option),
- ``cpu``: tilelabel's multi-label CPU kernel (one thread),
- ``cuda``: tilelabel's multi-label CUDA kernel, input already on the device, labels left there
  (synchronised), and ``cuda_binary`` the default binary kernel on ``volume != 0`` beside it.

``--pipeline`` also writes the volume to a zarr array (128^3 chunks) and times whole
``label_zarr`` runs on it (this process, the GPU where there is one) in binary mode (nonzero is
foreground) and multi-label mode, with each run's phases; and the same on a random 0/1 volume
(density 0.2), where both modes give the same labels: the second of two runs each. Prints a
Markdown table and writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to
``--out`` (default: $OUT or benchmarks/out), again after every connectivity; NAME: ``--name``, by
default ``multilabel_<machine>_<sizes>_c<conns>[_pipeline][_nocpu]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from report import default_name, device_tag, record  # noqa: E402

from tilelabel.kernels.backends import cuda_available  # noqa: E402
from tilelabel.kernels.registry import get_kernel  # noqa: E402
from tilelabel.synth import voronoi_labels  # noqa: E402

CELL, IDS, BACKGROUND = 16, 4096, 0.1


def volume_on_gpu(n: int, seed: int = 0):
    """``voronoi_labels((n,) * 3, CELL, IDS, BACKGROUND, seed)`` made on the GPU (the same seeds;
    a voxel equally far from two seeds may take the other one), as a CuPy uint32 array."""
    import cupy as cp

    from tilelabel.synth import voronoi_seeds

    pos, val = voronoi_seeds(n, CELL, IDS, BACKGROUND, seed)
    cells = int(val.shape[0])
    fill = cp.ElementwiseKernel(
        "raw float64 pos, raw uint64 val, int64 n, int64 m, int64 cell",
        "uint32 out",
        """
        long long z = i / (n * n), y = (i / n) % n, x = i % n;
        double best = 1e300;
        unsigned long long value = 0;
        for (int dz = -1; dz <= 1; dz++)
          for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
              long long c = ((z / cell + dz + 1) * m + (y / cell + dy + 1)) * m + x / cell + dx + 1;
              double a = pos[3 * c] - z, b = pos[3 * c + 1] - y, d = pos[3 * c + 2] - x;
              double q = a * a + b * b + d * d;
              if (q < best) { best = q; value = val[c]; }
            }
        out = (unsigned int)value;
        """,
        "tilelabel_voronoi",
    )
    out = cp.empty((n, n, n), np.uint32)
    fill(cp.asarray(pos), cp.asarray(val), np.int64(n), np.int64(cells), np.int64(CELL), out)
    return out


def timed(fn, repeat: int, sync=None) -> tuple[float, list[float], object]:
    """(median seconds, all seconds, the first result) of ``repeat`` calls."""
    times, first = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
        first = out if first is None else first
        del out
    return statistics.median(times), times, first


def kernels(vol: np.ndarray, dvol, conn: int, repeat: int, cpu: bool = True) -> list[dict]:
    import cc3d

    u32 = np.dtype(np.uint32)
    # name -> (labeling of one volume, the volume it labels in the timing)
    methods = {
        "cc3d": (
            functools.partial(cc3d.connected_components, connectivity=conn, return_N=True),
            vol,
        )
    }
    if cpu:
        methods["cpu"] = (
            functools.partial(get_kernel("cpu", 3, conn, multilabel=True), dtype=u32),
            vol,
        )
    sync = None
    if dvol is not None:
        import cupy as cp

        ml = get_kernel("cuda", 3, conn, multilabel=True)
        methods["cuda"] = (functools.partial(ml, dtype=u32), dvol)
        # the default binary kernel on the foreground, made outside the timing
        binary = get_kernel("cuda", 3, conn)
        methods["cuda_binary"] = (functools.partial(binary, dtype=u32), (dvol != 0).view(np.uint8))
        sync = cp.cuda.get_current_stream().synchronize
    rows, ref, rn = [], None, None
    for name, (fn, image) in methods.items():
        small = image[:16, :16, :16].copy()
        fn(small)  # compiles, outside the timing
        on_gpu = name.startswith("cuda")
        med, times, (labels, n) = timed(
            functools.partial(fn, image), repeat, sync if on_gpu else None
        )
        ok = None
        if name == "cc3d":
            ref, rn = labels, int(n)
        elif name != "cuda_binary":
            host = labels if isinstance(labels, np.ndarray) else labels.get()
            ok = bool(int(n) == rn and np.array_equal(host, ref))
        rows.append(dict(conn=conn, method=name, n=int(n), ok=ok, s=med, all_s=times))
        del labels
        print(f"  {conn:>2} {name:<12} {med:8.4f} s  n={int(n)} ok={ok}", flush=True)
    return rows


def pipeline(vol: np.ndarray, backend: str, conn: int, repeat: int) -> list[dict]:
    """Whole label_zarr runs in binary and multi-label mode on the same zarr inputs: the label
    field (binary mode sees its foreground), and a random 0/1 volume of density 0.2, on which
    both modes give the same labels (the cost of the mode alone)."""
    import zarr

    import tilelabel

    rng = np.random.default_rng(1)
    inputs = {"voronoi": vol, "random": (rng.random(vol.shape, np.float32) < 0.2).view(np.uint8)}
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        for name, image in inputs.items():
            src = str(Path(tmp) / f"{name}.zarr")
            arr = zarr.create_array(src, shape=image.shape, chunks=(128,) * 3, dtype=image.dtype)
            arr[...] = image
            for mode in (False, True):

                def run(mode=mode, src=src):
                    return tilelabel.label_zarr(
                        src,
                        str(Path(tmp) / "out.zarr"),
                        connectivity=conn,
                        backend=backend,
                        multilabel=mode,
                        overwrite=True,
                        return_result=True,
                    )

                run()  # the first run of a process loads and compiles, outside the timing
                med, times, res = timed(run, repeat)
                method = f"label_zarr_{backend}_{name}_{'multilabel' if mode else 'binary'}"
                phases = {k: round(v, 3) for k, v in res.phases.items()}
                n = int(res.components)
                rows.append(dict(conn=conn, method=method, n=n, s=med, all_s=times, phases=phases))
                print(f"  {conn:>2} {method:<40} {med:8.3f} s  n={n} {phases}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| size | conn | method | components | median s | vs cc3d | ok |", "|---" * 7 + "|"]
    ref = {(r["size"], r["conn"]): r["s"] for r in rows if r["method"] == "cc3d"}
    for r in rows:
        base = ref.get((r["size"], r["conn"]))
        vs = f"{base / r['s']:.1f}x" if base and not r["method"].startswith("label_zarr") else ""
        lines.append(
            f"| {r['size']}^3 | {r['conn']} | {r['method']} | {r['n']} | {r['s']:.4f} | {vs} | "
            f"{'' if r.get('ok') is None else r['ok']} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="512", help="comma list of edge lengths (default 512)")
    ap.add_argument("--conns", default="26,6", help="comma list of connectivities")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pipeline", action="store_true", help="also time label_zarr runs")
    ap.add_argument("--no-cpu", action="store_true", help="skip tilelabel's CPU kernel")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    ap.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = ap.parse_args()
    gpu = cuda_available()
    rows, meta = [], {"cell": CELL, "ids": IDS, "background": BACKGROUND}
    if gpu:
        import cupy as cp

        meta["device"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        meta["cupy"] = cp.__version__
    meta["cpus"] = os.cpu_count()
    name = args.name or default_name(
        "multilabel",
        device_tag(),
        args.sizes.split(","),
        "c" + args.conns.replace(",", "-"),
        "pipeline" if args.pipeline else "",
        "nocpu" if args.no_cpu else "",
    )
    notes = (
        f"A Voronoi label field (`tilelabel.synth.voronoi_labels`: one seed per {CELL}³ cell, ids "
        f"1..{IDS}, {BACKGROUND:.0%} of the cells background, uint32), labeled with "
        "`multilabel=True` and checked equal to `cc3d.connected_components` (`ok`); wall "
        f"seconds, median of {args.repeat}, output allocation included: the kernels on one "
        "thread on the CPU, the CUDA kernels with their input on the device (`cuda_binary`: the "
        "default binary kernel on `volume != 0`)"
        + (
            "; `label_zarr_*`: whole runs in this process, 128³ chunks, on the label field and "
            "on a random 0/1 volume of density 0.2, in binary and multi-label mode"
            if args.pipeline
            else ""
        )
        + "."
    )

    def save() -> None:  # after every size: a run stopped at a time limit keeps what it has
        record(
            args.out,
            name,
            title="Multi-label volumes",
            rows=rows,
            markdown=table(rows),
            args=args,
            machine=meta,
            notes=notes,
        )

    for size in (int(s) for s in args.sizes.split(",")):
        t = time.perf_counter()
        if gpu:
            dvol = volume_on_gpu(size)
            vol = dvol.get()
        else:
            dvol, vol = None, voronoi_labels((size,) * 3, CELL, IDS, BACKGROUND)
        print(f"{size}^3: made in {time.perf_counter() - t:.1f} s", flush=True)
        for conn in (int(c) for c in args.conns.split(",")):
            for r in kernels(vol, dvol, conn, args.repeat, not args.no_cpu):
                rows.append(dict(size=size, **r))
            save()
        if args.pipeline:
            conn = int(args.conns.split(",")[0])
            for r in pipeline(vol, "cuda" if gpu else "cpu", conn, args.repeat):
                rows.append(dict(size=size, **r))
        save()
        del dvol, vol
    print(table(rows))


if __name__ == "__main__":
    main()
