"""``tilelabel.pipeline.run.label_zarr``, the path that scripts call for a zarr run:
the run is :mod:`tilelabel.workflow.run`. (An entry point: the one import from
:mod:`tilelabel.pipeline` up into :mod:`tilelabel.workflow`.)"""

from tilelabel.workflow.run import label_zarr

__all__ = ["label_zarr"]
