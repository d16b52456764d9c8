"""A huge volume with little data: ``tilelabel label`` on a (2^20)^3 array of which only a few
256^3 chunks are stored, beside a zarr script that copies just those chunks.

The input holds ``--stored`` chunks of random foreground (density 0.3) in clusters of 2 x 2 x 2
touching chunks, spread over the grid; everything else is zarr's fill value 0. Every method is
one fresh process timed from its start to its exit, with the peak memory of that process
(its ``VmHWM``: the run stays in the command's process, so it is the client's):

- ``tilelabel``: ``tilelabel label IN OUT`` (CPU backend unless ``--backend``);
- ``tilelabel-processes``: the same on a local cluster of 2 worker processes (``--workers 2``):
  the command's process is then the client alone, and its peak is what building and running the
  graph costs it;
- ``copy``: zarr -> NumPy -> ``astype(uint32)`` -> zarr of the stored chunks alone, into an
  array of the same shape: what a script that knew where the data is would do, labeling
  nothing.

tilelabel's labels are checked exact against ``scipy.ndimage.label`` of each cluster (numbered
in raster order of the whole volume, cluster after cluster).

    python benchmarks/sparse.py [--stored 8] [--repeat 3] [--out DIR]

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``sparse_<machine>_<stored>``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402

SIDE = 1 << 20
C = 256


def cluster_origins(n_clusters: int) -> list[tuple[int, int, int]]:
    """Grid indices of each cluster's first chunk: along the diagonal, far apart."""
    grid = SIDE // C
    step = (grid - 2) // max(n_clusters - 1, 1)
    return [(i * step, i * step, (grid - 2) - i * step) for i in range(n_clusters)]


def write_input(url: str, stored: int) -> list[tuple[tuple[int, int, int], np.ndarray]]:
    """The input, and each cluster (its origin, its 2C^3 volume)."""
    import zarr

    from tilelabel.synth import random_volume

    arr = zarr.create_array(url, shape=(SIDE,) * 3, chunks=(C,) * 3, dtype="uint8", fill_value=0)
    out = []
    for k, at in enumerate(cluster_origins(max(stored // 8, 1))):
        vol = random_volume((2 * C,) * 3, 0.3, seed=k)
        arr[tuple(slice(a * C, (a + 2) * C) for a in at)] = vol
        out.append((at, vol))
    return out


def copy_script(src: str, dst: str) -> None:
    """Each stored chunk read and written as uint32: the stored chunks are listed by the
    caller, who knows where the data is."""
    import zarr

    a = zarr.open_array(src, mode="r")
    b = zarr.create_array(dst, shape=a.shape, chunks=a.chunks, dtype="uint32", fill_value=0)
    for line in sys.stdin.read().split():
        idx = tuple(int(v) for v in line.split(","))
        sl = tuple(slice(i * C, (i + 1) * C) for i in idx)
        b[sl] = a[sl].astype(np.uint32)


def timed(cmd: list[str], stdin: str | None = None) -> tuple[float, float]:
    """(seconds, peak MiB) of one fresh process: its ``VmHWM`` (the high-water mark of its own
    memory, which ``ru_maxrss`` is not: Linux carries the forking parent's into it), read
    until it exits."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    proc.stdin.write(stdin or "")
    proc.stdin.close()
    status, peak = Path(f"/proc/{proc.pid}/status"), 0
    while proc.poll() is None:
        with contextlib.suppress(OSError, ValueError, IndexError, StopIteration):
            line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM"))
            peak = max(peak, int(line.split()[1]))
        time.sleep(0.01)
    took = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return took, peak / 1024


def check(dst: str, clusters) -> bool:
    import zarr
    from scipy import ndimage

    arr, base = zarr.open_array(dst, mode="r"), 0
    for at, vol in clusters:
        ref, n = ndimage.label(vol, np.ones((3, 3, 3), bool))
        ref[ref > 0] += base
        got = arr[tuple(slice(a * C, (a + 2) * C) for a in at)]
        if not np.array_equal(got, ref):
            return False
        base += n
    return True


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stored", type=int, default=8, help="stored 256^3 chunks (a multiple of 8)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--out", default=os.environ.get("OUT", str(HERE / "out")))
    p.add_argument("--name")
    p.add_argument("--script", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.script:
        return copy_script(*args.script)
    work = Path(tempfile.mkdtemp(prefix="tilelabel-sparse-"))
    src = str(work / "in.zarr")
    clusters = write_input(src, args.stored)
    chunks = "\n".join(
        ",".join(str(a + d) for a, d in zip(at, step, strict=True))
        for at, _ in clusters
        for step in np.ndindex(2, 2, 2)
    )
    label = [sys.executable, "-m", "tilelabel.cli", "label", src, str(work / "out.zarr")]
    label += ["--backend", args.backend, "--overwrite", "-q"]
    copy = [sys.executable, str(Path(__file__).resolve()), "--script", src, str(work / "c.zarr")]
    rows = []
    methods = (
        ("tilelabel", label, None),
        ("tilelabel-processes", [*label, "--workers", "2"], None),
        ("copy", copy, chunks),
    )
    for method, cmd, stdin in methods:
        for i in range(args.repeat):
            if method == "copy":
                subprocess.run(["rm", "-rf", str(work / "c.zarr")], check=True)
            seconds, mib = timed(cmd, stdin)
            labeled = method.startswith("tilelabel")
            exact = check(str(work / "out.zarr"), clusters) if labeled else None
            rows.append(
                {
                    "method": method,
                    "repeat": i,
                    "seconds": round(seconds, 3),
                    "peak_mib": round(mib, 1),
                    "exact": exact,
                }
            )
            print(rows[-1], flush=True)
    n = len(clusters) * 8
    lines = ["| method | seconds (median) | peak memory (MiB) | exact |", "|---|---:|---:|---|"]
    for method, *_ in methods:
        mine = [r for r in rows if r["method"] == method]
        med = float(np.median([r["seconds"] for r in mine]))
        mib = max(r["peak_mib"] for r in mine)
        ok = "" if method == "copy" else ("yes" if all(r["exact"] for r in mine) else "**NO**")
        lines.append(f"| {method} | {med:.2f} | {mib:.0f} | {ok} |")
    name = args.name or report.default_name("sparse", n)
    report.record(
        args.out,
        name,
        title=f"A (2^20)^3 volume with {n} stored 256^3 chunks",
        rows=rows,
        markdown="\n".join(lines),
        args=args,
        notes=(
            f"Shape (1048576, 1048576, 1048576) uint8, {n} of 68,719,476,736 chunks stored "
            f"(density 0.3 inside them), backend {args.backend}; median of {args.repeat} fresh "
            "processes; peak memory is the process's maximum resident set."
        ),
    )


if __name__ == "__main__":
    main()
