"""The algorithm as dask tasks: the steps of a labeling, for any chunking and either backend.

1. plan the processing chunks (:mod:`tilelabel.chunking`);
2. label each chunk on its own and summarize it (:mod:`.local`);
3. find the equivalent labels across chunk borders (:mod:`.borders`);
4. resolve them into components in a merge tree (:mod:`.tree`);
5. number the components in raster order of their first voxels (:mod:`.numbering`);
6. relabel and write each chunk (:mod:`.relabel`).

Statistics and the size filter ride along (:mod:`.stats`); what a worker keeps of a chunk
between the labeling and the writing pass is :mod:`.kept`, and the join across wrapped axes of a
whole array in memory :mod:`.wrapped`. The task graph of steps 2 to 5 is built stage by stage in
:mod:`.graph`; :mod:`.lazy` labels dask arrays with it, and :mod:`tilelabel.workflow` runs a zarr
volume through it. The pipeline asks a :class:`tilelabel.kernels.Backend` for the work on a
device; it knows nothing of CUDA, of clusters or of the resources' policy (the budgets it is
given are numbers).
"""
