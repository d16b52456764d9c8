"""A zarr run, phase by phase: zarr in, labels out, in this process or on a dask cluster.

0. open: the input, the output's place and the options checked before any cluster starts,
   where the run's tasks execute decided once, and the output's lease taken (:mod:`.opening`);
1. plan: the processing chunks on the run's executor and what each worker may keep, as its
   backend's :mod:`tilelabel.resources` advise, and the graph of the pipeline's steps
   (:mod:`.planning`, :mod:`tilelabel.pipeline.graph`);
2. label: every chunk labeled; only its summary stays (:mod:`.labeling`);
3. merge, 4. resolve, 5. number: submitted behind the labeling pass; the run waits for the
   component count (:mod:`.merging`);
6. write: the output created once the count is known, every chunk relabeled and written
   (:mod:`.writing`);
7. finish: the output marked complete, the statistics table collected (:mod:`.finishing`,
   :mod:`.tables`).

:mod:`.run` calls them in order; they share the run's state (:mod:`.state`). Its tasks execute
on an :mod:`.executors` executor, placed on the workers by :mod:`.placement`, with a progress bar
per phase (:mod:`.progress`); :mod:`.heap` keeps full garbage collections off a local scheduler
while runs are in flight. The algorithm itself is :mod:`tilelabel.pipeline`'s.
"""
