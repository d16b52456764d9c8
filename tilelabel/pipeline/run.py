"""The zarr run's former place, kept for scripts that call ``tilelabel.pipeline.run.label_zarr``:
the run is :mod:`tilelabel.workflow.run`. (An entry point: the one import from
:mod:`tilelabel.pipeline` up into :mod:`tilelabel.workflow`.)"""

from tilelabel.workflow.run import label_zarr

__all__ = ["label_zarr"]
