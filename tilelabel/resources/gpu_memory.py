"""Whether a run fits its GPUs' memory, and what it gives up, where it can, so that it does.

Every worker thread may hold one chunk on its GPU at once; beside them each worker may keep
labels and packed input between the passes (:mod:`tilelabel.pipeline.kept`), and the threads
that compress output need the encoder's room too (:mod:`.encoding`). Both extras are defaults
that only save time, so on a GPU too small for them a run gives them up rather than refuse:
first the kept labels, then the GPU's compression (the host compresses the output, and the plan
no longer needs chunks large enough for the encoder), then both; and where the chunk size is the
default's, smaller chunks after that. What the user asked for by name is never given up; where
nothing fits, the run is refused with a chunk size that would.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Callable, Iterator

import numpy as np

from tilelabel.chunking import ChunkPlan
from tilelabel.dtypes import local_dtype
from tilelabel.resources.plan import RunPlan, chunk_voxels

log = logging.getLogger("tilelabel")

#: a function of the bytes each worker keeps between the passes (and ``advice=True``): why the
#: GPUs have no room for the run's chunks and that, and what would fit (None: they have room;
#: :func:`shortfall` bound to the workers' answers)
Shortfall = Callable[..., "str | None"]


def first_that_fits(
    *,
    check: Callable[[ChunkPlan, bool], Shortfall],
    chunks_for: Callable[..., ChunkPlan],
    connectivity: int,
    threads: int,
    codec: str | None,
    keep_labels: int | None,
    keep_input: bool,
    may_drop_encoder: bool,
    may_shrink: bool = False,
    per_worker: int = 1,
) -> RunPlan:
    """The first run that fits, in the order of the module's docstring, or a ValueError that
    says why the last one tried does not.

    ``check(plan, encode)``: the GPUs' :data:`Shortfall` for ``plan``'s chunks, with the GPU
    compressing the output or not (:func:`gpu_check`); ``chunks_for(encoding, largest=None)``:
    the run's chunks where the GPU compresses output or not, at most ``largest`` voxels each;
    ``threads``: the cluster's worker threads; ``codec``: the output's codec where the GPU is to
    compress it (None: it is not); ``may_drop_encoder``: that is the default's, not the user's;
    ``may_shrink``: the chunk size is the default's, so a run that fits nowhere else labels in
    chunks of at most half the voxels, and half again, down to one storage chunk."""
    encode = codec is not None
    why = short = default = None  # why the defaults do not fit, without the advice
    for gpu, plan in _fallbacks(chunks_for, encode, may_drop_encoder, may_shrink):
        default = default or plan  # the first try's
        run = RunPlan.of(
            plan,
            connectivity,
            threads,
            keep_labels,
            keep_input,
            codec=codec if gpu else None,
            per_worker=per_worker,
        )
        labels, bits = run.held(connectivity)
        short_of = check(run.chunks, gpu)
        for kept in (labels, 0) if keep_labels is None and labels else (labels,):
            short = short_of(bits + kept)
            if why is None and short is not None:
                why = short_of(bits + kept, advice=False)
            if short is None:
                given_up = []
                if kept != labels:
                    run = dataclasses.replace(run, label_budget=0)
                    given_up.append("keeps no chunk labels between the passes")
                if gpu != encode:
                    given_up.append("compresses the output on the host")
                if plan != default:
                    given_up.append(f"labels in chunks of up to {plan.max_block_shape()}")
                if given_up:
                    log.warning(
                        "the GPUs have no room for this run's defaults, so it %s: %s",
                        " and ".join(given_up),
                        why,
                    )
                return run
    raise ValueError(short)


def _fallbacks(
    chunks_for: Callable[..., ChunkPlan],
    encode: bool,
    may_drop_encoder: bool,
    may_shrink: bool,
) -> Iterator[tuple[bool, ChunkPlan]]:
    """(whether the GPU compresses, chunks) of each run :func:`first_that_fits` tries, the
    defaults first."""
    plan = chunks_for(encode)
    yield encode, plan
    least = encode and not may_drop_encoder  # the encoder named by the user stays
    if least != encode:
        plan = chunks_for(False)
        yield least, plan
    target = chunk_voxels(plan) // 2
    while may_shrink and target:
        # chunks are whole storage chunks, so a halved target may leave the plan as it was
        smaller = chunks_for(least, target)
        if smaller != plan:
            plan = smaller
            yield least, plan
        target //= 2


def gpu_check(
    ex,
    threads: dict[str, int],
    storage: tuple[int, ...],
    connectivity: int,
    input_itemsize: int = 1,
    tile: tuple[int, ...] | None = None,
) -> Callable[[ChunkPlan, bool], Shortfall]:
    """:func:`first_that_fits`' ``check`` for the workers of the executor ``ex``
    (:mod:`tilelabel.workflow.executors`): asks them about their GPUs, after a clear error
    where a worker has no usable GPU at all.

    ``threads``: per worker, its threads (``ex.threads()``); ``input_itemsize``: bytes per
    voxel of the input; ``tile``: the chunks its codec frames hold (inside ``storage``'s
    shards; default: ``storage``).
    """
    from tilelabel.kernels.backends import BackendUnavailable, cuda_available

    usable = ex.each(cuda_available)
    if not usable or not all(usable.values()):
        raise BackendUnavailable(
            "backend 'cuda' was requested but the cluster's workers have no usable GPU "
            f"(per worker: {usable})"
        )
    reports: dict[tuple, dict[str, tuple]] = {}

    def report(block: tuple[int, ...], encode: bool) -> dict[str, tuple]:
        # the tries of one run share their blocks: each block is asked about once
        if (block, encode) not in reports:
            ldt = local_dtype(block, connectivity)
            reports[block, encode] = ex.each(
                chunk_memory,
                block,
                ldt,
                connectivity,
                tile=tile or storage,
                encode=encode,
                input_itemsize=input_itemsize,
            )
        return reports[block, encode]

    def check(plan: ChunkPlan, encode: bool) -> Shortfall:
        """The workers' GPUs' :data:`Shortfall` for ``plan``'s largest chunk. With ``encode``,
        every worker thread may compress output and needs room for the encoder too."""
        block = plan.max_block_shape()
        base = report(block, False)
        extra = 0
        if encode:
            encoding = report(block, True)
            extra = max(encoding[w][0] - base[w][0] for w in base)
        return functools.partial(shortfall, base, threads, block, storage, encode=extra)

    return check


def chunk_memory(
    block_shape: tuple[int, ...],
    label_dtype,
    connectivity: int,
    tile: tuple[int, ...],
    encode: bool = False,
    input_itemsize: int = 1,
) -> tuple[int, int, int, str]:
    """(bytes one chunk of ``block_shape`` needs on this worker's GPU, bytes free on the device
    now, bytes free in this process's own pool, the device's identity): run on each worker
    (``Executor.each``), since several workers may share one GPU (same identity). ``tile``: the
    storage chunks of the input and output; ``encode``: the writing pass may compress the
    output on the GPU, counted only where it can."""
    from tilelabel.kernels.cuda.backend import device_memory

    return device_memory(
        tuple(block_shape),
        np.dtype(label_dtype),
        connectivity,
        tuple(tile),
        encode=encode,
        input_itemsize=input_itemsize,
    )


def _by_gpu(report: dict[str, tuple], threads: dict[str, int]) -> dict[str, list[tuple]]:
    """Per GPU (the device identity of ``report``'s rows, see :func:`shortfall`), the
    ``(need, device free, pool free, threads)`` of each worker that uses it."""
    per_gpu: dict[str, list[tuple]] = {}
    for worker, (need, device_free, pool_free, device) in report.items():
        per_gpu.setdefault(device, []).append((need, device_free, pool_free, threads[worker]))
    return per_gpu


def shortfall(
    report: dict[str, tuple[int, int, int, str]],
    threads: dict[str, int],
    block: tuple[int, ...],
    storage: tuple[int, ...],
    kept: int = 0,
    encode: int = 0,
    advice: bool = True,
) -> str | None:
    """Why chunks of ``block`` do not fit the cluster's GPUs (None: they fit), and with
    ``advice`` what would.

    ``report``: per worker, :func:`chunk_memory`'s (need, device
    free, own pool free, device); ``threads``: per worker, its threads. Every worker thread may
    hold a chunk at once, the workers of one device share its memory, and each worker may also
    hold ``kept`` bytes between the passes (packed input, which scales with the chunk too).
    Each thread that compresses output needs ``encode`` bytes more (0: none does).
    """
    for rows in _by_gpu(report, threads).values():
        need = max(r[0] for r in rows)
        free = min(r[1] for r in rows) + sum(r[2] for r in rows)
        slots = sum(r[3] for r in rows)
        total = (need + encode) * slots + kept * len(rows)
        if total <= free:
            continue
        shared = (
            f"{slots} worker threads share a GPU with {free / 2**30:.1f} GiB free"
            if slots > 1
            else f"a worker's GPU has {free / 2**30:.1f} GiB free"
        )
        compress = f" (and {encode / 2**30:.1f} GiB more to compress it there)" if encode else ""
        if kept:
            compress += f", each worker keeps {kept / 2**30:.1f} GiB between the passes"
        why = (
            f"processing chunk {block} needs about {need / 2**30:.1f} GiB of GPU memory per "
            f"worker thread{compress}, and {shared}"
        )
        if not advice:
            return why
        fit = shrink_to_fit(block, storage, free / total * 0.9)
        fewer = " (or fewer worker threads per GPU)" if slots > 1 else ""
        return f"{why}; use --chunks {','.join(map(str, fit))} or smaller{fewer}"
    return None


def shrink_to_fit(
    block: tuple[int, ...], storage: tuple[int, ...], ratio: float
) -> tuple[int, ...]:
    """A chunk shape, whole multiples of ``storage``, holding at most ``ratio`` of ``block``'s
    voxels: every axis scaled by ratio^(1/ndim), the largest first where rounding leaves room."""
    scale = ratio ** (1.0 / len(block))
    out = [max(s, int(b * scale) // s * s) for b, s in zip(block, storage, strict=True)]
    limit = ratio * math.prod(block)
    while math.prod(out) > limit and any(o > s for o, s in zip(out, storage, strict=True)):
        axis = max(range(len(out)), key=lambda a: out[a] if out[a] > storage[a] else -1)
        out[axis] -= storage[axis]
    return tuple(out)
