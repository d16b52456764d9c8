"""``tilelabel.cc3d`` beside cc3d, function by function, in one process: what a cc3d user meets
after ``import tilelabel.cc3d as cc3d``.

Inputs, ``--size``^3 voxels:

- ``segmentation``: a uint32 Voronoi label field (:func:`tilelabel.synth.voronoi_labels`: one
  seed per 16^3 cell, values 1..4096, 10 % of the cells background; made on the GPU where there
  is one), with 0.5 % of its voxels set to random values (specks of one or a few voxels);
- ``binary``: a bool volume of density 0.2 (:func:`tilelabel.synth.random_volume`, granularity
  2: blobs of a few voxels, hundreds of thousands of components).

Rows: ``connected_components`` of each at connectivity 6, 18 and 26, ``dust`` (threshold 100,
connectivity 26) and ``contacts`` (the contact areas, cc3d's default, of the segmentation's
labels). Methods, each
first run once untimed (numba loads its cache, CuPy compiles), then timed ``--repeat`` times,
the median reported, every result checked equal to cc3d's:

- ``cc3d``: ``cc3d.<function>(numpy array)``, one thread (cc3d has no threading);
- ``tilelabel``: ``tilelabel.cc3d.<function>(numpy array)`` on every usable core, as imported;
- ``tilelabel 1 core``: the same with this process pinned to one core (``sched_setaffinity``);
- ``tilelabel cupy``: ``connected_components`` of a CuPy array on the GPU, labels left there
  (synchronised), where there is a GPU.

    python benchmarks/cc3d_functions.py --size 512 --repeat 3 --out DIR

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``cc3d_functions_<machine>_<size>``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import multilabel  # noqa: E402
from report import default_name, device_tag, record  # noqa: E402

import tilelabel.cc3d as tl  # noqa: E402
from tilelabel.cores import usable_cores  # noqa: E402
from tilelabel.kernels.backends import cuda_available  # noqa: E402

SPECKS = 0.005


def segmentation(size: int, seed: int = 0) -> np.ndarray:
    if cuda_available():
        vol = multilabel.volume_on_gpu(size, seed).get()
    else:
        from tilelabel.synth import voronoi_labels

        vol = voronoi_labels((size,) * 3, 16, 4096, 0.1, seed)
    rng = np.random.default_rng(seed)
    at = rng.random(vol.shape, np.float32) < SPECKS
    vol[at] = rng.integers(1, 4097, int(at.sum()), dtype=np.uint32)
    return vol


@contextlib.contextmanager
def one_core():
    """This process (all its threads) on one core, for the duration."""
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)


def timed(fn, repeat: int, sync=None):
    """(median seconds, first result) of ``repeat`` calls after an untimed one (numba's cache,
    CuPy's kernels and memory pool)."""
    fn()
    if sync:
        sync()
    median, _, first = multilabel.timed(fn, repeat, sync)
    return median, first


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(np.isclose(a[k], b[k]) for k in a)
    if hasattr(a, "get"):
        a = a.get()
    return a.dtype == b.dtype and np.array_equal(a, b)


def cases(seg: np.ndarray, binary: np.ndarray):
    """(function, input, connectivity, call of a module) of every row."""
    for name, vol in (("segmentation", seg), ("binary", binary)):
        for conn in (6, 18, 26):
            yield (
                "connected_components",
                name,
                conn,
                vol,
                (lambda m, v=vol, c=conn: m.connected_components(v, connectivity=c)),
            )
    yield "dust", "segmentation", 26, seg, lambda m: m.dust(seg, 100, connectivity=26)
    labels = tl.connected_components(seg, connectivity=26)
    yield (
        "contacts",
        "segmentation labels",
        26,
        labels,
        (lambda m: m.contacts(labels, connectivity=26)),
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "benchmarks" / "out")))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    args = p.parse_args(argv)

    from importlib.metadata import version

    import cc3d

    from tilelabel import __version__
    from tilelabel.synth import random_volume

    t = time.perf_counter()
    seg = segmentation(args.size)
    binary = random_volume((args.size,) * 3, 0.2, 2).astype(bool)
    print(f"inputs made in {time.perf_counter() - t:.1f} s", flush=True)
    gpu = cuda_available()
    rows = []
    for fn, name, conn, vol, call in cases(seg, binary):
        base, want = timed(lambda c=call: c(cc3d), args.repeat)
        row = {"function": fn, "input": name, "connectivity": conn, "cc3d_s": base}
        row["tilelabel_s"], got = timed(lambda c=call: c(tl), args.repeat)
        row["equal"] = same(got, want)
        with one_core():
            row["one_core_s"], got = timed(lambda c=call: c(tl), args.repeat)
        row["equal"] &= same(got, want)
        if gpu and fn == "connected_components":
            import cupy as cp

            dev = cp.asarray(vol)
            sync = cp.cuda.get_current_stream().synchronize
            row["cupy_s"], got = timed(
                lambda d=dev, c=conn: tl.connected_components(d, connectivity=c), args.repeat, sync
            )
            row["equal"] &= same(got, want.astype(got.dtype))  # CuPy: uint32 labels
            del dev, got
        rows.append(row)
        cells = " ".join(f"{k} {v:.3f}" for k, v in row.items() if k.endswith("_s"))
        print(f"{fn} {name} c{conn}: {cells} equal={row['equal']}", flush=True)
    md = table(rows, gpu)
    print(md)
    name = args.name or default_name("cc3d_functions", device_tag(), [args.size])
    notes = (
        f"tilelabel {__version__}, cc3d {version('connected-components-3d')}; {args.size}³ "
        f"inputs; seconds, median of {args.repeat} after an untimed call; tilelabel on "
        f"{usable_cores()} cores as imported and pinned to one; every result equal to cc3d's."
    )
    record(
        args.out, name, title="tilelabel.cc3d beside cc3d", rows=rows, markdown=md, args=args,
        notes=notes, argv=argv,
    )  # fmt: skip


def table(rows: list[dict], gpu: bool) -> str:
    head = "| function | input | conn | cc3d | tilelabel | ×cc3d | 1 core | ×cc3d |"
    line = "|---|---|---:|---:|---:|---:|---:|---:|"
    if gpu:
        head += " CuPy | ×cc3d |"
        line += "---:|---:|"
    out = [head + " equal |", line + "---|"]
    for r in rows:
        cells = [r["function"], r["input"], str(r["connectivity"]), f"{r['cc3d_s']:.3f} s"]
        for key in ("tilelabel_s", "one_core_s", *(("cupy_s",) if gpu else ())):
            if key in r:
                cells += [f"{r[key]:.3f} s", f"{r['cc3d_s'] / r[key]:.1f}×"]
            else:
                cells += ["", ""]
        cells.append("yes" if r["equal"] else "**NO**")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
