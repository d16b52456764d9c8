"""Connectivity: the one place that turns user-facing connectivity/structure into a canonical form.

The canonical form is the number of neighbours of a voxel (4 or 8 in 2D; 6, 18 or 26 in 3D),
because that is what the kernels are specialised on. Everything else (scikit-image's 1..ndim,
scipy's structuring elements) is translated here.
"""

from __future__ import annotations

import numpy as np

#: Canonical connectivities per ndim, from the fewest neighbours to the most.
CONNECTIVITIES: dict[int, tuple[int, ...]] = {2: (4, 8), 3: (6, 18, 26)}


def full_connectivity(ndim: int) -> int:
    """The default: every voxel of the 3^ndim cube around a voxel is a neighbour."""
    check_ndim(ndim)
    return 3**ndim - 1


def check_ndim(ndim: int) -> None:
    if ndim not in CONNECTIVITIES:
        raise ValueError(
            f"tilelabel labels 2D and 3D arrays; got an array with {ndim} dimension(s)"
        )


def binary_structure(ndim: int, rank: int) -> np.ndarray:
    """``scipy.ndimage.generate_binary_structure(ndim, rank)``: the 3^ndim cube's offsets of at
    most ``rank`` orthogonal hops (computed here: importing scipy.ndimage costs a small run more
    than labeling it)."""
    hops = np.abs(np.indices((3,) * ndim) - 1).sum(axis=0)
    return hops <= rank


def _rank_to_neighbours(ndim: int, rank: int) -> int:
    """scikit-image style rank (max number of orthogonal hops) to a neighbour count."""
    return int(binary_structure(ndim, rank).sum()) - 1


def normalize(
    ndim: int, connectivity: int | None = None, structure: np.ndarray | None = None
) -> int:
    """Return the canonical neighbour count for ``ndim`` from a connectivity or a structure.

    ``connectivity`` may be a scikit-image rank (1..ndim) or a neighbour count (4/8 in 2D,
    6/18/26 in 3D). ``structure`` may be any of scipy's standard structuring elements
    (``ndimage.generate_binary_structure(ndim, rank)`` for some rank). Giving neither means full
    connectivity; giving both is an error unless they agree.
    """
    check_ndim(ndim)
    allowed = CONNECTIVITIES[ndim]
    from_conn = from_struct = None
    if connectivity is not None:
        if isinstance(connectivity, bool) or not isinstance(connectivity, int | np.integer):
            raise ValueError(f"connectivity must be an integer, got {connectivity!r}")
        c = int(connectivity)
        if 1 <= c <= ndim:
            from_conn = _rank_to_neighbours(ndim, c)
        elif c in allowed:
            from_conn = c
        else:
            raise ValueError(
                f"connectivity {c} is not valid for a {ndim}D array: use 1..{ndim} "
                f"(scikit-image style) or one of {', '.join(map(str, allowed))} (neighbour count)"
            )
    if structure is not None:
        s = np.asarray(structure)
        if s.shape != (3,) * ndim:
            raise ValueError(
                f"structure must have shape {(3,) * ndim} for a {ndim}D array, got {s.shape}"
            )
        s = s.astype(bool)
        for rank in range(1, ndim + 1):
            if np.array_equal(s, binary_structure(ndim, rank)):
                from_struct = _rank_to_neighbours(ndim, rank)
                break
        else:
            raise ValueError(
                "structure must be one of scipy's standard structuring elements, "
                f"ndimage.generate_binary_structure({ndim}, rank) for rank 1..{ndim}; "
                "other structures are not supported"
            )
    if from_conn is not None and from_struct is not None and from_conn != from_struct:
        raise ValueError(
            f"connectivity={connectivity} and the given structure disagree "
            f"({from_conn} vs {from_struct} neighbours)"
        )
    if from_conn is not None:
        return from_conn
    if from_struct is not None:
        return from_struct
    return full_connectivity(ndim)


def structure(ndim: int, connectivity: int) -> np.ndarray:
    """The scipy structuring element for a canonical connectivity (the test oracle uses it)."""
    for rank in range(1, ndim + 1):
        if _rank_to_neighbours(ndim, rank) == connectivity:
            return binary_structure(ndim, rank)
    raise ValueError(f"no {ndim}D structure has {connectivity} neighbours")


def max_components(shape: tuple[int, ...], connectivity: int, multilabel: bool = False) -> int:
    """An upper bound on the number of components any binary array of ``shape`` can have (any
    multi-label array with ``multilabel``: one per voxel).

    With full connectivity a 2x2(x2) block holds at most one component; with any structure that
    contains the face neighbours, foreground voxels of one component-per-voxel form an
    independent set of the grid graph, which has at most ceil(voxels / 2) members.
    """
    if multilabel:
        return int(np.prod(shape, dtype=object))
    if connectivity == full_connectivity(len(shape)):
        return int(np.prod([(s + 1) // 2 for s in shape], dtype=object))
    voxels = int(np.prod(shape, dtype=object))
    return (voxels + 1) // 2
