"""What the analyses cost: ``tilelabel label --stats`` and ``--contacts`` beside the plain run
of the same input, as whole processes, and beside the cc3d script a user would write.

Inputs (``--inputs``), ``--size``^3 voxels, zarr arrays of 128^3 chunks (zstd):

- ``stats``: the random volume of :mod:`end_to_end` (density 0.2, granularity 1), labeled at
  connectivity 26 with ``--stats PATH``;
- ``segmentation``: the Voronoi label field of :mod:`multilabel` (uint32, one seed per 16^3
  cell), labeled with ``--multilabel`` (connectivity 26) and ``--contacts PATH``;
- ``binary``: a 0/1 uint8 volume of density 0.2 (:func:`tilelabel.synth.random_volume`,
  granularity 2), labeled at connectivity 6 with ``--contacts PATH --contacts-connectivity 26``
  (binary components touch only through the neighbours the labeling does not join).

Per input, one untimed run of each method first (caches and compilation), then ``--repeat``
rounds of the methods interleaved, each a fresh process timed from start to exit; the median
is reported, and its ratio to the plain run's:

- ``plain``: ``tilelabel label IN OUT`` with the labeling's options;
- ``stats`` or ``contacts``: the same with the table asked for;
- ``cc3d`` (segmentation, where ``--cc3d``): zarr -> NumPy -> ``cc3d.connected_components`` ->
  ``cc3d.contacts`` -> zarr and Parquet, the in-memory script.

The first graph of each input is checked against ``tilelabel.kernels.cpu.contacts.contacts``
of the labels written (``--check``; it reads the whole output).

    python benchmarks/analysis.py --size 1024 --repeat 3 --out DIR
    python benchmarks/analysis.py --size 2048 --inputs stats --repeat 1

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``analysis_<machine>_<size>[_<inputs>]``.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from report import default_name, device_tag, record  # noqa: E402

CHUNK = 128


def _write(path: str, data: np.ndarray) -> None:
    import zarr

    out = zarr.create_array(path, shape=data.shape, chunks=(CHUNK,) * 3, dtype=data.dtype)
    out[:] = data


INPUTS = ("stats", "segmentation", "binary")


def make_inputs(
    size: int, work: Path, names: tuple[str, ...] = INPUTS
) -> dict[str, tuple[str, list[str], list[str]]]:
    """Per input of ``names``: its zarr path, the labeling's options and the table's."""
    import multilabel

    from tilelabel.kernels.backends import cuda_available
    from tilelabel.synth import random_volume, voronoi_labels, write_random_zarr

    out = {}
    if "stats" in names:
        path = str(work / "e2e.zarr")
        write_random_zarr(path, (size,) * 3, (CHUNK,) * 3, 0.2, 1, 1)
        out["stats"] = (path, [], ["--stats", str(work / "stats.parquet")])
    if "segmentation" in names:
        seg = multilabel.volume_on_gpu(size, 0).get() if cuda_available() else None
        if seg is None:
            seg = voronoi_labels((size,) * 3, cell=16, seed=0)
        _write(str(work / "seg.zarr"), seg)
        del seg
        graph = ["--contacts", str(work / "segmentation.parquet")]
        out["segmentation"] = (str(work / "seg.zarr"), ["--multilabel"], graph)
    if "binary" in names:
        binary = random_volume((size,) * 3, density=0.2, granularity=2, seed=0)
        _write(str(work / "bin.zarr"), binary)
        del binary
        graph = ["--contacts", str(work / "binary.parquet"), "--contacts-connectivity", "26"]
        out["binary"] = (str(work / "bin.zarr"), ["-c", "6"], graph)
    return out


def cc3d_script(src: str, dst: str, graph: str) -> None:
    """What a cc3d user writes: the whole volume in memory."""
    import cc3d
    import pandas as pd
    import zarr

    vol = zarr.open_array(src)[:]
    labels = cc3d.connected_components(vol, connectivity=26, out_dtype=np.uint32)
    pairs = cc3d.contacts(labels, connectivity=26)
    keys = np.array(list(pairs), np.int64).reshape(-1, 2)
    pd.DataFrame(
        {"label_a": keys[:, 0], "label_b": keys[:, 1], "area": list(pairs.values())}
    ).to_parquet(graph)
    _write(dst, labels)


def run(cmd: list[str]) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return wall


def _rows(path: str) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def check(out: str, graph: str, conn: int) -> bool:
    import pandas as pd
    import zarr

    from tilelabel.kernels.cpu.contacts import contacts

    pairs, counts, _ = contacts(zarr.open_array(out)[:], conn)
    df = pd.read_parquet(graph).sort_values(["label_a", "label_b"])
    return np.array_equal(df[["label_a", "label_b"]].to_numpy(), pairs.astype(np.int64)) and (
        np.array_equal(df["count"].to_numpy(), counts)
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--inputs", nargs="+", choices=INPUTS, default=list(INPUTS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cc3d", action="store_true", help="also time the cc3d script")
    p.add_argument("--check", action="store_true", help="check each graph against the kernel")
    p.add_argument("--work", help="folder for the volumes (default: a temporary one)")
    p.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "benchmarks" / "out")))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--cc3d-script":
        return cc3d_script(*sys.argv[2:5])
    args = p.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="tilelabel-analysis-"))
    inputs = make_inputs(args.size, work, tuple(args.inputs))
    tl = [sys.executable, "-m", "tilelabel.cli", "label"]
    rows = []
    for name, (src, flags, table) in inputs.items():
        out, graph = str(work / f"{name}-out.zarr"), table[1]
        method = "stats" if name == "stats" else "contacts"
        methods = {
            "plain": [*tl, src, out, "--overwrite", "-q", *flags],
            method: [*tl, src, out, "--overwrite", "-q", *flags, *table],
        }
        if args.cc3d and name == "segmentation":
            methods["cc3d"] = [sys.executable, __file__, "--cc3d-script", src, out, graph]
        times: dict[str, list[float]] = {m: [] for m in methods}
        for m, cmd in methods.items():  # untimed: caches and compilation
            shutil.rmtree(out, ignore_errors=True)
            Path(graph).unlink(missing_ok=True)
            run(cmd)
            if m == method:
                rows_written = _rows(graph)
            if m == "contacts" and args.check:
                ok = check(out, graph, 26)
                print(f"{name}: graph {'equal' if ok else 'DIFFERENT'} to the kernel's", flush=True)
                rows.append({"input": name, "method": "check", "equal": ok})
        for _ in range(args.repeat):
            for m, cmd in methods.items():
                shutil.rmtree(out, ignore_errors=True)
                Path(graph).unlink(missing_ok=True)
                times[m].append(run(cmd))
                print(f"{name:13s} {m:9s} {times[m][-1]:7.2f} s", flush=True)
        plain = statistics.median(times["plain"])
        for m, ts in times.items():
            med = statistics.median(ts)
            rows.append({"input": name, "method": m, "median_s": med, "times_s": ts,
                         "vs_plain": med / plain,
                         "table_rows": rows_written if m == method else None})  # fmt: skip
    lines = ["| input | method | table rows | median | × plain |", "|---|---|---:|---:|---:|"]
    for r in rows:
        if r["method"] != "check":
            n = "" if r["table_rows"] is None else f"{r['table_rows']:,}"
            lines.append(
                f"| {r['input']} | {r['method']} | {n} | {r['median_s']:.2f} s "
                f"| {r['vs_plain']:.2f} |"
            )
    markdown = "\n".join(lines)
    print(markdown)
    parts = [] if set(args.inputs) == set(INPUTS) else args.inputs
    name = args.name or default_name("analysis", device_tag(), args.size, parts)
    record(
        args.out,
        name,
        title=f"Statistics and region graph beside the plain run, {args.size}³",
        rows=rows,
        markdown=markdown,
        args=args,
        argv=argv,
    )
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
