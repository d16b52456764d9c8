"""Compile tilelabel's CUDA kernels into the binaries that ship with the package.

    python scripts/build_kernels.py [--check] [--jobs N] [--only FAMILY ...]

For each family (``tilelabel/kernels/cuda/<family>.cu``) nvcc compiles the source that
:func:`tilelabel.kernels.cuda.compile.source` gives (headers pasted in), with every name
expression of :func:`tilelabel.kernels.cuda.shipped.instantiations` instantiated, into
``bin/<family>.fatbin``: a cubin per architecture of ``shipped.ARCHS`` and ``shipped.PTX``,
compressed.
``bin/manifest.json`` records each family's digest (source and options), the fatbin's sha256
and the symbol of each name expression (from the PTX's entries, demangled by ``c++filt``).

Needs nvcc (the CUDA toolkit) and binutils' c++filt, no GPU. The same nvcc gives the same
bytes. ``--check`` builds into a temporary folder and fails where the result differs from what
is committed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tilelabel.kernels.cuda import compile as cuda_compile
from tilelabel.kernels.cuda import shipped

BIN = cuda_compile.CUDA_DIR / "bin"
_ENTRY = re.compile(r"^\s*(?:\.visible\s+)?\.entry\s+([A-Za-z0-9_$]+)\s*\(", re.MULTILINE)


def nvcc_version() -> str:
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True)
    return re.search(r"V(\d+\.\d+\.\d+)", out.stdout).group(1)


def instantiating_source(family: str, names: tuple[str, ...]) -> str:
    """The family's source, then each kernel's address taken in host code: nvcc instantiates a
    kernel template wherever the host refers to it."""
    refs = "".join(f"    (const void*)&{name},\n" for name in names)
    table = f"static const void* tilelabel_shipped[] = {{\n{refs}}};\n"
    return f"{cuda_compile.source(family)}\n\n{table}"


def _nvcc(args: list[str], cwd: Path) -> None:
    # 177: the array of kernel addresses is never read, which is its point
    cmd = ["nvcc", *cuda_compile.OPTIONS, "-diag-suppress=177", *args]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"build_kernels: {' '.join(cmd)} failed:\n{done.stderr}")


def _key(text: str) -> str:
    return re.sub(r"\s+", "", text)


def symbols(ptx: str, names: tuple[str, ...]) -> dict[str, str]:
    """Each name expression's mangled symbol among the PTX's entries."""
    entries = _ENTRY.findall(ptx)
    demangled = subprocess.run(
        ["c++filt"], input="\n".join(entries), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    by_name = {}
    for mangled, text in zip(entries, demangled, strict=True):
        # "void blk_final<unsigned int, true>(unsigned int*, ...)" -> "blk_final<unsignedint,true>"
        head = text.split("(", 1)[0].removeprefix("void ")
        by_name[_key(head)] = mangled
    missing = [n for n in names if _key(n) not in by_name]
    if missing:
        sys.exit(f"build_kernels: no entry for {missing[:3]} in the PTX")
    return {n: by_name[_key(n)] for n in names}


def build_family(family: str, names: tuple[str, ...], work: Path) -> dict:
    src = work / f"{family}.cu"
    src.write_text(instantiating_source(family, names))
    _nvcc(["-ptx", f"-arch={shipped.PTX}", "-o", f"{family}.ptx", src.name], work)
    gencode = [f"-gencode=arch=compute_{a[3:]},code={a}" for a in shipped.ARCHS]
    gencode.append(f"-gencode=arch={shipped.PTX},code={shipped.PTX}")
    # compressed for size: a twentieth of the bytes, inflated by the driver as it loads them
    _nvcc(["-fatbin", "--compress-mode=size", *gencode, "-o", f"{family}.fatbin", src.name], work)
    data = (work / f"{family}.fatbin").read_bytes()
    return {
        "digest": cuda_compile.digest(family),
        "sha256": hashlib.sha256(data).hexdigest(),
        "kernels": symbols((work / f"{family}.ptx").read_text(), names),
    }


def build(out: Path, jobs: int, only: list[str] | None = None) -> dict:
    families = shipped.instantiations()
    kept = {}
    if only:  # the others as the committed manifest has them
        kept = json.loads((BIN / "manifest.json").read_text())["families"]
        kept = {f: kept[f] for f in families if f in kept and f not in only}
        families = {f: families[f] for f in only}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            done = pool.map(lambda f: build_family(f, families[f], work), families)
            built = dict(zip(families, done, strict=True))
        out.mkdir(parents=True, exist_ok=True)
        for family in families:
            shutil.copyfile(work / f"{family}.fatbin", out / f"{family}.fatbin")
    manifest = {
        "nvcc": nvcc_version(),
        "options": list(cuda_compile.OPTIONS),
        "archs": list(shipped.ARCHS),
        "ptx": shipped.PTX,
        "families": dict(sorted({**kept, **built}.items())),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail where a rebuild differs")
    parser.add_argument("--jobs", type=int, default=4, help="families compiled at once")
    parser.add_argument("--only", nargs="+", metavar="FAMILY", help="rebuild these families")
    args = parser.parse_args()
    if not args.check:
        manifest = build(BIN, args.jobs, args.only)
        total = sum((BIN / f"{f}.fatbin").stat().st_size for f in manifest["families"])
        print(f"build_kernels: {len(manifest['families'])} families, {total / 1e6:.1f} MB in {BIN}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        manifest = build(Path(tmp), args.jobs)
        shipped_manifest = json.loads((BIN / "manifest.json").read_text())
        if manifest != shipped_manifest:
            sys.exit("build_kernels: the committed binaries differ from a rebuild")
    print("build_kernels: the committed binaries are what the sources build")


if __name__ == "__main__":
    main()
