"""Memory of ``--stats`` as the component count grows: the client's and each worker's peak,
beside the plain run's, whole ``tilelabel label`` processes on a local cluster.

Inputs: ``tilelabel synth``'s random volume of density 0.1 in 128³ chunks, labeled at
connectivity 6 (about 0.07 components per voxel: 1.2·10⁶ at 256³, 9.4·10⁶ at 512³, 7.5·10⁷ at
1024³). Per size, ``tilelabel label IN OUT -c 6 --workers W`` runs plain and with
``--stats st.parquet``; the command's process is the client (it starts the cluster and holds
what it gathers), its descendants the nannies and workers. Peaks are each process's own
resident high-water mark (``VmHWM``), read until it exits.

    python benchmarks/stats_memory.py --sizes 256 512 --workers 2 --backend cpu

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to ``--out`` (default: $OUT
or benchmarks/out); NAME: ``--name``, by default ``stats_memory_<machine>_<sizes>``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from report import default_name, device_tag, record  # noqa: E402


def _hwm(pid: int) -> int:
    """``pid``'s peak resident memory so far (KiB; 0 once it is gone)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return int(next(x for x in status if x.startswith("VmHWM")).split()[1])
    return 0


def watched(cmd: list[str]) -> dict:
    """One fresh process: its seconds, its peak MiB and the largest peak of its descendants
    (workers), sampled every 20 ms until it exits, and its last line of output."""
    import psutil

    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    me, peaks = psutil.Process(proc.pid), {}
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            for p in [me, *me.children(recursive=True)]:
                peaks[p.pid] = max(peaks.get(p.pid, 0), _hwm(p.pid))
        time.sleep(0.02)
    took = time.perf_counter() - t
    out = proc.stdout.read().strip().splitlines()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {out[-3:]}")
    client = peaks.pop(proc.pid, 0)
    return {
        "seconds": took,
        "client_mib": client / 1024,
        "worker_mib": max(peaks.values(), default=0) / 1024,
        "said": out[-1] if out else "",
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--out", default=os.environ.get("OUT", str(HERE / "out")))
    p.add_argument("--name")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tilelabel-statsmem-"))
    cli = [sys.executable, "-m", "tilelabel.cli"]
    rows = []
    try:
        for size in args.sizes:
            src, dst, table = work / f"in{size}.zarr", work / "out.zarr", work / "st.parquet"
            shape = ",".join([str(size)] * 3)
            synth = [*cli, "synth", str(src), "--shape", shape, "--density", "0.1"]
            subprocess.run([*synth, "--chunks", "128,128,128"], check=True, capture_output=True)
            base = [*cli, "label", str(src), str(dst), "-c", "6", "--overwrite", "-q"]
            base += ["--workers", str(args.workers), "--backend", args.backend]
            for kind, extra in (("plain", []), ("stats", ["--stats", str(table)])):
                row = {"size": size, "run": kind, **watched(base + extra)}
                row["components"] = int(row["said"].split()[1].replace(",", ""))
                if kind == "stats":
                    row["table_mib"] = table.stat().st_size / 2**20
                rows.append(row)
                print(
                    f"{size}^3 {kind}: {row['components']:,} components, {row['seconds']:.1f} s, "
                    f"client {row['client_mib']:.0f} MiB, worker {row['worker_mib']:.0f} MiB",
                    flush=True,
                )
            shutil.rmtree(src)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "| size | components | run | seconds | client peak | largest worker peak | table |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        table = f"{r['table_mib']:.0f} MiB" if "table_mib" in r else ""
        lines.append(
            f"| {r['size']}³ | {r['components']:,} | {r['run']} | {r['seconds']:.1f} | "
            f"{r['client_mib']:.0f} MiB | {r['worker_mib']:.0f} MiB | {table} |"
        )
    md = "\n".join(lines) + "\n"
    print(md)
    name = args.name or default_name("stats_memory", device_tag(), args.sizes)
    notes = (
        f"random volumes of density 0.1, 128³ chunks, connectivity 6, {args.backend} backend, "
        f"a local cluster of {args.workers} workers; whole processes, one run each; peak "
        "resident memory per process (VmHWM)."
    )
    record(
        args.out, name, title="Statistics memory as the component count grows", rows=rows,
        markdown=md, args=args, notes=notes, argv=argv,
    )  # fmt: skip


if __name__ == "__main__":
    main()
