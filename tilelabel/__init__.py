"""tilelabel: connected-component labeling of huge zarr volumes on dask clusters of GPUs or CPUs.

The public API is imported lazily so that ``import tilelabel.kernels`` pulls in neither dask nor
zarr (the kernels know nothing of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilelabel._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from tilelabel.api import label, label_zarr, regionprops
    from tilelabel.workflow.state import Result

__all__ = ["Result", "__version__", "label", "label_zarr", "regionprops"]


def __getattr__(name: str):
    if name in ("label", "label_zarr", "regionprops"):
        from tilelabel import api

        return getattr(api, name)
    if name == "Result":
        from tilelabel.workflow.state import Result

        return Result
    raise AttributeError(f"module 'tilelabel' has no attribute {name!r}")
