"""Periodic boundaries: the faces of a volume on its wrapped axes touch each other.

On a wrapped axis the volume's last plane neighbours its first under the connectivity, as in a
periodic simulation box (cc3d's ``periodic_boundary``, dask-image's ``wrap_axes``); where two or
three axes wrap, the box's edges and corners touch too. Components are still numbered 1..N in
raster order of their first voxel.

1. :func:`spelled` checks the axes as a user gives them (indices, negative ones too, or the
   names z, y, x of the last three axes; a list, or text such as ``"z,x"``) and :func:`axes`
   resolves them for a volume's rank;
2. over chunks, the pipeline pairs the chunks at the two ends of a wrapped axis as it pairs any
   neighbours (:meth:`tilelabel.chunking.ChunkPlan.neighbour`, then the same
   :func:`tilelabel.pipeline.borders.chunk_pairs`), and its merge tree keeps the labels on
   wrapped faces open until a node spans the axis (:mod:`tilelabel.pipeline.tree`);
3. in memory, :func:`tilelabel.pipeline.wrapped.lut` joins a labeled array's labels across its
   wrapped faces: the array is one chunk that neighbours itself, paired by that same function,
   and the joined components are numbered again by first voxel.

Statistics (:data:`STATISTICS`) are those of the output labels in the volume's own coordinates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: what the statistics of a component mean where axes wrap (said in the API's docstrings)
STATISTICS = (
    "On a wrapped axis, statistics are those of the output labels in the volume's own "
    "coordinates 0..n-1 (as scikit-image's regionprops and cc3d.statistics give for them): a "
    "component that crosses the wrapped faces has a bbox from its lowest to its highest "
    "coordinate, so spanning both ends of the axis, and its centroid and moments are over its "
    "voxels' coordinates as they lie, not unwrapped."
)

#: the names of the last three axes
NAMES = "zyx"

_WHAT = "axes as indices or names z, y, x, e.g. z,y,x or 0,2"


def spelled(value: Any) -> tuple[int | str, ...]:
    """The wrapped axes as given: indices or the names z, y, x, as a list, a tuple, one axis or
    text (``"z,y,x"``); raises a ``ValueError`` saying what is expected."""
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    elif _integer(value):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValueError(_WHAT)
    out: list[int | str] = []
    for v in value:
        if isinstance(v, str) and v.lower() in NAMES and len(v) == 1:
            out.append(v.lower())
        elif isinstance(v, str) and v.lstrip("-").isdigit():
            out.append(int(v))
        elif _integer(v):
            out.append(int(v))
        else:
            raise ValueError(_WHAT)
    return tuple(out)


def _integer(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def axes(ndim: int, given: Any) -> tuple[int, ...]:
    """The wrapped axes of an ``ndim``-dimensional volume, sorted, from ``given`` (see
    :func:`spelled`; None: none). The names are those of the last three axes (2D: y, x)."""
    if given is None:
        return ()
    names = NAMES[3 - min(ndim, 3) :]
    out: list[int] = []
    for a in spelled(given):
        if isinstance(a, str):
            if a not in names:
                raise ValueError(
                    f"wrap axis {a!r} is not an axis of a {ndim}D volume "
                    f"(its axes are {', '.join(names) or 'none'})"
                )
            a = ndim - len(names) + names.index(a)
        elif not -ndim <= a < ndim:
            raise ValueError(f"wrap axis {a} is out of range for a {ndim}D volume")
        a %= ndim
        if a in out:
            raise ValueError(f"wrap axis {a} is given twice")
        out.append(a)
    return tuple(sorted(out))
