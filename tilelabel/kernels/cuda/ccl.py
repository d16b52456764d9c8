"""CUDA labeling: the algorithms as one table, and one labeling's steps (:class:`Labeling`).

Algorithms (CUDA C in ``kernels/cuda``), as registered with the kernel registry:

- ``buf``, ``buf_ic``, ``bke``, ``bke_ic``: block-based union-find / Komura equivalence of
  Allegretti et al. (TPDS 2020), with plain or inline compression, for 2D 8- and 3D
  26-connectivity (2x2 / 2x2x2 blocks). The union-find forest lives in the label array itself.
- ``bke_tile``: BKE's blocks with a tile-local union-find in shared memory and global unions only
  across tile faces (Oliveira & Lotufo's tile merging, Playne & Hawick's HA4), same
  connectivities.
- ``uf``, ``uf_ic``: pixel-based union-find, every connectivity (2D 4 and 3D 6 and 18; a baseline
  for 8 and 26).
- ``ke``: pixel-based Komura equivalence (Init links each voxel to a backward neighbour,
  Compression, Reduction, Compression), every connectivity.
- ``seg``: segments (runs of set bits in a thread's 32-voxel row word, HA4's runs done
  bit-parallel) united in a tile-local shared-memory union-find, then across tile faces only;
  every connectivity, made for 4, 6 and 18. Only segment starts are forest nodes, and only tile
  roots whose component reaches a tile face take part in the global steps.
- multi-label ``ke`` (:data:`MULTILABEL`): pixel Komura equivalence over the input's values,
  each nonzero value a class of its own, every connectivity (``multilabel.cu``).
- ``continuous`` (:data:`CONTINUOUS`, cc3d's ``delta``): the same where neighbours' values
  differ by at most ``delta`` (``continuous.cu``); :meth:`.CUDABackend.label_delta` runs it.

The papers' other algorithms (``be``, ``ole``: :mod:`.equivalence`; ``ha4``: :mod:`.ha4`)
run their own steps and join this table through :data:`OTHERS`.

All of them end with the same on-device renumbering to scipy's numbering (``renumber.cu``), which
also yields each label's first voxel. A labeling compiles only the kernels it launches
(:mod:`.compile`); CuPy is imported only when a kernel runs.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilelabel.dtypes import UINT32_MAX, LabelOverflowError
from tilelabel.kernels.cuda.compile import CTYPE, kernels
from tilelabel.kernels.registry import register

#: bke_tile's tile per ndim, (TY, TZ, NT): 32 x TY x TZ blocks, walked by NT rows of 32 threads
#: (3D: the largest tile whose shared forest fits 48 KB; larger tiles leave fewer face blocks)
TILE = {3: (16, 16, 16), 2: (32, 1, 8)}
#: seg's tile per ndim, (KX, KY, KZ): 32 * KX x KY x KZ voxels, a thread per 32-voxel row word;
#: its union-find of 8192 slots fills 32 KB of shared memory
SEG_TILE = {3: (2, 16, 8), 2: (8, 32, 1)}
_SEG_THREADS = 256  # SEG_THREADS in seg.cu
#: the renumbering kernels (renumber.cu), compiled together per label type
RENUMBER = ("scan_tile_sums", "scan_tiles", "scan_words", "first_from_bitmap", "first_from_labels")
_SCAN_TILE = 256 * 8  # SCAN_THREADS * SCAN_WORDS in renumber.cu
_MAXGRID = 65535
#: connectivities that 2x2(x2) blocks serve (full) and the others (face connectivities)
FULL = ((2, 8), (3, 26))
FACE = ((2, 4), (3, 6), (3, 18))


@dataclass(frozen=True)
class Kernel:
    """A kernel template: its family source (``kernels/cuda/<family>.cu``), its template
    parameters after the label type, its launch geometry and its arguments (keys of
    :attr:`Labeling.grids` and :attr:`Labeling.args`)."""

    family: str
    params: tuple[str, ...]
    grid: str
    args: tuple[str, ...]


_INIT = ("img", "L", "extra", "dims", "bdims")
_REDUCE = ("L", "extra", "dims", "bdims")
_VOXELS = ("img", "L", "dims")
_SEG = ("KX", "KY", "KZ", "VEC")
KERNELS: dict[str, Kernel] = {
    "buf_init": Kernel("block", ("IS3D",), "blocks", _INIT),
    "buf_merge": Kernel("block", ("IS3D", "ALIGNED"), "blocks", ("img", "L", "dims", "bdims")),
    "bke_init": Kernel("block", ("IS3D", "ALIGNED"), "blocks", _INIT),
    "bke_reduce": Kernel("block", ("IS3D",), "blocks", _REDUCE),
    "blk_compress": Kernel(
        "block", ("IS3D", "IC", "MARK"), "blocks", ("L", "extra", "bitmap", "dims", "bdims")
    ),
    "blk_final": Kernel(
        "block", ("IS3D",), "blocks", ("L", "extra", "bitmap", "prefix", "dims", "bdims")
    ),
    "bke_tile": Kernel("tile", ("IS3D", "ALIGNED", "TY", "TZ", "NT"), "tiles", _INIT),
    "tile_reduce": Kernel("tile", ("IS3D", "TY", "TZ"), "blocks", _REDUCE),
    "uf_init": Kernel("pixel", (), "flat", ("img", "L", "N")),
    "uf_merge": Kernel("pixel", ("CONN",), "voxels", _VOXELS),
    "ke_init": Kernel("pixel", ("CONN",), "voxels", _VOXELS),
    "ke_reduce": Kernel("pixel", ("CONN",), "voxels", _VOXELS),
    "uf_compress_mark": Kernel("pixel", ("IC", "MARK"), "flat", ("L", "bitmap", "N")),
    "uf_final": Kernel("pixel", (), "flat", ("L", "bitmap", "prefix", "N")),
    "seg_tile": Kernel("seg", ("CONN", *_SEG), "segtiles", ("img", "L", "troot", "bitmap", "dims")),
    "seg_merge": Kernel("seg", ("CONN", *_SEG), "segtiles", ("img", "L", "dims")),
    "seg_compress": Kernel("seg", (), "words", ("L", "troot", "bitmap", "nwords")),
    "seg_final": Kernel(
        "seg", ("VEC",), "rowwords", ("img", "L", "troot", "bitmap", "prefix", "dims")
    ),
    "seg_roots": Kernel("seg", (), "words", ("L", "troot", "bitmap", "prefix", "nwords")),
    "ml_ke_init": Kernel("multilabel", ("V", "CONN"), "voxels", _VOXELS),
    "ml_ke_reduce": Kernel("multilabel", ("V", "CONN"), "voxels", _VOXELS),
    "dl_ke_init": Kernel("continuous", ("V", "CONN"), "voxels", (*_VOXELS, "delta")),
    "dl_ke_reduce": Kernel("continuous", ("V", "CONN"), "voxels", (*_VOXELS, "delta")),
}

#: C++ spelling of each value type of a multi-label input (its unsigned view)
VTYPE = {
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.uint64): "unsigned long long",
}
#: and of a continuous-valued one (cc3d's ``delta``), as the rule compares them
CONTINUOUS_VTYPE = VTYPE | {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@dataclass(frozen=True)
class Algorithm:
    """One algorithm: the kernels its steps launch.

    Every labeling runs ``alloc``, ``init``, the ``middle`` steps, ``compress+mark`` (the last
    Compression, which marks the roots), ``scan``, the ``ranked`` steps and ``final``.
    """

    blocks: bool  #: nodes are 2x2(x2) blocks (full connectivity only), else voxels
    init: str  #: the kernel that builds the first forest
    middle: tuple[tuple[str, str], ...]  #: (step, kernel) between init and compress+mark
    inline: bool  #: Compression points every node on a path to the root, not only the first
    compress: str  #: the marking Compression
    final: str  #: the final labeling
    ranked: tuple[tuple[str, str], ...] = ()  #: (step, kernel) between scan and final

    @property
    def segments(self) -> bool:
        """seg's tiles: launched by tile, with a second bitmap (of tile roots)."""
        return KERNELS[self.init].grid == "segtiles"

    @property
    def connectivities(self) -> tuple[tuple[int, int], ...]:
        """(ndim, connectivity) pairs it serves."""
        return FULL if self.blocks else FULL + FACE

    @property
    def u32_voxels(self) -> int:
        """The most voxels a uint32 forest holds: below the root tag bit (2^31) for blocks,
        below the background sentinel (2^32 - 1) for voxels."""
        return 2**31 - 1 if self.blocks else UINT32_MAX

    def kernel_steps(self) -> tuple[tuple[str, str, bool], ...]:
        """(step, kernel, MARK) of the steps that launch one kernel of :data:`KERNELS`."""
        return (
            ("init", self.init, False),
            *((step, kernel, False) for step, kernel in self.middle),
            ("compress+mark", self.compress, True),
            *((step, kernel, False) for step, kernel in self.ranked),
            ("final", self.final, False),
        )


_BUF = (("merge", "buf_merge"),)
_BKE = (("compress", "blk_compress"), ("reduce", "bke_reduce"))
_UF = (("merge", "uf_merge"),)
_BLOCK_TAIL = {"compress": "blk_compress", "final": "blk_final"}
_VOXEL_TAIL = {"compress": "uf_compress_mark", "final": "uf_final"}
ALGORITHMS: dict[str, Algorithm] = {
    "buf": Algorithm(True, "buf_init", _BUF, inline=False, **_BLOCK_TAIL),
    "buf_ic": Algorithm(True, "buf_init", _BUF, inline=True, **_BLOCK_TAIL),
    "bke": Algorithm(True, "bke_init", _BKE, inline=False, **_BLOCK_TAIL),
    "bke_ic": Algorithm(True, "bke_init", _BKE, inline=True, **_BLOCK_TAIL),
    # the tile pass leaves trees of depth 1: no Compression before Reduction
    "bke_tile": Algorithm(
        True, "bke_tile", (("reduce", "tile_reduce"),), inline=False, **_BLOCK_TAIL
    ),
    "uf": Algorithm(False, "uf_init", _UF, inline=False, **_VOXEL_TAIL),
    "uf_ic": Algorithm(False, "uf_init", _UF, inline=True, **_VOXEL_TAIL),
    "ke": Algorithm(
        False,
        "ke_init",
        (("compress", "uf_compress_mark"), ("reduce", "ke_reduce")),
        inline=True,
        **_VOXEL_TAIL,
    ),
    # tile roots on tile faces are what the final labeling reads: their labels come first
    "seg": Algorithm(
        False,
        "seg_tile",
        (("merge", "seg_merge"),),
        inline=False,
        compress="seg_compress",
        final="seg_final",
        ranked=(("roots", "seg_roots"),),
    ),
}

#: the multi-label algorithms (each nonzero value a class of its own), by name
MULTILABEL: dict[str, Algorithm] = {
    "ke": Algorithm(
        False,
        "ml_ke_init",
        (("compress", "uf_compress_mark"), ("reduce", "ml_ke_reduce")),
        inline=True,
        **_VOXEL_TAIL,
    ),
}


#: the continuous-value algorithm (cc3d's ``delta``): KE with the rule of ``continuous.cu``
CONTINUOUS = Algorithm(
    False,
    "dl_ke_init",
    (("compress", "uf_compress_mark"), ("reduce", "dl_ke_reduce")),
    inline=True,
    **_VOXEL_TAIL,
)


@dataclass(frozen=True)
class Other:
    """An algorithm whose steps another module runs: its :class:`Labeling` subclass, the (ndim,
    connectivity) pairs it serves and the most voxels a uint32 forest of it holds."""

    labeling: type
    connectivities: tuple[tuple[int, int], ...]
    u32_voxels: int


#: algorithms of other modules (:func:`add_other`)
OTHERS: dict[str, Other] = {}


def spec(algorithm: str, multilabel: bool = False) -> Algorithm | Other:
    """The algorithm's entry in :data:`ALGORITHMS` or :data:`OTHERS` (:data:`MULTILABEL` with
    ``multilabel``; ``"continuous"``: :data:`CONTINUOUS`)."""
    if algorithm == "continuous":
        return CONTINUOUS
    if multilabel:
        return MULTILABEL[algorithm]
    return ALGORITHMS[algorithm] if algorithm in ALGORITHMS else OTHERS[algorithm]


def make_labeling(
    image, dtype, connectivity: int, algorithm: str, multilabel: bool = False, delta: Any = None
) -> Labeling:
    """One labeling with ``algorithm`` (its steps: :meth:`Labeling.steps`)."""
    if not multilabel and algorithm in OTHERS:
        return OTHERS[algorithm].labeling(image, dtype, connectivity, algorithm)
    return Labeling(image, dtype, connectivity, algorithm, multilabel, delta)


def _bool(b: bool) -> str:
    return "true" if b else "false"


def template_values(
    algorithm: str,
    ndim: int,
    connectivity: int,
    aligned: bool,
    vec: bool = False,
    value=None,
) -> dict:
    """Values of the kernels' template parameters (except T and MARK) for one labeling:
    ``aligned`` for 16-bit loads of voxel pairs, ``vec`` for 16-byte loads of 32-voxel row
    words; ``value``: a multi-label input's (unsigned) dtype, None for a binary one."""
    ty, tz, nt = TILE[ndim]
    alg = spec(algorithm, value is not None)
    return {
        "IS3D": _bool(ndim == 3),
        "ALIGNED": _bool(aligned),
        "TY": str(ty),
        "TZ": str(tz),
        "NT": str(nt),
        "CONN": str(connectivity),
        "IC": _bool(alg.inline),
        **dict(zip(("KX", "KY", "KZ"), map(str, SEG_TILE[ndim]), strict=True)),
        "VEC": _bool(vec),
        **({} if value is None else {"V": CONTINUOUS_VTYPE[np.dtype(value)]}),
    }


def expression(kernel: str, ctype: str, values: dict, mark: bool) -> str:
    """The name expression of a kernel instantiation, e.g. ``blk_final<unsigned int, true>``."""
    args = [ctype, *({**values, "MARK": _bool(mark)}[p] for p in KERNELS[kernel].params)]
    return f"{kernel}<{', '.join(args)}>"


def _renumber_names(ctype: str) -> tuple[str, ...]:
    return tuple(f"{k}<{ctype}>" for k in RENUMBER)


def kernel_names(
    algorithm: str,
    ndim: int,
    connectivity: int,
    dtype,
    aligned: bool,
    vec: bool = False,
    value=None,
) -> dict[str, tuple[str, ...]]:
    """The name expressions one labeling launches, by family: what its first run compiles
    (``value``: a multi-label input's dtype)."""
    ctype = CTYPE[np.dtype(dtype)]
    values = template_values(algorithm, ndim, connectivity, aligned, vec, value)
    out = {"renumber": _renumber_names(ctype)}
    for _, kernel, mark in spec(algorithm, value is not None).kernel_steps():
        family = KERNELS[kernel].family
        out[family] = (*out.get(family, ()), expression(kernel, ctype, values, mark))
    return out


def instantiations() -> dict[str, set[str]]:
    """Every name expression a labeling of :data:`ALGORITHMS` or :data:`MULTILABEL` can launch,
    by family: what ships compiled (:mod:`.shipped`)."""
    out: dict[str, set[str]] = {}
    tables = (
        (False, ALGORITHMS, (None,)),
        (True, MULTILABEL, tuple(VTYPE)),
        (True, {"continuous": CONTINUOUS}, tuple(CONTINUOUS_VTYPE)),
    )
    for _, table, values in tables:
        for name, alg in table.items():
            for (ndim, conn), dtype, aligned, vec, value in itertools.product(
                alg.connectivities, CTYPE, (False, True), (False, True), values
            ):
                names = kernel_names(name, ndim, conn, dtype, aligned, vec, value)
                for family, exprs in names.items():
                    out.setdefault(family, set()).update(exprs)
    return out


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _grid(extent: tuple[int, int, int], block: tuple[int, int, int]) -> tuple:
    """(grid, block) over (D, H, W) items, ``block`` threads (x, y, z); y and z stride."""
    D, H, W = extent
    grid = (
        _cdiv(W, block[0]),
        min(_cdiv(H, block[1]), _MAXGRID),
        min(_cdiv(D, block[2]), _MAXGRID),
    )
    return grid, block


def renumber_kernels(dtype) -> dict:
    """The renumbering kernels for labels of ``dtype`` on the current device."""
    return kernels("renumber", _renumber_names(CTYPE[np.dtype(dtype)]))


class Labeling:
    """One labeling of one image: its buffers and its steps (:meth:`steps`, so that a benchmark
    can time each). Compiles what it launches when made (once per process and device).
    ``multilabel``: ``image`` holds unsigned values, each nonzero one a class of its own;
    algorithm ``"continuous"``: values that join where at most ``delta`` apart."""

    def __init__(
        self,
        image,
        dtype,
        connectivity: int,
        algorithm: str,
        multilabel: bool = False,
        delta: Any = None,
    ):
        self.alg = spec(algorithm, multilabel)
        value = image.dtype if multilabel else None
        self.T = np.dtype(dtype)
        self.t = CTYPE[self.T]
        self.shape = tuple(int(s) for s in image.shape)
        ndim = len(self.shape)
        self.N = int(np.prod(self.shape, dtype=object))
        D, H, W = (1, *self.shape) if ndim == 2 else self.shape
        Ts = self.T.type
        #: kernel arguments by name (the buffers join them in :meth:`alloc`)
        self.args = {"img": image, "dims": (Ts(D), Ts(H), Ts(W)), "N": np.uint64(self.N)}
        if delta is not None:
            self.args["delta"] = image.dtype.type(delta)
        # 16-bit loads of voxel pairs need even rows and an even base address
        aligned = W % 2 == 0 and image.data.ptr % 2 == 0
        # rows of whole 32-voxel words, 16-byte aligned: seg loads and stores 16 bytes at a time
        # and stores its bitmap words instead of or-ing bits into them
        self.vec = W % 32 == 0 and image.data.ptr % 16 == 0
        self.values = template_values(algorithm, ndim, connectivity, aligned, self.vec, value)
        self.nwords = _cdiv(self.N, 32)
        self.ntiles = _cdiv(self.nwords, _SCAN_TILE)
        self.args["nwords"] = np.uint64(self.nwords)
        rows = (32, 4, 2) if ndim == 3 else (32, 8, 1)
        #: (grid, block) of each launch geometry
        self.grids = {
            "flat": ((min(_cdiv(self.N, 256), 1 << 20),), (256,)),
            "words": ((min(_cdiv(self.nwords, 256), 1 << 20),), (256,)),  # a thread per word
        }
        if self.alg.segments:
            kx, ky, kz = SEG_TILE[ndim]
            tiles = _cdiv(W, 32 * kx) * _cdiv(H, ky) * _cdiv(D, kz)
            rowwords = D * H * _cdiv(W, 32)
            self.grids["segtiles"] = ((min(tiles, 1 << 16),), (kx * ky * kz,))
            self.grids["rowwords"] = (
                (min(_cdiv(rowwords, _SEG_THREADS), 1 << 20),),
                (_SEG_THREADS,),
            )
        if self.alg.blocks:
            bdims = (_cdiv(D, 2), _cdiv(H, 2), _cdiv(W, 2))
            self.args["bdims"] = tuple(Ts(b) for b in bdims)
            ty, tz, nt = TILE[ndim]
            tiles, _ = _grid(bdims, (32, ty, tz))
            self.grids |= {"blocks": _grid(bdims, rows), "tiles": (tiles, (32, nt, 1))}
        else:
            self.grids["voxels"] = _grid((D, H, W), rows)
        self.fn: dict = {}
        names = kernel_names(algorithm, ndim, connectivity, self.T, aligned, self.vec, value)
        for family, exprs in names.items():
            self.fn |= kernels(family, exprs)

    # -- steps -----------------------------------------------------------------------------
    def alloc(self) -> None:
        import cupy as cp

        self.L = cp.empty(self.shape, self.T)
        extra = cp.empty(1, self.T)
        # block roots, and seg's tile pass on rows that are no whole words, set their bits with
        # atomicOr; the others write whole words
        zeroed = self.alg.blocks or (self.alg.segments and not self.vec)
        bits = functools.partial(cp.zeros if zeroed else cp.empty, self.nwords, np.uint32)
        self.bitmap = bits()
        self.prefix = cp.empty(self.nwords, self.T)
        self.tiles = cp.empty(self.ntiles + 1, self.T)
        self.args |= {"L": self.L, "extra": extra, "bitmap": self.bitmap, "prefix": self.prefix}
        if self.alg.segments:
            self.args["troot"] = bits()

    def _launch(self, kernel: str, fn) -> None:
        args: list = []
        for name in KERNELS[kernel].args:
            value = self.args[name]
            args.extend(value if isinstance(value, tuple) else (value,))
        grid, block = self.grids[KERNELS[kernel].grid]
        fn(grid, block, tuple(args))

    def scan(self) -> None:
        nw = np.uint64(self.nwords)
        fn, t = self.fn, self.t
        fn[f"scan_tile_sums<{t}>"]((self.ntiles,), (256,), (self.bitmap, nw, self.tiles))
        fn[f"scan_tiles<{t}>"]((1,), (1024,), (self.tiles, np.uint64(self.ntiles)))
        fn[f"scan_words<{t}>"]((self.ntiles,), (256,), (self.bitmap, nw, self.tiles, self.prefix))

    def steps(self) -> list[tuple[str, Callable[[], None]]]:
        """(name, callable) in order; running them all labels the image."""
        launches = []
        for step, kernel, mark in self.alg.kernel_steps():
            fn = self.fn[expression(kernel, self.t, self.values, mark)]
            launches.append((step, functools.partial(self._launch, kernel, fn)))
        k = [name for name, _ in launches].index("compress+mark") + 1
        return [("alloc", self.alloc), *launches[:k], ("scan", self.scan), *launches[k:]]

    def count(self) -> int:
        return int(self.tiles[self.ntiles].get())

    def first(self, n: int):
        """Raster index of the first voxel of labels 1..n (int64 CuPy array)."""
        import cupy as cp

        out = cp.empty(n, np.int64)
        if n:
            grid = (min(_cdiv(self.nwords, 256), 1 << 20),)
            self.fn[f"first_from_bitmap<{self.t}>"](
                grid, (256,), (self.bitmap, self.prefix, np.uint64(self.nwords), out)
            )
        return out


class OwnLabeling(Labeling):
    """A labeling whose steps another module writes (:data:`OTHERS`): the image's geometry, the
    renumbering of :class:`Labeling` (its ``scan``, ``count`` and ``first``) and the kernels
    ``names`` (name expressions by family) compiled when made."""

    def __init__(self, image, dtype, names: dict[str, tuple[str, ...]]):
        self.T = np.dtype(dtype)
        self.t = CTYPE[self.T]
        self.shape = tuple(int(s) for s in image.shape)
        self.N = int(np.prod(self.shape, dtype=object))
        self.D, self.H, self.W = (1, *self.shape) if len(self.shape) == 2 else self.shape
        self.img = image
        self.dims = tuple(self.T.type(s) for s in (self.D, self.H, self.W))
        self.nwords = _cdiv(self.N, 32)
        self.ntiles = _cdiv(self.nwords, _SCAN_TILE)
        self.fn = {}
        for family, exprs in {"renumber": _renumber_names(self.t), **names}.items():
            self.fn |= kernels(family, exprs)

    def alloc_renumber(self, zeroed: bool) -> None:
        """The labels, the root bitmap (``zeroed`` where roots set bits one by one) and the
        scan's buffers."""
        import cupy as cp

        self.L = cp.empty(self.shape, self.T)
        self.bitmap = (cp.zeros if zeroed else cp.empty)(self.nwords, np.uint32)
        self.prefix = cp.empty(self.nwords, self.T)
        self.tiles = cp.empty(self.ntiles + 1, self.T)

    def flat(self, n: int) -> tuple:
        """(grid, block) of a grid-stride loop over ``n`` items."""
        return (min(_cdiv(n, 256), 1 << 20),), (256,)


def _check(image, connectivity: int, algorithm: str, multilabel: bool = False) -> None:
    if image.ndim not in (2, 3):
        raise ValueError(f"tilelabel labels 2D and 3D arrays; got {image.ndim} dimension(s)")
    serves = [c for nd, c in spec(algorithm, multilabel).connectivities if nd == image.ndim]
    if connectivity not in serves:
        raise ValueError(
            f"{algorithm} serves {image.ndim}D connectivity {' or '.join(map(str, serves))}, "
            f"not {connectivity}"
        )
    if algorithm == "continuous":
        if image.dtype not in CONTINUOUS_VTYPE or not image.flags.c_contiguous:
            raise ValueError(
                "the continuous CUDA kernels take a C-contiguous unsigned, float32 or float64 "
                "CuPy array"
            )
    elif multilabel:
        if image.dtype not in VTYPE or not image.flags.c_contiguous:
            raise ValueError("the multi-label CUDA kernels take a C-contiguous unsigned CuPy array")
    elif image.dtype != np.uint8 or not image.flags.c_contiguous:
        raise ValueError("the CUDA kernels take a C-contiguous uint8 CuPy array")


def label_device(
    image,
    dtype,
    connectivity: int,
    algorithm: str,
    want_first: bool = False,
    multilabel: bool = False,
    delta: Any = None,
):
    """Label a C-contiguous uint8 CuPy array (nonzero is foreground): ``(labels, n[, first])``;
    with ``multilabel``, an unsigned one whose nonzero values are each a class of their own;
    with algorithm ``"continuous"`` (and ``multilabel``), unsigned or float values that join
    where at most ``delta`` (of their dtype) apart.

    ``dtype`` uint32 or uint64. Past :attr:`Algorithm.u32_voxels` voxels the forest needs 64-bit
    entries: a uint32 result is then computed in uint64 and narrowed (an allocation the papers
    never need, for sizes they never meet).
    """
    import cupy as cp

    dtype = np.dtype(dtype)
    if dtype not in CTYPE:
        raise ValueError(f"label dtype must be uint32 or uint64, got {dtype}")
    _check(image, connectivity, algorithm, multilabel)
    n_vox = int(image.size)
    if n_vox == 0:
        out = cp.zeros(image.shape, dtype)
        return (out, 0, cp.empty(0, np.int64)) if want_first else (out, 0)
    small = n_vox <= spec(algorithm, multilabel).u32_voxels
    work = dtype if (dtype == np.uint64 or small) else np.dtype(np.uint64)
    labeling = make_labeling(image, work, connectivity, algorithm, multilabel, delta)
    for _, step in labeling.steps():
        step()
    n = labeling.count()
    labels = labeling.L
    if work != dtype:
        if n > UINT32_MAX:
            raise LabelOverflowError(f"{n} labels do not fit in uint32; use uint64")
        labels = labels.astype(dtype)
    if want_first:
        return labels, n, labeling.first(n)
    return labels, n


def _make(connectivity: int, algorithm: str, multilabel: bool = False):
    def kernel(image, dtype):
        return label_device(image, dtype, connectivity, algorithm, multilabel=multilabel)

    kernel.__name__ = f"cuda_{'ml_' if multilabel else ''}{algorithm}_{connectivity}"
    return kernel


def add_other(name: str, other: Other) -> None:
    """Add an algorithm of another module to :data:`OTHERS` and to the kernel registry."""
    OTHERS[name] = other
    for ndim, conn in other.connectivities:
        register("cuda", ndim, conn, name)(_make(conn, name))


for _ml, _table in ((False, ALGORITHMS), (True, MULTILABEL)):
    for _name, _alg in _table.items():
        for _ndim, _conn in _alg.connectivities:
            register("cuda", _ndim, _conn, _name, _ml)(_make(_conn, _name, _ml))
