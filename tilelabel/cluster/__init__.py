"""Cluster plumbing: where a run's workers come from.

:func:`.local.connect` yields a client (an existing one, a scheduler address, a ``cluster:``
section of :mod:`.kinds`, or a local cluster started for the run); :mod:`.gpus` starts local GPU
clusters, :mod:`.jobqueue` batch jobs (Slurm, PBS, LSF, SGE, HTCondor) and one-allocation runs,
and :mod:`.gpu_worker` the workers of a GPU job; :mod:`.heap` keeps full garbage collections off
a local scheduler while a run is in flight; :mod:`.preload` readies the workers of a kept
cluster as they start.
"""
