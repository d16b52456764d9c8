"""Dusting a segmentation as users run it: ``tilelabel label IN OUT --dust N`` beside the cc3d
script they would write instead, whole processes in one run.

The input is a uint32 segmentation of ``--size``^3 voxels in 128^3 chunks: a Voronoi label
field (:func:`tilelabel.synth.voronoi_labels`, one seed per 16^3 cell, values 1..4096, 10 % of
the cells background; made on the GPU where there is one), with 0.5 % of its voxels set to
random values (specks of one or a few voxels, the dust). Methods, each one fresh process timed
from its start to its exit:

- ``tilelabel``: ``tilelabel label IN OUT --dust N`` (after an untimed run of the same size);
- ``cc3d``: zarr -> NumPy -> ``cc3d.dust(volume, N, connectivity=26)`` -> zarr;
- ``copy``: zarr -> NumPy -> zarr, which dusts nothing.

The two dusted outputs are checked identical (a digest of their decoded chunks).

    python benchmarks/dust.py --size 1024 --threshold 100 --repeat 3 --out DIR

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``dust_<machine>_<size>``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("tilelabel", "cc3d", "copy")
SPECKS = 0.005


def script(name: str, src_url: str, dst: str, threshold: int) -> None:
    """The one-process scripts: read the whole volume, dust it (or not), write it alike."""
    import zarr

    src = zarr.open_array(src_url, mode="r")
    volume = src[...]
    if name == "cc3d":
        import cc3d

        volume = cc3d.dust(volume, threshold, connectivity=26, in_place=True)
    out = zarr.create_array(
        dst, shape=src.shape, chunks=src.chunks, dtype=src.dtype, compressors=src.compressors,
        fill_value=0, overwrite=True,
    )  # fmt: skip
    out[...] = volume


def write_input(url: str, size: int, seed: int = 0) -> None:
    import numpy as np
    import zarr

    from tilelabel.kernels.backends import cuda_available

    if cuda_available():  # a billion voxels in a second, where numpy takes minutes
        from multilabel import volume_on_gpu

        vol = volume_on_gpu(size, seed).get()
    else:
        from tilelabel.synth import voronoi_labels

        vol = voronoi_labels((size,) * 3, 16, 4096, 0.1, seed)
    rng = np.random.default_rng(seed)
    at = rng.random(vol.shape, np.float32) < SPECKS
    vol[at] = rng.integers(1, 4097, int(at.sum()), dtype=np.uint32)
    zarr.create_array(url, data=vol, chunks=(min(size, 128),) * 3, overwrite=True)


def run_one(method: str, src: str, dst: str, threshold: int) -> dict:
    from end_to_end import digest

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if method == "tilelabel":
        cmd = [sys.executable, "-m", "tilelabel.cli", "label", src, dst, "--dust", str(threshold)]
        cmd += ["--overwrite", "-q"]
    else:
        cmd = [
            sys.executable,
            __file__,
            "--script",
            method,
            src,
            dst,
            "--threshold",
            str(threshold),
        ]
    shutil.rmtree(dst, ignore_errors=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    row = {"method": method, "wall_s": time.perf_counter() - t, "rc": proc.returncode}
    if proc.returncode:
        row["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    elif method != "copy":
        row["digest"] = digest(dst)
    print(f"  {method:10s} {row['wall_s']:7.2f} s {row.get('error', '')}", flush=True)
    return row


def table(rows: list[dict], size: int) -> str:
    wall = {
        m: statistics.median(r["wall_s"] for r in rows if r["method"] == m and not r["rc"])
        for m in METHODS
        if any(r["method"] == m and not r["rc"] for r in rows)
    }
    digests = {r["digest"] for r in rows if "digest" in r}
    same = "identical" if len(digests) == 1 else "**DIFFER**"
    head = "| size | " + " | ".join(wall) + " | cc3d / tilelabel | outputs |"
    line = "|---|" + "---:|" * len(wall) + "---:|---|"
    ratio = wall["cc3d"] / wall["tilelabel"] if {"cc3d", "tilelabel"} <= wall.keys() else 0
    cells = " | ".join(f"{w:.2f} s" for w in wall.values())
    return f"{head}\n{line}\n| {size}³ | {cells} | {ratio:.2f}× | {same} |\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--threshold", type=int, default=100)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--work", help="folder for the volumes (default: a temporary one)")
    p.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "benchmarks" / "out")))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    p.add_argument("--script", nargs=3, metavar=("NAME", "IN", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.script:
        return script(*args.script, args.threshold)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report import default_name, device_tag, record

    from tilelabel import __version__

    work = Path(args.work or tempfile.mkdtemp(prefix="tilelabel-dust-"))
    work.mkdir(parents=True, exist_ok=True)
    src = str(work / f"seg{args.size}.zarr")
    rows: list[dict] = []
    try:
        if not os.path.exists(src):
            t = time.perf_counter()
            write_input(src, args.size)
            print(f"{args.size}^3: input written in {time.perf_counter() - t:.1f} s", flush=True)
        run_one("tilelabel", src, str(work / "warm.zarr"), args.threshold)  # untimed
        for _ in range(args.repeat):
            for m in METHODS:
                rows.append(run_one(m, src, str(work / f"out-{m}.zarr"), args.threshold))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    md = table(rows, args.size)
    print(md)
    name = args.name or default_name("dust", device_tag(), [args.size])
    notes = (
        f"tilelabel {__version__}; uint32 Voronoi segmentation with {SPECKS:.1%} specks, 128³ "
        f"chunks, threshold {args.threshold}, connectivity 26; wall seconds of whole processes "
        f"(median of {args.repeat})."
    )
    record(
        args.out, name, title="Dust, as users run it", rows=rows, markdown=md, args=args,
        notes=notes, argv=argv,
    )  # fmt: skip


if __name__ == "__main__":
    main()
