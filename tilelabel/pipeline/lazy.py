"""The lazy path: a dask array in, a lazy dask array of labels and a lazy count out."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.highlevelgraph import HighLevelGraph

from tilelabel.chunking import ChunkPlan
from tilelabel.connectivity import max_components
from tilelabel.dtypes import LabelOverflowError, label_dtype
from tilelabel.pipeline import graph as graph_mod
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.local import Labeler
from tilelabel.pipeline.relabel import relabel


def _relabel_checked(block, spec, total, *, labeler: Labeler, dtype: np.dtype) -> np.ndarray:
    if total > np.iinfo(dtype).max:
        raise LabelOverflowError(
            f"{total} labels do not fit in {np.dtype(dtype)}; use uint64 or auto"
        )
    return relabel(block, spec, labeler=labeler, dtype=dtype)


def _source(x: da.Array, token: str) -> graph_mod.Source:
    return graph_mod.Source(lambda idx: (x.name, *idx), [x], token=token)


def _plan(x: da.Array, wrap: tuple[int, ...]) -> ChunkPlan:
    return ChunkPlan(tuple(x.shape), tuple(tuple(c) for c in x.chunks), wrap)


def label_dask(
    x: da.Array,
    *,
    labeler: Labeler,
    dtype: str,
    min_size: int | None = None,
    max_size: int | None = None,
    largest_k: int | None = None,
    order: str = "raster",
    wrap: tuple[int, ...] = (),
) -> tuple[da.Array, da.Array]:
    plan = _plan(x, wrap)
    opts = stats_mod.options(
        min_size=min_size, max_size=max_size, largest_k=largest_k, order=order, chunked=True
    )
    # a filtered or wrapped graph must not share key names with the plain one of the same array
    token = x.name if opts is None else f"{x.name}-{min_size}-{max_size}-{largest_k}-{order}"
    token += "-multilabel" if labeler.multilabel else ""
    token += f"-delta{labeler.delta}" if labeler.delta is not None else ""
    token += f"-wrap{''.join(map(str, wrap))}" if wrap else ""
    graph = graph_mod.build(source=_source(x, token), plan=plan, labeler=labeler, stats=opts)
    # the dtype of a lazy array is fixed before the count is known: choose it from the largest
    # count this shape can have; a forced uint32 is checked against the real count when computed
    bound = max_components(plan.shape, labeler.connectivity, labeler.multilabel)
    out = np.dtype(np.uint32) if dtype == "uint32" else label_dtype(bound, dtype)
    how = f"{labeler.connectivity}-{labeler.backend}-{labeler.algorithm}"
    name = f"tilelabel-labels-{token}-{how}-{out}"
    count = da.Array(graph.graph, graph.layer, (), dtype=np.int64)
    total_key = graph.count_key
    dsk = {
        (name, *idx): graph_mod.task(
            _relabel_checked,
            (x.name, *idx),
            graph.spec_keys[idx],
            total_key,
            labeler=labeler,
            dtype=out,
        )
        for idx in plan.indices()
    }
    spec0 = graph.delayed(graph.spec_keys[(0,) * x.ndim])
    hlg = HighLevelGraph.from_collections(name, dsk, dependencies=[x, spec0, count])
    # a NumPy scalar, as a 0-d dask array computes to (int(count) asks it for .item())
    count = count.map_blocks(np.int64, dtype=np.int64)
    return da.Array(hlg, name, plan.chunks, dtype=out), count


def regionprops_dask(
    x: da.Array,
    *,
    labeler: Labeler,
    intensity: da.Array | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    spacing: tuple[float, ...] | None = None,
    largest_k: int | None = None,
    order: str = "raster",
    wrap: tuple[int, ...] = (),
):
    """The statistics table of the labeling of ``x`` (computed now, a pandas DataFrame)."""
    import dask

    plan = _plan(x, wrap)
    opts = stats_mod.options(
        True, min_size, max_size, intensity is not None, spacing, x.ndim, largest_k, order, True
    )
    isource = None
    if intensity is not None:
        if tuple(intensity.shape) != plan.shape:
            raise ValueError(f"intensity shape {intensity.shape} differs from {plan.shape}")
        intensity = intensity.rechunk(x.chunks)
        isource = _source(intensity, intensity.name)
    token = f"{x.name}-stats-{isource and isource.token}-{min_size}-{max_size}-{opts.spacing}"
    token += f"-{largest_k}-{order}-{wrap}" + ("-multilabel" if labeler.multilabel else "")
    token += f"-delta{labeler.delta}" if labeler.delta is not None else ""
    graph = graph_mod.build(
        source=_source(x, token), plan=plan, labeler=labeler, stats=opts, intensity=isource
    )
    pieces = dask.compute(*(graph.delayed(graph.table_keys[i]) for i in plan.indices()))
    names = stats_mod.columns(x.ndim, intensity is not None, opts.spacing, labeler.by_value)
    return stats_mod.to_frame(stats_mod.concat(pieces, names))


def contacts_dask(
    x: da.Array,
    *,
    labeler: Labeler,
    connectivity: int,
    spacing: tuple[float, ...] | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    largest_k: int | None = None,
    order: str = "raster",
    wrap: tuple[int, ...] = (),
):
    """The region graph of the labeling of ``x`` (computed now, a pandas DataFrame sorted by
    pair; :mod:`tilelabel.pipeline.contacts`)."""
    import dask

    from tilelabel.pipeline import contacts as contacts_mod

    plan = _plan(x, wrap)
    opts = stats_mod.options(
        min_size=min_size, max_size=max_size, largest_k=largest_k, order=order, chunked=True
    )
    value_dtype = x.dtype.str if labeler.by_value else None
    graph_opts = contacts_mod.ContactsOptions(connectivity, spacing, value_dtype)
    token = f"{x.name}-contacts-{graph_opts}-{min_size}-{max_size}-{largest_k}-{order}-{wrap}"
    token += f"-{labeler}"
    graph = graph_mod.build(
        source=_source(x, token), plan=plan, labeler=labeler, stats=opts, contacts=graph_opts
    )
    pieces = dask.compute(*(graph.delayed(k) for k in graph.contacts_keys))
    return contacts_mod.to_frame(pieces, contacts_mod.names(value_dtype is not None))
