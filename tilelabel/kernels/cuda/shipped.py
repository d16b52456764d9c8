"""The CUDA kernels that ship compiled: every name expression a run can launch, by family.

``scripts/build_kernels.py`` compiles them with nvcc into ``bin/<family>.fatbin`` (a cubin for
each GPU architecture of :data:`ARCHS` and PTX for newer ones) and records in
``bin/manifest.json`` each family's :func:`~.compile.digest` and each name expression's symbol.
:mod:`.compile` loads a family's binary only while its digest matches the source; a test fails
when a source, header or option has changed since the binaries were built.
"""

from __future__ import annotations

from tilelabel.kernels.cuda import ccl, contacts, equivalence, ha4, nvcomp, ops, stats

#: the GPU architectures with a cubin of their own: Turing to Blackwell, the range of CuPy's
#: CUDA 13 builds (a cubin also runs on later minor versions of its major: sm_87 takes sm_86's)
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
#: PTX for architectures after them, compiled by the driver where it loads the module
PTX = "compute_120"


def instantiations() -> dict[str, tuple[str, ...]]:
    """Every name expression by family, sorted."""
    parts = (
        ccl.instantiations(),
        contacts.instantiations(),
        equivalence.instantiations(),
        ha4.instantiations(),
        stats.instantiations(),
        nvcomp.instantiations(),
        ops.instantiations(),
    )
    out: dict[str, set[str]] = {}
    for part in parts:
        for family, names in part.items():
            out.setdefault(family, set()).update(names)
    return {family: tuple(sorted(out[family])) for family in sorted(out)}
