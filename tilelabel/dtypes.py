"""Dtype choices: the one place that decides between uint32 and uint64 labels, and how wide the
numbering's counts and offsets are."""

from __future__ import annotations

import numpy as np

from tilelabel.connectivity import max_components

UINT32_MAX = int(np.iinfo(np.uint32).max)
LABEL_DTYPES = {"uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64)}


class LabelOverflowError(ValueError):
    """The requested label dtype cannot hold the number of components."""


def label_dtype(max_label: int, requested: str | np.dtype = "auto") -> np.dtype:
    """uint32 when ``max_label`` fits in it, else uint64; ``requested`` may force one.

    Forcing uint32 when ``max_label`` does not fit raises :class:`LabelOverflowError` instead of
    wrapping around silently.
    """
    req = str(np.dtype(requested)) if requested != "auto" else "auto"
    if req not in ("auto", *LABEL_DTYPES):
        raise ValueError(f"dtype must be 'auto', 'uint32' or 'uint64', got {requested!r}")
    if req == "uint64":
        return LABEL_DTYPES["uint64"]
    fits = max_label <= UINT32_MAX
    if req == "uint32" and not fits:
        raise LabelOverflowError(
            f"{max_label} labels do not fit in uint32 (at most {UINT32_MAX}); use uint64 or auto"
        )
    return LABEL_DTYPES["uint32"] if fits else LABEL_DTYPES["uint64"]


def local_dtype(
    block_shape: tuple[int, ...], connectivity: int, multilabel: bool = False
) -> np.dtype:
    """Label dtype of a chunk's local labels: uint32 unless the chunk could overflow it."""
    return label_dtype(max_components(tuple(block_shape), connectivity, multilabel))


def row_count_dtype(row_length: int) -> np.dtype:
    """The dtype of a chunk's per-row counts of the labels whose first voxel lies in that row.

    Two such first voxels are never neighbours along the row (every connectivity joins those),
    so a row of ``row_length`` voxels holds at most ``ceil(row_length / 2)``: uint16 for the
    512-voxel rows of 512^3 chunks, a quarter of int64's bytes. Those counts, and a chunk's
    lookup spec built from them, stay on the worker that labeled the chunk from the merge until
    the chunk is written, for every chunk it labeled.
    """
    return count_dtype((int(row_length) + 1) // 2)


def count_dtype(most: int) -> np.dtype:
    """The narrowest unsigned dtype that holds every count from 0 to ``most``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if most <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.uint64)


def check_values(dtype: np.dtype) -> None:
    """Multi-label input is bool or integer (up to 64 bits): each value a class of its own."""
    if np.dtype(dtype).kind not in "biu":
        raise ValueError(
            f"multi-label input must be of an integer or bool dtype, got {np.dtype(dtype)}"
        )


def unsigned_values(block):
    """A multi-label block (numpy or CuPy) as C-contiguous unsigned integers of its own width:
    the kernels compare values only for equality, which a signed value and its unsigned view
    keep, so a signed block costs no copy and each width compiles once."""
    check_values(block.dtype)
    if not block.flags.c_contiguous:
        block = block.copy(order="C")
    if block.dtype.kind == "u":
        return block
    return block.view(f"u{block.dtype.itemsize}")
