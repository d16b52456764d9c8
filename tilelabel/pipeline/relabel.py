"""Step 6, relabel and write: each chunk's local labels mapped through its lookup table.

A chunk's local labels come back from what its worker kept of the labeling pass
(:mod:`tilelabel.pipeline.kept`: its labels, or its foreground packed one bit per voxel, labeled
again), or else from its input, read and labeled again: the kernels' canonical numbering makes
the second pass identical to the first, and memory per worker stays O(chunk) for any volume.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from tilelabel.chunking import Chunk
from tilelabel.kernels.backends import Backend, get_backend
from tilelabel.pipeline import kept
from tilelabel.pipeline.local import Labeler, constant_labels, materialize
from tilelabel.pipeline.numbering import LutSpec, build_lut

_lock = threading.Lock()
#: writes running in this process, by the token of their run's writing pass
_in_flight: dict[str, int] = {}


def _write_prefix(token: str) -> str:
    return f"tilelabel-write-{token}-"


def write_key(token: str, i: int) -> str:
    """The task key of the ``i``-th write of the run ``token``'s writing pass."""
    return f"{_write_prefix(token)}{i}"


def writes_in_flight(token: str, dask_worker: Any = None) -> int:
    """How many writes of ``token`` run in this process (a failed run waits for none to be left).
    On a dask worker (``dask_worker``, which ``Client.run`` passes), a write it executes counts
    from its start: a cancelled write can start before the cancel arrives, and run a moment before
    it enters :func:`write_chunk`."""
    with _lock:
        inside = _in_flight.get(token, 0)
    if dask_worker is None:
        return inside
    prefix = _write_prefix(token)
    started = sum(str(ts.key).startswith(prefix) for ts in list(dask_worker.state.executing))
    return max(inside, started)


@contextlib.contextmanager
def _writing(token: str) -> Iterator[None]:
    with _lock:
        _in_flight[token] = _in_flight.get(token, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _in_flight[token] -= 1
            if not _in_flight[token]:
                del _in_flight[token]


def labels_again(
    block: np.ndarray | None, spec: LutSpec, *, labeler: Labeler, entry: kept.Kept | None = None
) -> tuple[Backend, Any]:
    """(backend, local labels on its device) of a chunk in the writing pass: its kept labels,
    or its kept bits or ``block`` labeled again, checked against the first pass's count."""
    be = get_backend(labeler.backend)
    if entry is not None and entry.labels is not None:
        labels, n = entry.labels, entry.n
    else:
        if entry is not None:
            block = be.unpack(entry.packed, entry.shape)
        labels, n, _ = labeler.label(block)
    if n != spec.n:
        raise RuntimeError(
            f"relabel pass found {n} local labels where the first pass found {spec.n}"
        )
    return be, labels


def relabel(block: np.ndarray, spec: LutSpec, *, labeler: Labeler, dtype: np.dtype) -> np.ndarray:
    """A chunk labeled again and mapped to its final labels (a host array of ``dtype``)."""
    # on the host: its few array steps would each be a kernel to compile on a fresh GPU node,
    # and the table (a few bytes a label) crosses the bus in one copy
    lut = build_lut(spec, dtype)
    be, labels = labels_again(block, spec, labeler=labeler)
    return be.apply_lut(labels, lut)


def write_chunk(
    block: Any,
    spec: LutSpec,
    *,
    chunk: Chunk,
    labeler: Labeler,
    dtype: np.dtype,
    target: Any,
    slot: kept.Slot | None = None,
    encoder: Any = None,
    marks: Any = None,
    token: str = "",
    constant: np.generic | None = None,
    values: bool = False,
) -> None:
    """The writing pass's task: the chunk's final labels into ``target`` (a
    :class:`tilelabel.storage.ZarrTarget`), then the chunk recorded as written in ``marks``
    (:class:`tilelabel.storage.lease.Marks`). ``block``: a reader of the input, called only
    where nothing of the chunk was kept (``slot``); ``encoder``: where set, how the chunk may be
    compressed on the device (:meth:`tilelabel.resources.encoding.GPUEncoder.encode`), whose
    compressed storage chunks the target then stores as they are. While it runs, it counts as
    one of ``token``'s writes in flight (:func:`writes_in_flight`). ``constant``: the chunk
    holds no stored data and is all this value, labeled once per process, not read.
    ``values``: write the input's values where the table keeps a label, 0 elsewhere (dust)."""
    with _writing(token):
        lut = build_lut(spec, np.dtype(np.uint64) if values else dtype)
        entry = None if slot is None else kept.take(slot)
        if constant is not None:
            labels, n, *_ = constant_labels(labeler, chunk.shape, constant)
            entry = kept.Kept(labels=labels, n=n, packed=None, shape=chunk.shape)
            if values:
                block = np.full(chunk.shape, constant)
        elif entry is None or values:
            block = materialize(block, chunk.slices, labeler)
        be, labels = labels_again(block, spec, labeler=labeler, entry=entry)
        tiles = None if encoder is None else encoder.encode(be, labels, lut)
        if values:
            target(chunk.slices, be.keep_values(block, labels, lut != 0))
        elif tiles is not None:
            target.write_chunks(chunk.slices, tiles)
        else:
            # page-locked where the backend has it: the labels are written out and dropped
            target(chunk.slices, be.apply_lut(labels, lut, staging=True))
        if marks is not None:
            marks.mark(chunk.index)
