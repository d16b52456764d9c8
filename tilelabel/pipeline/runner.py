"""zarr -> zarr on a dask.distributed cluster, in three phases with progress.

1. labeling: every chunk is read and labeled; only its summary stays (faces, border keys, counts;
   the faces only until the border pairs that read them are done);
2. merging: border equivalences, union-find, numbering; the component count is known here, so the
   output dtype is decided (and an overflow refused) before anything is written;
3. writing: every chunk is read and labeled again (or taken from the labels its worker kept),
   mapped through its lookup table and written. The writes are submitted as soon as the count
   is known; each starts when its chunk's lookup table is ready.

The output is created only after phase 2 and removed again if phase 3 fails; it is marked complete
in its attributes only once every chunk is written.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import dask
import numpy as np
from distributed import Client, Future, as_completed, futures_of

from tilelabel import connectivity as conn_mod
from tilelabel._version import __version__
from tilelabel.dtypes import label_dtype
from tilelabel.kernels.backends import get_backend, resolve_backend
from tilelabel.pipeline import encoders, heap, keep, ome, placement, room, zarr_io
from tilelabel.pipeline import stats as stats_mod
from tilelabel.pipeline.cluster import (
    check_workers_per_gpu,
    cluster_threads,
    connect,
    worker_threads,
)
from tilelabel.pipeline.graph import (
    Source,
    build_merge_graph,
    materialize,
    relabeled,
)
from tilelabel.pipeline.plan import ChunkPlan, plan_for_run, plan_for_storage

log = logging.getLogger("tilelabel")


@dataclass
class Result:
    components: int
    voxels: int
    seconds: float
    dtype: str
    backend: str
    #: the statistics table (``stats=True``)
    table: Any = None
    #: wall seconds of each phase, from the client: ``starting`` until the labeling pass is
    #: submitted (opening, planning, the GPU check, the graph), ``labeling`` until every chunk's
    #: summary is done, ``merging`` until the component count is known, ``writing`` until the
    #: last write
    phases: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        rate = self.voxels / self.seconds if self.seconds > 0 else float("inf")
        return (
            f"{self.components:,} components in {self.voxels:,} voxels, "
            f"{self.seconds:.2f} s ({rate / 1e6:,.1f} Mvoxel/s, {self.backend}, {self.dtype})"
        )


def _wait(client: Client, futures: Iterable[Future], desc: str, progress: bool) -> None:
    futures = list(futures)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(futures), desc=desc, unit="chunk", leave=True)
    try:
        for fut in as_completed(futures, loop=client.loop):
            # a finished future's result stays on its worker: fetching it here would bring every
            # chunk's borders and lookup specs into this process, one after the other
            if fut.status != "finished":
                fut.result()  # raises the task's exception here, with its traceback
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _write_chunk(
    source, slices, spec, target, backend, connectivity, algorithm, dtype, slot=None, turns=0
) -> None:
    clock = encoders.Clock()
    kept = None if slot is None else keep.take(slot)
    block = None if kept is not None else materialize(source, slices)
    be, labels, lut = relabeled(block, spec, backend, connectivity, algorithm, dtype, kept)
    clock.lap("relabel")
    raw = target.raw
    # with a limit on turns, a process whose encoder is still loading leaves the chunk to the
    # host rather than hold a turn while it loads (see _warm_encoder_soon)
    if raw is not None and (
        be.can_encode(raw.codec) if turns is None else be.encoder_ready(raw.codec)
    ):
        # the turn covers the compression alone, not the relabeling before it: the GPU
        # compresses a 512^3 chunk in tens of milliseconds, so a write waits for a turn about
        # as long as the host would take instead; the host only stores the bytes, after the
        # turn is given back
        wait = encoders.wait_for(labels.size * np.dtype(dtype).itemsize)
        with encoders.turn(be.device(), turns, wait) as mine:
            clock.lap("wait")
            tiles = be.encode_tiles(labels, lut, raw.tile, raw.codec) if mine else None
            clock.lap("encode" if mine else "wait")
        encoders.tally["host" if tiles is None else "device"] += 1
        if tiles is not None:
            target.write_chunks(slices, tiles)
            clock.lap("store")
            return
    target(slices, be.apply_lut(labels, lut, staging=True))
    clock.lap("host")


def _planned(
    shape: tuple[int, ...],
    storage: tuple[int, ...],
    chunks: tuple[int, ...] | None,
    backend: str,
    threads: int,
    encoding: bool,
    largest: int | None = None,
) -> ChunkPlan:
    """The run's plan: small volumes get smaller chunks, so that every worker thread works, but
    chunks the GPU may compress (``encoding``) keep enough tiles to keep it busy; ``largest``:
    at most so many voxels per chunk instead of the backend's target."""
    min_tiles = encoders.MIN_BATCH_TILES if encoding else 1
    return plan_for_run(shape, storage, chunks, backend, threads, min_tiles, largest)


def _device_chunks(out, turns: int | None, lead: int = 0) -> zarr_io.RawChunks | None:
    """The layout of ``out``'s chunks past its ``lead`` axes (an OME label image's t/c) where
    a GPU may compress them (see _write_chunk); None where zarr encodes them: no encoder turns,
    or chunks no device encoder writes."""
    return zarr_io.raw_chunks(out, lead) if turns != 0 else None


def _warm_encoder_soon(codec: str) -> None:
    """Load the device encoder in a background thread of this worker, while the labeling pass
    runs: loaded by the first write to take the GPU's turn, it held that turn while every other
    write went to the host (one such first batch held the only turn for seconds). Not as the
    merge begins: 16 processes loading nvCOMP at once delayed the merge's chain of small tasks,
    the run's critical path (last summary to resolve 0.5-1.2 s, against 0.05-0.35 s).

    Nothing where this process has loaded it already (an earlier run): each such thread makes
    a CUDA stream and an nvCOMP codec of its own, and drops them as it ends, on every worker
    while the run's first chunks are being handed out."""
    be = get_backend("cuda")
    if be.encoder_ready(codec):
        return
    threading.Thread(
        target=be.warm_encoder, args=(codec,), daemon=True, name="tilelabel-warm"
    ).start()


@heap.during_runs
def label_zarr(
    src: str,
    dst: str | None,
    *,
    connectivity: int | None = None,
    structure: np.ndarray | None = None,
    chunks: tuple[int, ...] | None = None,
    backend: str = "auto",
    algorithm: str | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    workers_per_gpu: int | None = None,
    cluster: dict[str, Any] | None = None,
    channel: int | None = None,
    timepoint: int | None = None,
    ome_labels: str | None = None,
    progress: bool = False,
    storage_options: dict[str, Any] | None = None,
    return_result: bool = False,
    stats: bool | str | None = None,
    intensity: str | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    keep_labels: int | None = None,
    keep_input: bool = True,
    gpu_encode: bool | int | None = None,
) -> int | Result | tuple:
    """Label the zarr array ``src`` into a new zarr array ``dst``; return the component count.

    Parameters
    ----------
    src, dst
        Paths or URLs of zarr arrays (v2 or v3). The output gets the input's shape, chunks,
        shards, codecs and zarr format.
    connectivity, structure
        As in :func:`tilelabel.label`; full connectivity by default.
    chunks
        Processing chunk size per axis, a whole multiple of the storage chunks; by default storage
        chunks are grouped into chunks of about 256^3 voxels (CPU) or 512^3 (GPU), smaller where
        the GPUs have no room for those (:mod:`tilelabel.pipeline.room`).
    backend
        ``"auto"`` (GPU when usable), ``"cpu"`` or ``"cuda"``.
    dtype
        ``"auto"`` (uint32 when the count fits), ``"uint32"`` (refused, before anything is
        written, when the count does not fit) or ``"uint64"``.
    overwrite
        Replace ``dst`` if it exists.
    client, scheduler, workers
        Run on this client, or connect to this scheduler address, or else use the active client
        or start a local cluster of ``workers`` workers for the run (with ``cuda``: ``workers``
        GPUs, default all visible ones).
    workers_per_gpu
        Worker processes per GPU of a local GPU cluster started for the run (see
        :func:`tilelabel.pipeline.cluster.cuda_cluster`).
    cluster
        A run config's ``cluster:`` section (``kind: local | local-cuda | scheduler | slurm``
        and its options; see :mod:`tilelabel.config`), used when ``client`` and ``scheduler``
        are not given.
    channel, timepoint, ome_labels
        For an OME-Zarr image ``src`` (see :mod:`tilelabel.pipeline.ome`): the channel and time
        point to label (needed where those axes are longer than 1), and the name of the labels
        written into the image's ``labels/`` group (``dst=None``: the name ``tilelabel``).
    progress
        Show a progress bar per phase.
    stats
        Per-component statistics (see :func:`tilelabel.regionprops` for the columns), computed
        in the labeling pass and merged across chunk borders: ``True`` returns
        ``(count, DataFrame)`` (``Result.table`` with ``return_result``); a path or URL writes
        them as Parquet there, one slab of chunks at a time.
    intensity
        Path or URL of a zarr array of the same shape: adds intensity sum, mean, min and max.
    min_size, max_size
        Keep only components of at least / at most this many voxels (inclusive); the output is
        numbered 1..count in raster order, as ``scipy.ndimage.label`` of the filtered volume.
    keep_labels
        Bytes of chunk labels each worker may keep from the labeling pass (in GPU memory for the
        ``cuda`` backend) for the writing pass, which then neither reads nor labels those chunks
        again (:mod:`tilelabel.pipeline.keep`). None, the default: one chunk's labels where the
        run has no more chunks than the cluster has worker threads, which adds nothing to a
        worker's peak memory, else none (:data:`~tilelabel.pipeline.keep.DEFAULT_LABEL_CHUNKS`);
        with ``cuda``, none where they would not fit beside the chunks in GPU memory
        (:mod:`tilelabel.pipeline.room`). 0 labels every chunk again.
    keep_input
        Keep each chunk's foreground, packed one bit per voxel, on the worker that labeled it (in
        GPU memory for ``cuda``), so that the writing pass labels the bits again instead of
        reading and decoding the input a second time. Each worker keeps at most as many bytes
        as one chunk's uint32 labels (the bits of 32 chunks), so memory stays bounded by the
        chunk size; chunks past that are read again. False reads every chunk again.
    gpu_encode
        With ``cuda``, let the GPU compress output chunks (zstd through nvCOMP, where it is
        installed: the ``gpu`` extra) and store their bytes, instead of handing labels to
        zarr's encoder on the host. Used where the output's chunks are plain zstd (level 3 or
        below, no checksum, not sharded; zarr's default codec): the frames are standard zstd,
        read by any zarr, a little larger than zstd's own at the same level. A count: at most
        that many of a GPU's worker threads compress at once, and a write that finds none free
        for about as long as the host would take goes to the host
        (:mod:`tilelabel.pipeline.encoders`); None (default):
        :data:`~tilelabel.pipeline.encoders.DEFAULT_TURNS` where the output has enough storage
        chunks (:func:`~tilelabel.pipeline.encoders.turns`; loading the encoder in every worker
        costs more than it saves on smaller outputs), else none; True: the GPU compresses every
        chunk; False: the host does. Where the GPU may compress, processing chunks hold at
        least :data:`~tilelabel.pipeline.encoders.MIN_BATCH_TILES` storage chunks. With None,
        the host compresses everything where the GPUs have no room for the encoder beside the
        chunks (:mod:`tilelabel.pipeline.room`).

    While it runs, this process's heap is frozen (``gc.freeze``, thawed once the last of its
    runs ends; see :mod:`tilelabel.pipeline.heap`), so that a local cluster's scheduler, which
    runs in this process, is not stopped by full garbage collections of it.
    """
    start = time.perf_counter()
    opts = stats_mod.options(bool(stats), min_size, max_size, intensity is not None)
    image = ome.open_image(src, storage_options, channel, timepoint)  # None: not OME-Zarr
    src_arr = image.array if image else zarr_io.open_input(src, storage_options)
    lead = image.index if image else ()  # the selected time point and channel
    shape = tuple(src_arr.shape)[len(lead) :]
    conn = conn_mod.normalize(len(shape), connectivity, structure)
    backend = resolve_backend(backend)
    remote = cluster is not None and cluster["kind"] in ("scheduler", "slurm")
    if backend == "cuda" and client is None and scheduler is None and not remote:
        get_backend("cuda")  # a clear error before a cluster starts
    label_dtype(0, dtype)  # validates the dtype name early
    check_workers_per_gpu(workers_per_gpu)
    encoders.turns(gpu_encode)  # a bad option is refused before a cluster starts
    keep.label_budget(keep_labels, 0)  # and so is a bad budget
    ome_name = ome.output_name(image, dst, ome_labels)  # None: a plain zarr array
    if ome_name:
        ome.check_labels(image, ome_name, overwrite, storage_options)
        dst = image.labels_url(ome_name)
    else:
        zarr_io.check_output(dst, src, overwrite)
    storage = zarr_io.storage_chunks(src_arr)[len(lead) :]
    if chunks is not None:  # a bad chunk size is refused before a cluster starts
        plan_for_storage(shape, storage, chunks)
    src_url, dst_url = zarr_io.normalize_url(src), zarr_io.normalize_url(dst)
    if image is not None:
        src_url = image.array_url
    source = zarr_io.ZarrSource(src_url, storage_options, lead)
    isource = None
    if intensity is not None:
        if tuple(zarr_io.open_input(intensity, storage_options).shape) != shape:
            raise ValueError(f"intensity {intensity} does not have the input's shape {shape}")
        ivals = zarr_io.ZarrSource(zarr_io.normalize_url(intensity), storage_options)
        isource = Source(lambda idx: ivals)
    # how many of a GPU's threads may compress output at once (0: none, None: all), and the
    # codec they compress with (None: zarr compresses everything on the host)
    turns, codec = 0, None
    if backend == "cuda":
        turns = encoders.turns(gpu_encode, plan_for_storage(shape, storage, storage).nchunks)
        # the output takes the input's compression (and shards), nothing else of its layout
        codec = zarr_io.raw_codec(src_arr) if turns != 0 else None
        turns = turns if codec is not None else 0  # no chunks the GPU may compress
    with connect(client, scheduler, workers, backend, cluster, workers_per_gpu) as c:
        threads = worker_threads(c)
        nthreads = cluster_threads(threads)
        planned = functools.partial(_planned, shape, storage, chunks, backend, nthreads)
        if backend == "cuda":
            run = room.fit(
                room.asker(c, threads, storage, conn),
                planned,
                conn,
                nthreads,
                turns,
                keep_labels,
                keep_input,
                may_drop_encoder=gpu_encode is None,
                may_shrink=chunks is None,
            )
            if run.turns != 0:  # loaded while the labeling pass runs
                c.run(_warm_encoder_soon, codec)
        else:
            run = room.Fit.of(planned(False), conn, nthreads, 0, keep_labels, keep_input)
        plan, turns, budget, input_budget = run.plan, run.turns, run.label_budget, run.input_budget
        log.info(
            "labeling %s %s in %d chunks of up to %s",
            shape,
            src_arr.dtype,
            plan.nchunks,
            plan.max_block_shape(),
        )
        graph = build_merge_graph(
            Source(lambda idx: source),
            plan,
            conn,
            backend,
            algorithm,
            opts,
            isource,
            budget,
            input_budget,
        )
        keeping = budget > 0 or input_budget > 0
        # labels kept on the workers for the writing pass are dropped however the run ends
        try:
            idxs = list(plan.indices())
            # phase 1 is persisted on its own, so that its bar counts chunks; phase 2 is submitted
            # at once after it and finds the summaries' keys there instead of recomputing them.
            # Chunks are labeled in raster order, and every merge task that is ready runs before
            # the chunks still to label (see placement).
            per = [(*graph.summary_keys[i], *([graph.stats_keys[i]] if opts else [])) for i in idxs]
            with dask.annotate(priority=functools.partial(placement.raster_priority, plan.grid)):
                persisted = c.persist(
                    [graph.delayed(key) for keys in per for key in keys], optimize_graph=False
                )
            # one submission, unoptimized: the specs and the count share the prefix-sum tasks, and
            # optimizing them as separate collections would rename those shared keys
            tables = [graph.delayed(graph.table_keys[i]) for i in idxs if graph.table_keys]
            *spec_futures, count_future = c.compute(
                [*tables, *(graph.delayed(graph.spec_keys[i]) for i in idxs), graph.count],
                optimize_graph=False,
            )
            table_futures, spec_futures = spec_futures[: len(tables)], spec_futures[len(tables) :]
            # Each chunk's borders (its faces: 6 MiB of a 512^3 chunk's summary of about 8) are
            # let go now that the merge's graph holds them: the scheduler frees them once the
            # border pairs that read them are done, in the labeling pass, not after the merge.
            # Held to the end, every chunk's faces stayed on its worker at once, so the host
            # peak per worker grew with the volume: 1.88 GiB at 4096^3 d 0.2 with 16 workers
            # (32 chunks each), 1.73-1.76 GiB with the release (H100s, 2026-11-24). The release
            # reaches the scheduler after the graph: one ordered stream, handled in order.
            width = len(per[0])
            summaries = [p for j, p in enumerate(persisted) if j % width]  # counts (and stats)
            counts = persisted[1::width]
            del persisted
            t_phase = time.perf_counter()
            # opening, planning, the GPU check and building and submitting the graph
            phases: dict[str, float] = {"starting": t_phase - start}
            _wait(c, futures_of(counts), "labeling", progress)
            phases["labeling"] = time.perf_counter() - t_phase
            t_phase = time.perf_counter()
            # every chunk's lookup spec is made, and waits for its write, on the worker that
            # labeled the chunk (the specs wait for their inputs: the merge has just begun)
            placed = placement.beside(
                c, {graph.spec_keys[idx]: f for idx, f in zip(idxs, counts, strict=True)}
            )
            log.debug("%d of %d lookup specs placed beside their chunks", placed, len(idxs))
            del counts
            holder = {}  # chunk index -> the worker that kept its labels or input
            if keeping:  # asked while the merge runs: every summary, so every keep, is done
                for worker, held in c.run(keep.held, graph.token).items():
                    holder.update((tuple(idx), worker) for idx in held)
            # the count comes out of the prefix sum, before the border finals and the chunks'
            # lookup specs: the output is created and the writes submitted then, each to run as
            # soon as its spec is ready
            _wait(c, [count_future], "merging", progress)
            del summaries
            count = int(count_future.result())
            phases["merging"] = time.perf_counter() - t_phase
            t_phase = time.perf_counter()
            out_dtype = label_dtype(count, dtype)

            attrs = {
                "tilelabel": {
                    "version": __version__,
                    "source": src_url,
                    "connectivity": conn,
                    "components": count,
                    "backend": backend,
                    "complete": False,
                }
            }
            if opts is not None and opts.filtering:
                attrs["tilelabel"].update(min_size=opts.min_size, max_size=opts.max_size)
            if ome_name:
                out, dst_url, out_lead = ome.create_labels(
                    image, ome_name, out_dtype, attrs, overwrite, storage_options
                )
            else:
                out_lead = ()
                out = zarr_io.create_output(
                    dst, src_arr, out_dtype, attrs, overwrite, storage_options, lead=len(lead)
                )
            raw = _device_chunks(out, turns, len(out_lead))
            target = zarr_io.ZarrTarget(dst_url, storage_options, out_lead, raw)
            # each write goes to the worker that kept its chunk's labels or input, if one did
            # (elsewhere it reads and labels the chunk again)
            run = uuid.uuid4().hex
            writes = [
                c.submit(
                    _write_chunk,
                    source,
                    plan.slices(idx),
                    spec,
                    target,
                    backend,
                    conn,
                    algorithm,
                    out_dtype,
                    graph.slots.get(idx),
                    turns,
                    key=f"tilelabel-write-{run}-{i}",
                    workers=[holder[idx]] if idx in holder else None,
                    allow_other_workers=idx in holder,
                )
                for i, (idx, spec) in enumerate(zip(idxs, spec_futures, strict=True))
            ]
            try:
                _wait(c, writes, "writing", progress)
                if ome_name:
                    ome.fill_levels(c, image, ome_name, storage_options)
            except BaseException:
                zarr_io.remove(dst, storage_options)
                raise
            attrs["tilelabel"]["complete"] = True
            out.attrs.update(attrs)
            phases["writing"] = time.perf_counter() - t_phase
            if ome_name:
                ome.publish_labels(image, ome_name, storage_options)
        finally:
            if keeping:
                per_worker = list(c.run(keep.drop, graph.token).values())
                log.info(
                    "writing pass: %d of %d chunks from labels kept on the workers, %d from "
                    "their kept input",
                    sum(t[0] for t in per_worker),
                    plan.nchunks,
                    sum(t[1] for t in per_worker),
                )
        table = None
        if table_futures:
            table = stats_mod.collect(
                c,
                table_futures,
                idxs,
                stats_mod.columns(len(shape), isource is not None),
                path=None if stats is True else os.fspath(stats),
                frame=stats is True,
            )

    result = Result(
        count,
        int(np.prod(shape)),
        time.perf_counter() - start,
        str(out_dtype),
        backend,
        table,
        phases,
    )
    log.info("phases: %s", ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    log.debug("%s", result.summary())
    if return_result:
        return result
    return (count, table) if stats is True else count
