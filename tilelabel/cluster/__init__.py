"""Cluster plumbing: where a run's workers come from. It starts clusters; how large they are
is the run's resources' advice (:mod:`tilelabel.resources`).

:func:`.connect.connect` yields a client (an existing one, a scheduler address, a ``cluster:``
section of :mod:`.kinds`, or a local cluster started for the run, :mod:`.local`);
:mod:`.jobqueue` submits batch jobs (Slurm, PBS, LSF, SGE, HTCondor) and joins one-allocation
runs, and :mod:`.gpu_worker` starts the workers of a GPU job; :mod:`.preload` readies the
workers of a kept cluster as they start, and :mod:`.interrupts` leaves Ctrl-C to the command.
"""
