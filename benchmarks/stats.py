"""What statistics cost: in-pipeline statistics against plain labeling and against measuring after.

Two parts, both on one random volume (YACCLAB-style density / granularity):

1. ``kernel``: one whole array in memory on one device. Times labeling alone, the stats pass
   (``Backend.label_stats``, without and with an intensity image), and computing the same table
   afterwards from the labels: scikit-image's ``regionprops_table`` and vectorised
   ``scipy.ndimage`` calls on CPU; ``cupyx.scipy.ndimage`` calls on GPU (count, coordinate sums
   for centroids, per-axis min / max of coordinates for boxes, intensity sum / min / max).
2. ``pipeline``: zarr to zarr on a local dask cluster, ``label_zarr`` plain, with ``stats=PATH``
   (Parquet), with stats and an intensity array, and with a ``min_size`` filter. Runs are
   interleaved (plain, stats, ... repeated) and the median of each is reported, so that load from
   elsewhere on the machine hits every variant alike.

    python benchmarks/stats.py --backend cpu --shape 256,256,256 --chunks 128,128,128
    python benchmarks/stats.py --backend cuda --shape 1024,1024,1024 --chunks 512,512,512

Prints a Markdown table per part and writes ``NAME.json`` (``report.record``'s envelope) and
``NAME.md`` to ``--out`` (default: $OUT or benchmarks/out); NAME: ``--name``, by default
``stats_<machine>_<backend>_<shape>[_<parts>]``. ``--json PATH`` also writes the parts as before.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import default_name, device_tag, record  # noqa: E402

from tilelabel.connectivity import max_components  # noqa: E402
from tilelabel.dtypes import label_dtype  # noqa: E402
from tilelabel.kernels.backends import get_backend  # noqa: E402
from tilelabel.synth import random_volume  # noqa: E402


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def _sync(backend: str) -> None:
    if backend == "cuda":
        import cupy as cp

        cp.cuda.Device().synchronize()


def timeit(fn, backend: str, repeats: int) -> float:
    """Median seconds of ``repeats`` runs after one warm-up."""
    fn()
    _sync(backend)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        _sync(backend)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def after_cpu(labels: np.ndarray, n: int, intensity: np.ndarray) -> dict:
    """The same table from the labels with vectorised scipy.ndimage calls (several passes)."""
    from scipy import ndimage

    idx = np.arange(1, n + 1)
    out = {"area": ndimage.sum_labels(np.ones(labels.shape, np.int64), labels, idx)}
    out["centroid"] = ndimage.center_of_mass(labels > 0, labels, idx)
    out["bbox"] = ndimage.find_objects(labels)
    out["intensity_sum"] = ndimage.sum_labels(intensity, labels, idx)
    out["intensity_min"] = ndimage.minimum(intensity, labels, idx)
    out["intensity_max"] = ndimage.maximum(intensity, labels, idx)
    return out


def after_skimage(labels: np.ndarray, intensity: np.ndarray) -> dict:
    from skimage.measure import regionprops_table

    return regionprops_table(
        labels,
        intensity_image=intensity,
        properties=(
            "label",
            "area",
            "bbox",
            "centroid",
            "intensity_mean",
            "intensity_min",
            "intensity_max",
        ),
    )


def after_cupyx(labels, n: int, intensity) -> dict:
    """The same table from device labels with cupyx.scipy.ndimage (one call per quantity)."""
    import cupy as cp
    from cupyx.scipy import ndimage as cnd

    idx = cp.arange(1, n + 1)
    ones = cp.ones(labels.shape, cp.float32)
    out = {"area": cnd.sum_labels(ones, labels, idx)}
    for a in range(labels.ndim):
        coord = cp.broadcast_to(
            cp.arange(labels.shape[a], dtype=cp.float64).reshape(
                [-1 if i == a else 1 for i in range(labels.ndim)]
            ),
            labels.shape,
        )
        out[f"csum-{a}"] = cnd.sum_labels(coord, labels, idx)
        out[f"lo-{a}"] = cnd.minimum(coord, labels, idx)
        out[f"hi-{a}"] = cnd.maximum(coord, labels, idx)
    out["intensity_sum"] = cnd.sum_labels(intensity, labels, idx)
    out["intensity_min"] = cnd.minimum(intensity, labels, idx)
    out["intensity_max"] = cnd.maximum(intensity, labels, idx)
    return out


def kernel_table(rows: list[tuple[str, float]]) -> str:
    """The kernel part's Markdown table: each step's seconds and their ratio to labeling's."""
    t_label = dict(rows)["label"]
    lines = ["| step | seconds | × label |", "|---|---|---|"]
    lines += [f"| {name} | {t:.4f} | {t / t_label:.2f} |" for name, t in rows]
    return "\n".join(lines)


def pipeline_table(times: dict, cpu: dict, components: dict) -> str:
    """The pipeline part's Markdown table: each variant's wall and CPU seconds (medians) and
    their ratios to the plain run's."""
    base = statistics.median(times["plain"])
    cbase = statistics.median(cpu["plain"])
    lines = [
        "| run | components | wall s (median) | × plain | CPU s, workers + client (median)"
        " | × plain |",
        "|---|---|---|---|---|---|",
    ]
    for name, ts in times.items():
        m, cm = statistics.median(ts), statistics.median(cpu[name])
        lines.append(
            f"| {name} | {components[name]:,} | {m:.2f} | {m / base:.3f} | {cm:.2f} | "
            f"{cm / cbase:.3f} |"
        )
    return "\n".join(lines)


def kernel_part(args, img: np.ndarray, intensity: np.ndarray) -> tuple[list, int]:
    """(step, seconds) of every step, and the number of components."""
    be = get_backend(args.backend)
    dt = label_dtype(max_components(img.shape, 3**img.ndim - 1))
    if args.backend == "cuda":
        import cupy as cp

        dev_img = cp.asarray(img)
        dev_int = cp.asarray(intensity)
    else:
        dev_img, dev_int = img, intensity
    rows = []
    t_label = timeit(lambda: be.label(dev_img, 3**img.ndim - 1, dt), args.backend, args.repeats)
    rows.append(("label", t_label))
    labels, n = be.label(dev_img, 3**img.ndim - 1, dt)
    off = (0,) * img.ndim
    rows.append(
        (
            "stats pass (count, box, centroid)",
            timeit(lambda: be.label_stats(labels, n, off), args.backend, args.repeats),
        )
    )
    rows.append(
        (
            "stats pass with intensity",
            timeit(lambda: be.label_stats(labels, n, off, dev_int), args.backend, args.repeats),
        )
    )
    if args.backend == "cuda":
        rows.append(
            (
                "afterwards: cupyx.scipy.ndimage",
                timeit(lambda: after_cupyx(labels, n, dev_int), args.backend, 1),
            )
        )
        host = cp.asnumpy(labels)
    else:
        host = labels
        rows.append(
            (
                "afterwards: scipy.ndimage (vectorised)",
                timeit(lambda: after_cpu(host, n, intensity), "cpu", 1),
            )
        )
    if not args.skip_skimage:
        rows.append(
            (
                "afterwards: skimage regionprops_table",
                timeit(lambda: after_skimage(np.asarray(host), intensity), "cpu", 1),
            )
        )
    print(f"\n{n:,} components in {img.size:,} voxels ({args.backend})\n")
    print(kernel_table(rows))
    return rows, int(n)


def pipeline_part(args, img: np.ndarray, intensity: np.ndarray) -> dict[str, list[float]]:
    import zarr
    from distributed import Client, LocalCluster

    import tilelabel

    tmp = Path(tempfile.mkdtemp(prefix="tilelabel-stats-bench-", dir=args.tmp))
    try:
        storage = args.storage or tuple(min(64, s) for s in img.shape)
        src = zarr.create_array(
            str(tmp / "in.zarr"), shape=img.shape, chunks=storage, dtype=np.uint8
        )
        src[...] = img
        ints = zarr.create_array(
            str(tmp / "int.zarr"), shape=img.shape, chunks=storage, dtype=intensity.dtype
        )
        ints[...] = intensity
        variants = {
            "plain": {},
            "stats": {"stats": str(tmp / "s.parquet")},
            "stats + intensity": {
                "stats": str(tmp / "s.parquet"),
                "intensity": str(tmp / "int.zarr"),
            },
            f"min_size={args.min_size}": {"min_size": args.min_size},
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        kind = {}
        if args.backend == "cuda":
            from dask_cuda import LocalCUDACluster

            cluster = LocalCUDACluster(dashboard_address=None)
        else:
            cluster = LocalCluster(
                n_workers=args.workers, threads_per_worker=1, dashboard_address=None
            )
        with cluster, Client(cluster) as c:
            for r in range(args.pipeline_repeats + 1):  # the first round warms up (jit, caches)
                for name, extra in variants.items():
                    c0 = sum(c.run(time.process_time).values()) + time.process_time()
                    t = time.perf_counter()
                    n = tilelabel.label_zarr(
                        str(tmp / "in.zarr"),
                        str(tmp / "out.zarr"),
                        chunks=args.chunks,
                        backend=args.backend,
                        client=c,
                        overwrite=True,
                        **extra,
                    )
                    dt = time.perf_counter() - t
                    c1 = sum(c.run(time.process_time).values()) + time.process_time()
                    kind[name] = n
                    if r:
                        times[name].append(dt)
                        cpu[name].append(c1 - c0)
        print(
            f"\nzarr -> zarr, {img.shape}, chunks {args.chunks}, {args.backend}, "
            f"{args.workers if args.backend == 'cpu' else 'all'} workers, "
            f"median of {args.pipeline_repeats}\n"
        )
        print(pipeline_table(times, cpu, kind))
        return {"wall": times, "cpu": cpu, "components": kind}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--shape", type=_ints, default=(256, 256, 256))
    p.add_argument("--density", type=float, default=0.2)
    p.add_argument("--granularity", type=int, default=4)
    p.add_argument("--chunks", type=_ints, default=None)
    p.add_argument("--storage", type=_ints, default=None, help="zarr storage chunks")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--pipeline-repeats", type=int, default=3)
    p.add_argument("--min-size", type=int, default=10)
    p.add_argument("--parts", default="kernel,pipeline")
    p.add_argument("--skip-skimage", action="store_true")
    p.add_argument("--tmp", default=None, help="where the zarr stores go (default: system tmp)")
    p.add_argument("--json", default=None, help="also write the parts to this file, as before")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = p.parse_args()
    img = random_volume(args.shape, args.density, args.granularity, seed=1)
    intensity = np.random.default_rng(0).integers(0, 4096, args.shape).astype(np.uint16)
    print(
        f"# tilelabel statistics benchmark, {time.strftime('%Y-%m-%d')}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"shape {args.shape}, density {args.density}, granularity {args.granularity}"
    )
    out = {"args": {k: v for k, v in vars(args).items()}}
    rows, md = [], []
    if "kernel" in args.parts:
        out["kernel"], n = kernel_part(args, img, intensity)
        t_label = dict(out["kernel"])["label"]
        rows += [
            {"part": "kernel", "step": step, "seconds": t, "x_label": t / t_label}
            for step, t in out["kernel"]
        ]
        md += [
            f"One array in memory: {n:,} components in {img.size:,} voxels; median of "
            f"{args.repeats} runs after a warm-up (the afterwards rows: one run):",
            "",
            kernel_table(out["kernel"]),
            "",
        ]
    if "pipeline" in args.parts:
        out["pipeline"] = part = pipeline_part(args, img, intensity)
        for run, walls in part["wall"].items():
            rows.append(
                {
                    "part": "pipeline",
                    "run": run,
                    "components": part["components"][run],
                    "wall_s": walls,
                    "cpu_s": part["cpu"][run],
                    "wall_median_s": statistics.median(walls),
                    "cpu_median_s": statistics.median(part["cpu"][run]),
                }
            )
        workers = args.workers if args.backend == "cpu" else "all"
        md += [
            f"zarr to zarr on a local cluster ({workers} workers), processing chunks "
            f"{args.chunks or 'tilelabel default'}; median of {args.pipeline_repeats} interleaved "
            "rounds after a warm-up round:",
            "",
            pipeline_table(part["wall"], part["cpu"], part["components"]),
        ]
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    shape = "x".join(map(str, args.shape))
    parts = "" if args.parts == "kernel,pipeline" else args.parts.split(",")
    record(
        args.out,
        args.name or default_name("stats", device_tag(), args.backend, shape, parts),
        title="Statistics kernels",
        rows=rows,
        markdown="\n".join(md),
        args=args,
        machine={
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        notes=(
            f"A random volume of shape {shape}, density {args.density}, granularity "
            f"{args.granularity}; {args.backend} backend; seconds."
        ),
    )


if __name__ == "__main__":
    main()
