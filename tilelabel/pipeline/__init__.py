"""The algorithm on dask: the steps of a labeling, as tasks, and a zarr run's phases.

1. plan the processing chunks (:mod:`.plan`);
2. label each chunk on its own and summarize it (:mod:`.local`);
3. find the equivalent labels across chunk borders (:mod:`.borders`);
4. resolve them into components in a merge tree (:mod:`.tree`);
5. number the components in raster order of their first voxels (:mod:`.numbering`);
6. relabel and write each chunk (:mod:`.relabel`).

Statistics and the size filter ride along (:mod:`.stats`). The task graph of steps 2 to 5 is
built stage by stage in :mod:`.graph`; :mod:`.run` runs a zarr volume through it on a cluster,
phase by phase, and :mod:`.lazy` labels dask arrays. The pipeline asks a
:class:`tilelabel.kernels.Backend` for the work on a device and the backend's
:mod:`tilelabel.resources` for what workers may hold; it knows nothing of CUDA.
"""
