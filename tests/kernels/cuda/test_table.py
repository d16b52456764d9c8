"""The CUDA algorithms' table against the registry and the CUDA sources, read as text (no GPU).

Every kernel a labeling launches must exist in its family's source with the template parameters
and the arguments that :data:`tilelabel.kernels.cuda.ccl.KERNELS` gives it.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from tilelabel.kernels.cuda.ccl import (
    ALGORITHMS,
    KERNELS,
    OTHERS,
    RENUMBER,
    TILE,
    kernel_names,
)
from tilelabel.kernels.cuda.compile import CUDA_DIR, source
from tilelabel.kernels.registry import DEFAULTS, algorithms

FAMILIES = ("block", "tile", "pixel", "seg", "renumber", "stats")
CONNECTIVITIES = ((2, 4), (2, 8), (3, 6), (3, 18), (3, 26))
_KERNEL = re.compile(
    r"template <([^>]*)>\s*__global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\(([^)]*)\)"
)


def _templates(family: str) -> dict[str, tuple[list[str], int]]:
    """kernel name -> (template parameter names, number of arguments) in a family's source."""
    out = {}
    for params, name, args in _KERNEL.findall(source(family)):
        names = [p.split()[-1] for p in params.split(",")]
        count = sum(3 if a.strip() == "GEO_PARAMS" else 1 for a in args.split(","))
        out[name] = (names, count)
    return out


def test_every_cuda_algorithm_is_in_the_table_and_registered_for_its_connectivities():
    for nd, conn in CONNECTIVITIES:
        registered = set(algorithms("cuda", nd, conn))
        table = {**ALGORITHMS, **OTHERS}
        assert registered == {a for a, s in table.items() if (nd, conn) in s.connectivities}
        assert DEFAULTS[("cuda", nd, conn)] in registered
    for spec in ALGORITHMS.values():
        assert spec.connectivities == (
            ((2, 8), (3, 26)) if spec.blocks else ((2, 8), (3, 26), (2, 4), (3, 6), (3, 18))
        )


def test_every_kernel_of_the_table_is_in_its_source_as_the_table_launches_it():
    for kernel, spec in KERNELS.items():
        found = _templates(spec.family)
        assert kernel in found, f"{kernel} is not a kernel of {spec.family}.cu"
        params, nargs = found[kernel]
        assert params == ["T", *spec.params], kernel
        width = {"dims": 3, "bdims": 3}
        assert sum(width.get(a, 1) for a in spec.args) == nargs, kernel
    for name in RENUMBER:
        assert name in _templates("renumber")


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_each_labeling_launches_kernels_of_its_families(algorithm):
    spec = ALGORITHMS[algorithm]
    steps = [s for s, _, _ in spec.kernel_steps()]
    ranked = [s for s, _ in spec.ranked]
    assert steps[0] == "init" and steps[-2 - len(ranked) :] == ["compress+mark", *ranked, "final"]
    for (nd, conn), dtype, aligned, vec in itertools.product(
        spec.connectivities, (np.uint32, np.uint64), (True, False), (True, False)
    ):
        names = kernel_names(algorithm, nd, conn, dtype, aligned, vec)
        for family, exprs in names.items():
            kernels = _templates(family)
            for expr in exprs:
                kernel, args = re.fullmatch(r"(\w+)<(.*)>", expr).groups()
                assert kernel in kernels
                assert len(args.split(", ")) == len(kernels[kernel][0]), expr


def test_the_default_3d_labeling_compiles_three_small_modules():
    # what the first 3D 26-connectivity uint32 labeling compiles: nothing else
    t = "unsigned int"
    ty, tz, nt = TILE[3]
    assert kernel_names("bke_tile", 3, 26, np.uint32, True) == {
        "tile": (
            f"bke_tile<{t}, true, true, {ty}, {tz}, {nt}>",
            f"tile_reduce<{t}, true, {ty}, {tz}>",
        ),
        "block": (f"blk_compress<{t}, true, false, true>", f"blk_final<{t}, true>"),
        "renumber": tuple(f"{k}<{t}>" for k in RENUMBER),
    }


def test_sources_paste_each_header_once_and_nothing_else():
    for family in FAMILIES:
        text = source(family)
        assert not re.search(r"^\s*#include", text, re.MULTILINE)
        for header in CUDA_DIR.glob("*.cuh"):
            guard = f"TILELABEL_{header.stem.upper()}_CUH"
            assert text.count(f"#define {guard}") <= 1
    assert source("tile").count("struct Geo") == 1  # tile.cu -> blocks.cuh -> common.cuh
    assert "#define TILELABEL_COMMON_CUH" in source("tile")
