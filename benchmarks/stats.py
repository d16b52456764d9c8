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

Prints a Markdown table per part (and writes JSON with ``--json``).
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


def kernel_part(args, img: np.ndarray, intensity: np.ndarray) -> list[tuple[str, float]]:
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
    print("| step | seconds | × label |\n|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t:.4f} | {t / t_label:.2f} |")
    return rows


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
        base = statistics.median(times["plain"])
        cbase = statistics.median(cpu["plain"])
        print(
            f"\nzarr -> zarr, {img.shape}, chunks {args.chunks}, {args.backend}, "
            f"{args.workers if args.backend == 'cpu' else 'all'} workers, "
            f"median of {args.pipeline_repeats}\n"
        )
        print(
            "| run | components | wall s (median) | × plain | CPU s, workers + client (median)"
            " | × plain |\n|---|---|---|---|---|---|"
        )
        for name, ts in times.items():
            m, cm = statistics.median(ts), statistics.median(cpu[name])
            print(
                f"| {name} | {kind[name]:,} | {m:.2f} | {m / base:.3f} | {cm:.2f} | "
                f"{cm / cbase:.3f} |"
            )
        return {"wall": times, "cpu": cpu}
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
    p.add_argument("--json", default=None)
    args = p.parse_args()
    img = random_volume(args.shape, args.density, args.granularity, seed=1)
    intensity = np.random.default_rng(0).integers(0, 4096, args.shape).astype(np.uint16)
    print(
        f"# tilelabel statistics benchmark, {time.strftime('%Y-%m-%d')}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"shape {args.shape}, density {args.density}, granularity {args.granularity}"
    )
    out = {"args": {k: v for k, v in vars(args).items()}}
    if "kernel" in args.parts:
        out["kernel"] = kernel_part(args, img, intensity)
    if "pipeline" in args.parts:
        out["pipeline"] = pipeline_part(args, img, intensity)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
