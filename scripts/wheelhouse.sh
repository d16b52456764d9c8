#!/usr/bin/env bash
# Build a folder of wheels to install tilelabel on a GPU node without internet access.
#
#   scripts/wheelhouse.sh [-o DIR] [--python 3.12] [--platform manylinux_2_28_x86_64]
#                         [--cuda 12|13] [--full]
#
# Default: tilelabel's own wheel plus requirements/gpu-node.txt (the dask stack and zarr, which
# CUDA Python images usually lack) and nvCOMP for the CUDA major version (zstd on the GPU; about
# 48 MB), for the target's Python and platform. --full: the whole
# dependency closure of tilelabel[cudaNN] (NumPy, SciPy, numba, CuPy...), for a bare node.
#
# On the node:
#   pip install --no-index --find-links DIR "tilelabel[gpu]"          # into an environment, or
#   pip install --no-index --no-deps --target SITE DIR/*.whl; export PYTHONPATH=SITE
set -euo pipefail
cd "$(dirname "$0")/.."
out=wheelhouse python=3.12 platform=manylinux_2_28_x86_64 cuda=12 full=0
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--out) out=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --platform) platform=$2; shift 2 ;;
    --cuda) cuda=$2; shift 2 ;;
    --full) full=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "wheelhouse.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$cuda" in 12|13) ;; *) echo "wheelhouse.sh: --cuda must be 12 or 13" >&2; exit 2 ;; esac
case "$platform" in
  *x86_64) arch=x86_64 ;; *aarch64) arch=aarch64 ;;
  *) echo "wheelhouse.sh: --platform must end in x86_64 or aarch64" >&2; exit 2 ;;
esac
mkdir -p "$out"
python3 -m pip wheel -q --no-deps -w "$out" .
# pip matches manylinux tags exactly: offer every older glibc tag the target accepts too
plats=(--platform "$platform")
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  plats+=(--platform "${tag}_${arch}")
done
common=(--only-binary=:all: --python-version "$python" --implementation cp "${plats[@]}" -d "$out")
if [ "$full" = 1 ]; then
  version=$(python3 -c "import re;print(re.search(r'\"(.+)\"', open('tilelabel/_version.py').read())[1])")
  python3 -m pip download -q "${common[@]}" --find-links "$out" "tilelabel[cuda$cuda]==$version"
else
  python3 -m pip download -q "${common[@]}" --no-deps -r requirements/gpu-node.txt
  python3 -m pip download -q "${common[@]}" "nvidia-libnvcomp-cu$cuda>=6,<7"
fi
echo "wheelhouse.sh: $(ls "$out"/*.whl | wc -l) wheels in $out ($(du -sh "$out" | cut -f1))"
