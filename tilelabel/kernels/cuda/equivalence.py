"""Iterative label equivalence on the GPU: ``ole`` (Kalentev et al. 2011, pixels, 2D 4 and 8) and
``be`` (Zavalishin et al. 2016, 2x2 / 2x2x2 blocks, 2D 8 and 3D 26), CUDA C in
``kernels/cuda/ole.cu`` and ``kernels/cuda/be.cu``.

Both follow their papers' iteration: after Initialization the host launches Scanning, reads the
change flag back, and stops when a scan changed nothing, else launches Analysis and scans again
(:attr:`Labeling.iterations` counts the scans, the number TPDS 2020's Table 4 reports for OLE). They
are the baselines of the comparison in ``benchmarks/yacclab.py``: on a GPU the direct algorithms
(``bke_tile``, ``ke``, ``seg``) label faster whatever the image, since every iteration reads the
whole label map and waits for the host.

Steps:

1. alloc: the output (OLE's label map), BE's block label and connectivity maps, the change flag.
2. init: OLE every foreground pixel its own index (``uf_init`` of ``pixel.cu``); BE the paper's
   pixel scan mask (``be_init``).
3. iterate: Scanning / flag / Analysis until a scan changes nothing.
4. OLE: the marking Compression of ``pixel.cu`` (each pixel already holds its root, the
   component's first pixel). BE: ``be_key`` and ``be_mark`` (a root block's index is not its
   component's key; see ``be.cu``).
5. scan (``renumber.cu``), final labeling (``uf_final``; ``be_final``).
"""

from __future__ import annotations

import numpy as np

from tilelabel.dtypes import UINT32_MAX
from tilelabel.kernels.cuda.ccl import Other, OwnLabeling, _bool, _cdiv, _grid, add_other


def _ole_kernels(t: str, connectivity: int) -> dict[str, str]:
    """OLE's kernels by step, for label type ``t`` (C++)."""
    return {
        "init": f"uf_init<{t}>",
        "scan": f"ole_scan<{t}, {connectivity}>",
        "analysis": f"ole_analysis<{t}>",
        "mark": f"uf_compress_mark<{t}, false, true>",
        "final": f"uf_final<{t}>",
    }


def _be_kernels(t: str, is3d: bool) -> dict[str, str]:
    """BE's kernels by step, for label type ``t`` (C++)."""
    d3 = _bool(is3d)
    return {
        "init": f"be_init<{t}, {d3}>",
        "scan": f"be_scan<{t}, {d3}>",
        "analysis": f"ole_analysis<{t}>",
        "key": f"be_key<{t}, {d3}>",
        "mark": f"be_mark<{t}>",
        "final": f"be_final<{t}, {d3}>",
    }


def instantiations() -> dict[str, set[str]]:
    """Every name expression OLE and BE can launch, by family (:mod:`.shipped`)."""
    from tilelabel.kernels.cuda.compile import CTYPE

    out: dict[str, set[str]] = {"pixel": set(), "ole": set(), "be": set()}
    for t in CTYPE.values():
        for conn in (4, 8):
            k = _ole_kernels(t, conn)
            out["pixel"] |= {k["init"], k["mark"], k["final"]}
            out["ole"] |= {k["scan"], k["analysis"]}
        for is3d in (False, True):
            k = _be_kernels(t, is3d)
            out["ole"].add(k.pop("analysis"))
            out["be"] |= set(k.values())
    return out


class _Iterative(OwnLabeling):
    """Scanning and Analysis repeated until a scan changes nothing."""

    iterations = 0

    def alloc_flag(self) -> None:
        import cupy as cp

        self.flag = cp.zeros(1, np.uint32)

    def iterate(self) -> None:
        self.iterations = 0
        while True:
            self.flag.fill(0)
            self.scan_once()
            self.iterations += 1
            if not int(self.flag.get()[0]):
                return
            self.analyze_once()

    def scan_once(self) -> None:
        raise NotImplementedError

    def analyze_once(self) -> None:
        raise NotImplementedError


class OLELabeling(_Iterative):
    """OLE: the label map is the output; pixels, 2D 4- or 8-connectivity."""

    def __init__(self, image, dtype, connectivity: int, algorithm: str = "ole"):
        from tilelabel.kernels.cuda.compile import CTYPE

        self.k = _ole_kernels(CTYPE[np.dtype(dtype)], connectivity)
        k = self.k
        names = {"pixel": (k["init"], k["mark"], k["final"]), "ole": (k["scan"], k["analysis"])}
        super().__init__(image, dtype, names)
        self.pixels = _grid((1, self.H, self.W), (32, 8, 1))

    def alloc(self) -> None:
        self.alloc_renumber(zeroed=False)  # the marking Compression writes whole words
        self.alloc_flag()

    def scan_once(self) -> None:
        self.fn[self.k["scan"]](*self.pixels, (self.L, *self.dims, self.flag))

    def analyze_once(self) -> None:
        self.fn[self.k["analysis"]](*self.flat(self.N), (self.L, np.uint64(self.N)))

    def steps(self):
        n = np.uint64(self.N)
        flat = self.flat(self.N)

        def init():
            self.fn[self.k["init"]](*flat, (self.img, self.L, n))

        def mark():
            self.fn[self.k["mark"]](*flat, (self.L, self.bitmap, n))

        def final():
            self.fn[self.k["final"]](*flat, (self.L, self.bitmap, self.prefix, n))

        return [
            ("alloc", self.alloc),
            ("init", init),
            ("iterate", self.iterate),
            ("compress+mark", mark),
            ("scan", self.scan),
            ("final", final),
        ]


class BELabeling(_Iterative):
    """BE: block label and connectivity maps beside the output; 2D 8, 3D 26."""

    def __init__(self, image, dtype, connectivity: int, algorithm: str = "be"):
        from tilelabel.kernels.cuda.compile import CTYPE

        self.k = _be_kernels(CTYPE[np.dtype(dtype)], image.ndim == 3)
        k = self.k
        names = {
            "be": (k["init"], k["scan"], k["key"], k["mark"], k["final"]),
            "ole": (k["analysis"],),
        }
        super().__init__(image, dtype, names)
        self.bdims = tuple(_cdiv(s, 2) for s in (self.D, self.H, self.W))
        self.nblocks = int(np.prod(self.bdims, dtype=object))
        self.bargs = tuple(self.T.type(b) for b in self.bdims)
        rows = (32, 4, 2) if image.ndim == 3 else (32, 8, 1)
        self.blocks = _grid(self.bdims, rows)

    def alloc(self) -> None:
        import cupy as cp

        self.alloc_renumber(zeroed=True)  # roots set their keys' bits one by one
        self.bL = cp.empty(self.nblocks, self.T)
        self.bC = cp.empty(self.nblocks, np.uint32 if len(self.shape) == 3 else np.uint8)
        self.alloc_flag()

    def scan_once(self) -> None:
        self.fn[self.k["scan"]](*self.blocks, (self.bL, self.bC, *self.bargs, self.flag))

    def analyze_once(self) -> None:
        self.fn[self.k["analysis"]](*self.flat(self.nblocks), (self.bL, np.uint64(self.nblocks)))

    def steps(self):
        def init():
            self.fn[self.k["init"]](
                *self.blocks, (self.img, self.bL, self.bC, *self.dims, *self.bargs)
            )

        def key():
            self.fn[self.k["key"]](*self.blocks, (self.img, self.bL, *self.dims, *self.bargs))

        def mark():
            nb = np.uint64(self.nblocks)
            self.fn[self.k["mark"]](*self.flat(self.nblocks), (self.bL, self.bitmap, nb))

        def final():
            args = (self.img, self.L, self.bL, self.bitmap, self.prefix, *self.dims, *self.bargs)
            self.fn[self.k["final"]](*self.blocks, args)

        return [
            ("alloc", self.alloc),
            ("init", init),
            ("iterate", self.iterate),
            ("key", key),
            ("compress+mark", mark),
            ("scan", self.scan),
            ("final", final),
        ]


# OLE's labels are pixel indices below the background sentinel; BE's root entries carry a tag
# bit above block keys (as the block forest of ``blocks.cuh``)
add_other("ole", Other(OLELabeling, ((2, 4), (2, 8)), UINT32_MAX))
add_other("be", Other(BELabeling, ((2, 8), (3, 26)), 2**31 - 1))
