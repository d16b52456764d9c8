"""Input checks shared by the Python API, the zarr runner and the CLI: one message per mistake."""

from __future__ import annotations

import numpy as np

from tilelabel.connectivity import check_ndim


def check_input(shape: tuple[int, ...], dtype: np.dtype, what: str = "input") -> None:
    """Reject what cannot be labeled before any work starts (NaN is checked per chunk later)."""
    check_ndim(len(shape))
    if any(int(s) == 0 for s in shape):
        raise ValueError(f"{what} has a zero-size axis (shape {tuple(shape)}); nothing to label")
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise ValueError(
            f"{what} has dtype {dtype}, which is not numeric; tilelabel takes bool, integer or "
            "float arrays (nonzero is foreground)"
        )
