"""Phase 0, open: everything the input, the output and the options allow checking, before any
cluster starts; a clear error for the first thing wrong.

Where the run's tasks execute is decided here, once (:func:`.executors.where`). The backend is
settled where it runs: here, or on the workers of a cluster the run joins
(:func:`settle_backend`, once its executor is open). A resumed run takes the options of the
killed run's labels (:func:`resumed`). Then the run takes its output's lease
(:meth:`tilelabel.storage.Output.take`): a place another run writes, or one that cannot be
written, is refused there.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import TYPE_CHECKING

import numpy as np

from tilelabel import connectivity as conn_mod
from tilelabel import periodic
from tilelabel.dtypes import check_values
from tilelabel.kernels.backends import cuda_available, resolve_backend
from tilelabel.options import Options
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.contacts import ContactsOptions
from tilelabel.pipeline.local import Labeler
from tilelabel.resources import Workload, for_backend
from tilelabel.storage import (
    ZarrSource,
    normalize_url,
    open_input,
    open_output,
    open_volume,
    places,
)
from tilelabel.storage.outputs import check_resume, check_table
from tilelabel.workflow.executors import where
from tilelabel.workflow.state import Run, attributes

if TYPE_CHECKING:
    from distributed import Client

    from tilelabel.workflow.executors import Executor

log = logging.getLogger("tilelabel")


def open_run(
    options: Options,
    *,
    structure: np.ndarray | None = None,
    progress: bool = False,
    client: Client | None = None,
) -> Run:
    """The checked :class:`~.state.Run` of ``options`` (see the module's docstring)."""
    o, started = options, time.perf_counter()
    if o.spacing is not None and not o.stats and o.contacts is None:
        raise ValueError(
            "a spacing is only used by the statistics table and the region graph; ask for one "
            "(--stats, --contacts)"
        )
    if o.cluster is not None and o.cluster["kind"] == "slurm-runner":
        from tilelabel.cluster import jobqueue

        if jobqueue.serves(o.cluster):
            raise ValueError(
                f"task {os.environ['SLURM_PROCID']} of this allocation serves the run of task "
                f"{jobqueue.CLIENT_TASK}: call tilelabel.cluster.jobqueue.serve_unless_client "
                "before label_zarr, as the tilelabel command does"
            )
    volume = open_volume(o.input, o.storage_options, o.channel, o.timepoint)
    ndim = len(volume.shape)
    o = dusting(o)
    stats = stats_mod.options(
        bool(o.stats),
        o.min_size,
        o.max_size,
        o.intensity is not None,
        spacing=o.spacing or volume.spacing,
        ndim=ndim,
        largest_k=o.largest_k,
        order=o.order,
        chunked=True,
    )
    connectivity = conn_mod.normalize(ndim, o.connectivity, structure)
    if o.delta is not None:
        o = continuous(o)
    elif o.multilabel:
        check_values(volume.array.dtype)
    graph = region_graph(o, ndim, connectivity, o.spacing or volume.spacing, volume.array.dtype)
    wrap = periodic.axes(ndim, o.wrap_axes)
    at = where(o, client)
    # on workers the run does not start, "auto" is theirs to settle (settle_backend)
    backend = "cpu" if at.remote and o.backend == "auto" else resolve_backend(o.backend)
    resources = for_backend(backend)
    if not at.remote:
        resources.check_here()  # before a local cluster starts for it
    inputs = {"input": volume.image.url if volume.image else volume.url}
    if o.intensity is not None:
        inputs["intensity image"] = normalize_url(o.intensity)
    output = open_output(
        volume,
        o.output,
        o.ome_labels,
        o.storage_options,
        overwrite=o.overwrite,
        force=o.force,
        resume=o.resume,
        inputs=inputs,
    )
    check_tables(o, output, inputs, graph)
    intensity = None
    if o.intensity is not None:
        if tuple(open_input(o.intensity, o.storage_options).shape) != volume.shape:
            raise ValueError(
                f"intensity {o.intensity} does not have the input's shape {volume.shape}"
            )
        intensity = ZarrSource(normalize_url(o.intensity), o.storage_options)
    labeler = Labeler(backend, connectivity, o.algorithm, multilabel=o.multilabel, delta=o.delta)
    itemsize = volume.array.dtype.itemsize
    # no task visits the chunks that hold no data, or with a nonzero fill, none reads them
    stored, fill = volume.stored_chunks(), volume.fill
    nstored = None if stored is None or fill is not None else len(stored)
    run = Run(
        options=o,
        volume=volume,
        output=output,
        labeler=labeler,
        resources=resources,
        where=at,
        # a bad chunk size is refused here, before a cluster starts
        workload=Workload.of(volume.shape, volume.storage_chunks, o.chunks, itemsize, nstored),
        stats=stats,
        contacts=graph,
        intensity=intensity,
        wrap=wrap,
        stored=stored,
        fill=fill,
        progress=progress,
        started=started,
    )
    if output.mode in ("resume", "done", "table"):
        o = resumed(run)
        workload = Workload.of(volume.shape, volume.storage_chunks, o.chunks, itemsize, nstored)
        run = dataclasses.replace(run, options=o, workload=workload)
    return run


def region_graph(
    o: Options, ndim: int, connectivity: int, spacing, dtype: np.dtype
) -> ContactsOptions | None:
    """The region graph's options (None: none asked for), refused where it has no meaning."""
    if o.contacts is None:
        if o.contacts_connectivity is not None:
            raise ValueError(
                "contacts_connectivity goes with contacts: --contacts-connectivity C with "
                "--contacts PATH"
            )
        return None
    if ndim not in (2, 3):
        raise ValueError(f"the region graph is of 2D and 3D volumes, not {ndim}D")
    if o.dust is not None:
        raise ValueError("dust writes the input's values, not labels: no region graph with it")
    full = conn_mod.normalize(ndim)
    given = o.contacts_connectivity
    conn = conn_mod.normalize(ndim, given) if given is not None else None
    if conn is None:
        conn = connectivity if o.multilabel else full
    if not o.multilabel and conn <= connectivity:
        raise ValueError(
            f"the components of a binary input never touch under connectivity {conn}, which "
            f"joins them; label at a smaller one than the graph's (e.g. --connectivity "
            f"{2 * ndim} --contacts-connectivity {full})"
        )
    spacing = stats_mod.checked_spacing(spacing, ndim)
    by_value = o.multilabel and o.delta is None
    return ContactsOptions(conn, spacing, dtype.str if by_value else None)


def check_tables(o: Options, output, inputs: dict[str, str], graph) -> None:
    """The statistics table and the region graph, outputs of the run too: refused before any
    work where they clash with its other places or cannot be written. Complete labels without
    one of them (``done``) become ``table``: the run writes them and leaves the labels."""
    record = output.record or {}
    files = [(o.table, "table", "statistics table", None)]
    files += [(o.contacts, "contacts", "region graph", graph and graph.connectivity)]
    ours, exists = {}, {}
    for url, key, _, conn in files:
        if url is None:
            continue
        # the file of these labels: where their run wrote it, and with the same connectivity
        ours[key] = record.get(key) == normalize_url(url) and (
            conn is None or record.get("contacts_connectivity") == conn
        )
        exists[key] = _exists(url, o.storage_options)
        if output.mode == "done" and not (ours[key] and exists[key]):
            output.mode = "table"  # complete labels without their table: the run writes it
    if output.mode == "done":
        return
    inputs["labels output"] = output.url
    for url, key, name, _ in files:
        if url is None:
            continue
        # a resume may replace what the run it finishes was told to replace, and the labels'
        # own file where it writes the other one
        mine = bool(record.get(f"replace_{key}")) or (output.mode == "table" and exists[key])
        replace = o.overwrite or o.force or (ours[key] and mine)
        check_table(url, inputs, replace, o.storage_options, resuming=o.resume, name=name)
        inputs[name] = normalize_url(url)


def dusting(o: Options) -> Options:
    """``o`` with ``dust`` made the size filter it is over components per value (cc3d's
    ``dust``); refused beside the options that decide which components stay or what a
    table describes."""
    if o.dust is None:
        if o.invert:
            raise ValueError("invert goes with dust: --invert with --dust N (invert=True, dust=N)")
        return o
    clash = [
        f"{name} (--{name.replace('_', '-')})"
        for name, given in (
            ("min_size", o.min_size is not None),
            ("max_size", o.max_size is not None),
            ("largest_k", o.largest_k is not None),
            ("order", o.order != "raster"),
            ("stats", bool(o.stats)),
        )
        if given
    ]
    if clash:
        raise ValueError(
            f"dust writes the input's values without the small components; it does not go "
            f"with {', '.join(clash)} (label first, then measure or filter the labels)"
        )
    small = {"max_size": max(o.dust - 1, 0)} if o.invert else {"min_size": o.dust}
    return dataclasses.replace(o, multilabel=True, **small)


def continuous(o: Options) -> Options:
    """A ``delta`` run's options: labels per value (``multilabel``), without ``dust`` or an
    algorithm (each backend has one continuous kernel)."""
    if o.dust is not None:
        raise ValueError("delta does not go with dust (cc3d's dust has no delta)")
    if o.algorithm is not None:
        raise ValueError("delta has one kernel (cc3d's continuous labeling); leave out algorithm")
    return dataclasses.replace(o, multilabel=True)


def _exists(url: str, storage_options: dict | None) -> bool:
    fs, path = places.filesystem(url, storage_options)
    return fs.exists(path)


def resumed(run: Run) -> Options:
    """The options of a run that resumes (or finds complete) the labels of ``run.output``:
    refused where they would make other labels, given the killed run's processing chunks."""
    check_resume(run.output, attributes(run, None)["tilelabel"])
    o, recorded = run.options, run.output.record.get("chunks")
    if recorded is None:
        return o
    recorded = tuple(int(c) for c in recorded)
    if o.chunks is not None and tuple(o.chunks) != recorded:
        raise ValueError(
            f"output {run.output.url} is being written in chunks of {recorded}; resume it "
            "with those (or without --chunks)"
        )
    return dataclasses.replace(o, chunks=recorded)


def settle_backend(run: Run, ex: Executor) -> Run:
    """``auto`` on workers the run did not start: ``cuda`` where every worker has a usable GPU,
    else ``cpu``. Asked of the workers, not this process: a client without a GPU may drive GPU
    workers, and asking here would load CUDA into the caller for nothing."""
    if not (run.where.remote and run.options.backend == "auto"):
        return run
    usable = ex.each(cuda_available)
    backend = "cuda" if usable and all(usable.values()) else "cpu"
    log.info("backend 'auto' on %d workers: %s", len(usable), backend)
    labeler = dataclasses.replace(run.labeler, backend=backend)
    return dataclasses.replace(run, labeler=labeler, resources=for_backend(backend))
