"""Whole processes as users run them: ``tilelabel label`` beside the scripts they would write.

Every method is one fresh process, timed from its start to its exit (imports, cluster start and
teardown, compilation included), on the same input, in one run:

- ``tilelabel-first``: ``tilelabel label IN OUT`` before any other run of that size, the
  machine's first labeling when it is the first size: on a newly started machine every cache
  that tilelabel, CuPy, numba and the CUDA driver keep is empty (``caches_at_start`` in the
  results says what the cache folders held when the benchmark began);
- ``tilelabel``: the same, warm (an untimed run of the same size comes first);
- ``tilelabel-processes``: the same on a local cluster, as a run whose volume does not fit one
  process gets (``--workers 1``: a worker on the GPU, on a GPU; ``--workers CORES`` on the CPU
  backend);
- ``tilelabel-wrap``: ``tilelabel label IN OUT --wrap z,y,x`` (periodic boundaries: other
  labels, so its output is not compared with the others);
- ``notebook``: one process that starts a cluster (``LocalCUDACluster()`` with a GPU, else
  ``LocalCluster()``), then calls ``label_zarr`` on it twice; its row gives the cluster start
  and both calls; ``notebook-preload``: the same with its workers started with tilelabel's
  preload (``preload=["tilelabel.cluster.preload"]``);
- ``cupyx``: zarr -> NumPy -> CuPy -> ``cupyx.scipy.ndimage.label`` -> zarr (GPU only);
- ``cc3d``: zarr -> NumPy -> ``cc3d.connected_components`` -> zarr;
- ``scipy``: zarr -> NumPy -> ``scipy.ndimage.label`` -> zarr;
- ``copy``: zarr -> NumPy -> ``astype(uint32)`` -> zarr: a one-process zarr-to-zarr job that
  labels nothing.

The scripts read the whole input with zarr and write a uint32 array with the input's chunks and
codec, as a user would. Full connectivity (26 in 3D) everywhere. Every labeled output is checked
identical (a digest of its decoded chunks); a mismatch is printed and marked in the table.

    python benchmarks/end_to_end.py --sizes 64 256 1024 2048 --out DIR
    python benchmarks/end_to_end.py --sizes 64 --methods tilelabel scipy copy --repeat 3
    python benchmarks/end_to_end.py --sizes 1024 --first --flags="--stats {work}/st.parquet"

Bytecode is compiled first (``compileall``), as pip leaves an install, for first and warm runs
alike. ``--flags``: more options of every ``tilelabel label`` run (``{work}``: the folder of the
volumes).

Writes ``NAME.json`` (``report.record``'s envelope) and ``NAME.md`` to DIR (default: $OUT or
benchmarks/out); NAME: ``--name``, by default ``end_to_end_<machine>_<sizes>`` (``_cpu`` after
it for the CPU backend on a GPU machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABELED = (
    "tilelabel-first",
    "tilelabel",
    "tilelabel-processes",
    "notebook",
    "notebook-preload",
    "cupyx",
    "cc3d",
    "scipy",
)
METHODS = (*LABELED, "tilelabel-wrap", "copy")

# --- the scripts users would write; each runs as `python end_to_end.py --script NAME IN OUT` ---


def _write_like(src, dst: str, labels) -> None:
    import zarr

    out = zarr.create_array(
        dst,
        shape=src.shape,
        chunks=src.chunks,
        dtype="uint32",
        compressors=src.compressors,
        fill_value=0,
        overwrite=True,
    )
    out[...] = labels


def script(name: str, src_url: str, dst: str) -> None:
    import numpy as np
    import zarr

    src = zarr.open_array(src_url, mode="r")
    volume = src[...]
    if name == "copy":
        _write_like(src, dst, volume.astype(np.uint32))
    elif name == "scipy":
        from scipy import ndimage

        labels, _ = ndimage.label(volume, np.ones((3,) * volume.ndim, bool), output=np.uint32)
        _write_like(src, dst, labels)
    elif name == "cc3d":
        import cc3d

        _write_like(
            src, dst, cc3d.connected_components(volume, connectivity=26, out_dtype=np.uint32)
        )
    elif name == "cupyx":
        import cupy as cp
        from cupyx.scipy import ndimage

        structure = cp.ones((3,) * volume.ndim, bool)
        labels, _ = ndimage.label(cp.asarray(volume), structure, output=cp.uint32)
        _write_like(src, dst, labels.get())
    else:
        raise ValueError(f"unknown script {name!r}")


def notebook(src: str, dst: str, backend: str, preload: bool = False) -> None:
    """What a notebook does: start a cluster (its workers preloaded with tilelabel's
    ``preload``), then label twice on it; prints the three times."""
    t0 = time.perf_counter()
    from distributed import Client

    import tilelabel

    kwargs = {"preload": ["tilelabel.cluster.preload"]} if preload else {}
    if backend == "cuda":
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(**kwargs)
    else:
        from distributed import LocalCluster

        cluster = LocalCluster(**kwargs)
    client = Client(cluster)
    times = {"cluster_s": time.perf_counter() - t0}
    for call in ("first_s", "second_s"):
        t = time.perf_counter()
        tilelabel.label_zarr(src, dst, overwrite=True, client=client)
        times[call] = time.perf_counter() - t
    print("NOTEBOOK " + json.dumps(times), flush=True)
    client.close()
    cluster.close()


# --- the benchmark ---


def digest(url: str) -> str:
    """A digest of the array's decoded values, slab by slab in threads (hashlib frees the GIL)."""
    import zarr

    arr = zarr.open_array(url, mode="r")
    step = max(1, arr.chunks[0])

    def slab(z: int) -> bytes:
        block = arr[z : z + step]
        return hashlib.blake2b(memoryview(block.astype("<u4", copy=False)).cast("B")).digest()

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        parts = list(pool.map(slab, range(0, arr.shape[0], step)))
    return hashlib.blake2b(b"".join(parts), digest_size=16).hexdigest()


def caches_at_start() -> dict[str, int]:
    """Files in each cache folder that a first run fills: CuPy's kernels, the CUDA driver's
    JIT cache, numba's cache of tilelabel's functions (0 on a newly started machine)."""
    folders = {
        "cupy": os.environ.get("CUPY_CACHE_DIR", "~/.cupy/kernel_cache"),
        "cuda_driver": os.environ.get("CUDA_CACHE_PATH", "~/.nv/ComputeCache"),
        "numba": os.environ.get("NUMBA_CACHE_DIR", str(ROOT / "tilelabel")),
    }
    out = {}
    for name, folder in folders.items():
        files = Path(folder).expanduser().rglob("*.nbi" if name == "numba" else "*")
        out[name] = sum(1 for f in files if f.is_file())
    return out


def command(
    method: str, src: str, dst: str, backend: str, cores: int, flags: tuple[str, ...] = ()
) -> list[str]:
    py = [sys.executable]
    if method.startswith("tilelabel"):
        cmd = [*py, "-m", "tilelabel.cli", "label", src, dst, "--overwrite", "-q", *flags]
        if method == "tilelabel-processes":
            cmd += ["--workers", "1" if backend == "cuda" else str(cores)]
        if method == "tilelabel-wrap":
            cmd += ["--wrap", "z,y,x"]
        return cmd
    if method.startswith("notebook"):
        preload = ["--preload"] if method == "notebook-preload" else []
        return [*py, __file__, "--notebook", backend, src, dst, *preload]
    return [*py, __file__, "--script", method, src, dst]


def run_one(
    method: str,
    src: str,
    dst: str,
    backend: str,
    cores: int,
    label: str = "",
    flags: tuple[str, ...] = (),
) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    shutil.rmtree(dst, ignore_errors=True)
    t = time.perf_counter()
    proc = subprocess.run(
        command(method, src, dst, backend, cores, flags),
        env=env,
        capture_output=True,
        text=True,
    )
    row = {"method": method, "wall_s": time.perf_counter() - t, "rc": proc.returncode}
    if proc.returncode != 0:
        row["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        print(f"  {method}: FAILED {row['error']}", flush=True)
        return row
    for line in proc.stdout.splitlines():
        if line.startswith("NOTEBOOK "):
            row.update(json.loads(line[len("NOTEBOOK ") :]))
    if method in LABELED:
        row["digest"] = digest(dst)
    extra = "".join(
        f" {k} {row[k]:.2f} s" for k in ("cluster_s", "first_s", "second_s") if k in row
    )
    print(f"  {label or method:20s} {row['wall_s']:7.2f} s{extra}", flush=True)
    return row


def table(rows: list[dict]) -> str:
    """One line per size: each method's wall seconds (median of its rounds), ratios to the
    in-core script and the copy, and a mark where a labeled output differs from the others."""
    sizes = sorted({r["size"] for r in rows})
    present = [m for m in METHODS if any(r["method"] == m for r in rows)]
    order = [*LABELED, "tilelabel-wrap", "copy"]
    present.sort(key=order.index)
    # the in-core script to compare with: cupyx where it ran (a GPU), else cc3d
    refs = ("cupyx" if "cupyx" in present else "cc3d", "copy")
    head = "| size | " + " | ".join(present) + f" | tilelabel / {refs[0]} | tilelabel / copy |"
    if "tilelabel-first" in present:
        refs += ("first",)
        head += " first / warm |"
    if "tilelabel-wrap" in present:
        refs += ("wrap",)
        head += " wrap / tilelabel |"
    lines = [head, "|" + "---|" * (len(present) + 1 + len(refs))]
    for size in sizes:
        mine = [r for r in rows if r["size"] == size]
        digests = {r.get("digest") for r in mine if r.get("digest")}
        med = {}
        cells = []
        for m in present:
            walls = sorted(r["wall_s"] for r in mine if r["method"] == m and r["rc"] == 0)
            if not walls:
                cells.append("failed" if any(r["method"] == m for r in mine) else "-")
                continue
            med[m] = walls[len(walls) // 2]
            cell = f"{med[m]:.2f}"
            nb = next((r for r in mine if r["method"] == m and "first_s" in r), None)
            if nb is not None:
                calls = f"{nb['first_s']:.2f} / {nb['second_s']:.2f}"
                cell += f" (start {nb['cluster_s']:.1f}, calls {calls})"
            cells.append(cell)
        ratio = [
            f"{med['tilelabel'] / med[ref]:.2f}×" if "tilelabel" in med and ref in med else "-"
            for ref in refs[:2]
        ]
        if "tilelabel-first" in present:
            both = "tilelabel" in med and "tilelabel-first" in med
            ratio.append(f"{med['tilelabel-first'] / med['tilelabel']:.2f}×" if both else "-")
        if "wrap" in refs:
            both = "tilelabel" in med and "tilelabel-wrap" in med
            ratio.append(f"{med['tilelabel-wrap'] / med['tilelabel']:.3f}×" if both else "-")
        mark = "" if len(digests) <= 1 else " **outputs differ**"
        lines.append(f"| {size}³{mark} | " + " | ".join(cells + ratio) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--methods", nargs="+", choices=METHODS)
    p.add_argument("--density", type=float, default=0.2)
    p.add_argument("--chunks", type=int, default=128, help="storage chunk edge (128)")
    p.add_argument("--repeat", type=int, default=1, help="rounds of every method (1)")
    p.add_argument(
        "--label-chunks", metavar="Z,Y,X", help="processing chunks of the tilelabel methods"
    )
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--first", action="store_true", help="time each size's first run before the others"
    )
    p.add_argument("--flags", default="", help="more options of the tilelabel label runs")
    p.add_argument("--work", help="folder for the volumes (default: a temporary one)")
    p.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "benchmarks" / "out")))
    p.add_argument("--name", help="file stem of the results (default: from the arguments)")
    p.add_argument("--script", nargs=3, metavar=("NAME", "IN", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--notebook", nargs=3, metavar=("BACKEND", "IN", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--preload", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.script:
        return script(*args.script)
    if args.notebook:
        backend, src, dst = args.notebook
        return notebook(src, dst, backend, preload=args.preload)

    sys.path.insert(0, str(ROOT))
    # here, not above: the timed scripts (this file with --script or --notebook) import no more
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report import default_name, device_tag, record

    from tilelabel import __version__
    from tilelabel.cores import usable_cores
    from tilelabel.kernels.backends import resolve_backend
    from tilelabel.synth import write_random_zarr

    if args.first and args.backend == "auto":
        p.error("--first takes --backend cpu or cuda: finding out would touch the GPU first")
    backend = resolve_backend(args.backend)
    methods = args.methods or [m for m in METHODS if backend == "cuda" or m != "cupyx"]
    cores = usable_cores()
    work = Path(args.work or tempfile.mkdtemp(prefix="tilelabel-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    machine = {
        "host": platform.node(),
        "cores": cores,
        "backend": backend,
        "python": sys.version.split()[0],
    }
    print(json.dumps(machine), flush=True)
    machine["caches_at_start"] = caches_at_start()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "tilelabel")], check=True)
    flags = ("--chunks", args.label_chunks) if args.label_chunks else ()
    flags += tuple(args.flags.format(work=work).split())
    rows = []
    try:
        for size in args.sizes:
            src = str(work / f"in{size}.zarr")
            if not os.path.exists(src):
                t = time.perf_counter()
                write_random_zarr(
                    src, (size,) * 3, (min(size, args.chunks),) * 3, args.density, 1, 1
                )
                print(f"{size}^3: input written in {time.perf_counter() - t:.1f} s", flush=True)
            if args.first:  # before anything else labels this size
                dst = str(work / "out-first.zarr")
                row = run_one("tilelabel-first", src, dst, backend, cores, flags=flags)
                rows.append({"size": size, **row})
            if any(m.startswith("tilelabel") for m in methods):
                # untimed: fills the default compile caches with what a run of this size uses
                warm = str(work / "warm.zarr")
                run_one("tilelabel", src, warm, backend, cores, "(warm-up)", flags)
            for _ in range(args.repeat):
                for m in methods:
                    dst = str(work / f"out-{m}.zarr")
                    row = run_one(m, src, dst, backend, cores, flags=flags)
                    rows.append({"size": size, **row})
            for m in methods:
                shutil.rmtree(work / f"out-{m}.zarr", ignore_errors=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if backend == "cuda":  # after the runs: the first of them finds the GPU untouched
        import cupy as cp

        machine["gpu"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    md = table(rows)
    print(md)
    tag = device_tag()
    cpu_on_gpu = "cpu" if backend == "cpu" and not tag.startswith("cpu") else ""
    name = args.name or default_name("end_to_end", tag, args.sizes, cpu_on_gpu)
    notes = (
        f"tilelabel {__version__}, {backend} backend; density {args.density}, {args.chunks}³ "
        f"storage chunks; wall seconds of whole processes (median of {args.repeat})."
    )
    record(
        args.out,
        name,
        title="Whole runs, as users run them",
        rows=rows,
        markdown=md,
        args=args,
        machine=machine,
        notes=notes,
        argv=argv,
    )


if __name__ == "__main__":
    main()
