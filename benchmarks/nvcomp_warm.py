"""Does a warm-up on a small tile load what a chunk's first nvCOMP batch needs?

Each try is a fresh process: it warms nvCOMP up with one batch of TILES tiles of BYTES each
(``gpu_codec.warm``: one tile of 256 KiB), then times three batches of a 256x256x384 block of
labels in 128^3 tiles (12 tiles of 8 MiB). Prints one JSON line per try (seconds) and writes
them to ``$OUT/nvcomp_warm.json``.

    python benchmarks/nvcomp_warm.py [TILESxBYTES ...]   # default: 1x262144 1x8388608 (twice)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TILE = (128, 128, 128)


def one_try(tiles: int, warm_bytes: int) -> dict[str, float]:
    import cupy as cp
    import numpy as np
    from nvidia import nvcomp

    from tilelabel.kernels import gpu_codec
    from tilelabel.synth import random_volume

    img = random_volume((256, 256, 384), 0.05, seed=1)
    labels = (np.arange(img.size, dtype=np.uint32).reshape(img.shape) // 3) * (img > 0)
    labels = cp.asarray(labels)
    stream = cp.cuda.get_current_stream()
    out = {}
    start = time.perf_counter()
    batch = [
        (cp.arange(warm_bytes // 4, dtype=cp.uint32) // (7 + k)).view(cp.uint8)
        for k in range(tiles)
    ]
    gpu_codec._codec(stream).encode(nvcomp.as_arrays(batch, stream.ptr))
    stream.synchronize()
    out["warm"] = time.perf_counter() - start
    for i in range(3):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        gpu_codec.zstd_tiles(labels, TILE)
        out[f"batch{i}"] = time.perf_counter() - start
    return {k: round(v, 4) for k, v in out.items()}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(one_try(int(sys.argv[2]), int(sys.argv[3]))), flush=True)
        return
    # TILESxBYTES per try, in this order: the first process on a machine may pay more than its
    # warm-up (caches of the driver), so the order matters
    tries = sys.argv[1:] or ["1x262144", "1x8388608", "1x262144", "1x8388608"]
    rows = []
    for spec in tries:
        tiles, warm_bytes = (int(v) for v in spec.split("x"))
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(tiles), str(warm_bytes)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            sys.exit(f"a try failed:\n{done.stderr[-2000:]}")
        row = {"warm_tiles": tiles, "warm_tile_bytes": warm_bytes}
        row |= json.loads(done.stdout.splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "nvcomp_warm.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
