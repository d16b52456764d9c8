"""HA4 (Hennequin et al.): direct labeling of 2D 4-connectivity with warp intrinsics, and its
analysis (area, bounding box and first moments computed in the labeling pass), CUDA C in
``kernels/cuda/ha4.cu``.

Steps (see ``ha4.cu``):

1. alloc: the output and the renumbering's buffers (nothing else: the forest of segment starts
   lives in the output).
2. strip: strips of 4 rows, a warp per row, segments from warp ballots, unions between segments
   of neighbouring rows of the strip.
3. border: the same unions across the rows where strips meet.
4. compress+mark: starts point to their roots, roots (components' first pixels) set their bits.
5. scan (``renumber.cu``), then final: each segment start hands its root's rank + 1 to its
   segment (:func:`label_analysis`: and adds the segment to its label's features).

:func:`label_analysis` is the statistics path of a 2D 4-connected chunk when its table needs no
intensity and no second moments (a size filter): the backend takes it for ``algorithm="ha4"``
(:func:`serves_stats`). By default statistics come from the labels afterwards (:mod:`.stats`):
over the benchmark's images the two take the same time on average, HA4's winning where components
are many and small, the statistics kernel where they are large (its per-warp pending component
spares the atomics that all of a large component's segments make on one root here).
"""

from __future__ import annotations

import numpy as np

from tilelabel.dtypes import UINT32_MAX, LabelOverflowError
from tilelabel.kernels.cuda import ops
from tilelabel.kernels.cuda.ccl import Other, OwnLabeling, _cdiv, add_other

#: rows per strip (HA4_H in ha4.cu): the paper's block of 32 x 4 threads
STRIP = 4


def _kernels(t: str) -> dict[str, str]:
    """HA4's kernels by step, for label type ``t`` (C++)."""
    return {s: f"ha4_{s}<{t}>" for s in ("strip", "border", "mark", "relabel", "analysis")}


def instantiations() -> dict[str, set[str]]:
    """Every name expression HA4 can launch, by family (:mod:`.shipped`)."""
    from tilelabel.kernels.cuda.compile import CTYPE

    return {"ha4": {k for t in CTYPE.values() for k in _kernels(t).values()}}


class HA4Labeling(OwnLabeling):
    """One HA4 labeling (:meth:`steps`), or labeling and analysis (:meth:`analysis_steps`)."""

    def __init__(self, image, dtype, connectivity: int = 4, algorithm: str = "ha4"):
        from tilelabel.kernels.cuda.compile import CTYPE

        self.k = _kernels(CTYPE[np.dtype(dtype)])
        super().__init__(image, dtype, {"ha4": tuple(self.k.values())})
        self.hw = self.dims[1:]
        self.nstrips = _cdiv(self.H, STRIP)
        words = self.H * _cdiv(self.W, 32)
        self.words = ((min(_cdiv(words * 32, 256), 1 << 20),), (256,))

    def alloc(self) -> None:
        self.alloc_renumber(zeroed=True)  # roots set their bits one by one

    def _strip(self) -> None:
        grid = (min(self.nstrips, 1 << 16),)
        self.fn[self.k["strip"]](grid, (32, STRIP), (self.img, self.L, *self.hw))

    def _border(self) -> None:
        words = max(self.nstrips - 1, 0) * _cdiv(self.W, 32)
        if words:
            grid = ((min(_cdiv(words * 32, 256), 1 << 20),), (256,))
            self.fn[self.k["border"]](*grid, (self.img, self.L, *self.hw))

    def _mark(self) -> None:
        self.fn[self.k["mark"]](*self.words, (self.img, self.L, self.bitmap, *self.hw))

    def _relabel(self) -> None:
        args = (self.img, self.L, self.bitmap, self.prefix, *self.hw)
        self.fn[self.k["relabel"]](*self.words, args)

    def _labeling(self):
        return [
            ("alloc", self.alloc),
            ("strip", self._strip),
            ("border", self._border),
            ("compress+mark", self._mark),
            ("scan", self.scan),
        ]

    def steps(self):
        return [*self._labeling(), ("final", self._relabel)]

    def analysis_steps(self):
        """The steps of labeling and analysis: the features are :attr:`features` after."""
        return [*self._labeling(), ("final+features", self._analysis)]

    def _analysis(self) -> None:
        import cupy as cp

        n = self.count()
        self.n = n
        m = max(n, 1)
        count = cp.zeros(m, np.uint64)
        sums = cp.zeros((2, m), np.uint64)
        lo_x = ops.full(m, np.iinfo(np.int32).max, np.int32)
        hi = ops.full((2, m), -1, np.int32)
        args = (self.img, self.L, self.bitmap, self.prefix, *self.hw, np.uint64(m))
        self.fn[self.k["analysis"]](*self.words, (*args, count, sums, lo_x, hi))
        self.features = (count[:n], sums[:, :n], lo_x[:n], hi[:, :n])


def serves_stats(ndim: int, connectivity: int, algorithm, intensity, moments: bool) -> bool:
    """Whether a chunk's statistics come from :func:`label_analysis`: HA4 chosen, 2D
    4-connectivity, and a table of sizes, boxes and centroids only."""
    return (
        algorithm == "ha4" and ndim == 2 and connectivity == 4 and intensity is None and not moments
    )


def label_analysis(image, dtype):
    """Label a 2D C-contiguous uint8 CuPy image with 4-connectivity and compute its features in
    the same pass: ``(labels, n, stats, first)``, ``stats`` the local fields of
    :func:`tilelabel.kernels.cpu.stats.label_stats` (count, lo, hi, csum; host arrays),
    ``first`` each label's first pixel (a CuPy int64 array)."""
    import cupy as cp

    from tilelabel.kernels.cpu.stats import empty_stats

    dtype = np.dtype(dtype)
    if image.ndim != 2:
        raise ValueError(f"HA4's analysis labels 2D images; got {image.ndim} dimension(s)")
    if image.dtype != np.uint8 or not image.flags.c_contiguous:
        raise ValueError("the CUDA kernels take a C-contiguous uint8 CuPy array")
    if image.size == 0:
        return (
            cp.zeros(image.shape, dtype),
            0,
            empty_stats(0, 2, False, False),
            cp.empty(0, np.int64),
        )
    # past 2^32 - 1 pixels the forest needs 64-bit entries (as label_device)
    work = dtype if image.size <= UINT32_MAX else np.dtype(np.uint64)
    labeling = HA4Labeling(image, work)
    for _, step in labeling.analysis_steps():
        step()
    n = labeling.n
    labels = labeling.L
    if work != dtype:
        if n > UINT32_MAX:
            raise LabelOverflowError(f"{n} labels do not fit in uint32; use uint64")
        labels = labels.astype(dtype)
    if n == 0:
        return labels, 0, empty_stats(0, 2, False, False), cp.empty(0, np.int64)
    first = labeling.first(n)
    count, sums, lo_x, hi = labeling.features
    lo_y = first // labeling.W  # a component's first pixel lies in its smallest row
    stats = {
        "count": cp.asnumpy(count).astype(np.int64).reshape(n, 1),
        "lo": np.ascontiguousarray(cp.asnumpy(cp.stack([lo_y, lo_x.astype(np.int64)], 1))),
        "hi": np.ascontiguousarray(cp.asnumpy(hi).T.astype(np.int64)),
        "csum": np.ascontiguousarray(cp.asnumpy(sums).T.view(np.int64)),
    }
    return labels, n, stats, first


add_other("ha4", Other(HA4Labeling, ((2, 4),), UINT32_MAX))
