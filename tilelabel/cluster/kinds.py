"""The ``cluster:`` section of a run: which kind of cluster runs it, and that kind's keys.

Validated here for every entry point (a run config, ``label_zarr(cluster=...)``); errors name the
sub-key (``cluster.queue``). :func:`tilelabel.cluster.connect` starts or joins the cluster.
"""

from __future__ import annotations

from typing import Any

from tilelabel import validate as v

_text = v.text("a string")

#: the keys every batch kind takes (dask-jobqueue's, and tilelabel's own: gpus, scale,
#: wait_timeout); keys left out come from the site's jobqueue config
_BATCH: dict[str, v.Check] = {
    "queue": _text,
    "walltime": _text,
    "cores": v.positive_int,
    "memory": _text,
    "processes": v.positive_int,
    "gpus": v.index,
    "scale": v.positive_int,
    "wait_timeout": v.positive_number,
    "interface": _text,
    "python": _text,
    "local_directory": _text,
    "log_directory": _text,
    "job_extra_directives": v.strings,
    "job_script_prologue": v.strings,
    "worker_extra_args": v.strings,
}

#: kind -> {key: check}; ``kind`` picks where the run's workers come from
CLUSTER_KINDS: dict[str, dict[str, v.Check]] = {
    # a LocalCluster of single-threaded worker processes
    "local": {"workers": v.positive_int},
    # a dask_cuda.LocalCUDACluster of one worker on each of ``workers`` GPUs of
    # CUDA_VISIBLE_DEVICES (default: all)
    "local-cuda": {"workers": v.positive_int},
    # a running scheduler: ``address`` tcp://host:port, or the path of a scheduler file (.json)
    "scheduler": {"address": _text},
    # batch jobs through dask-jobqueue (tilelabel.cluster.jobqueue)
    "slurm": {**_BATCH, "account": _text},
    "pbs": {**_BATCH, "account": _text, "resource_spec": _text},
    "lsf": {**_BATCH, "project": _text},
    "sge": {**_BATCH, "project": _text, "resource_spec": _text},
    # HTCondor has no queues; its extra directives are submit-description keys and values
    "htcondor": {
        **{k: c for k, c in _BATCH.items() if k != "queue"},
        "disk": _text,
        "job_extra_directives": v.mapping,
    },
    # scheduler, run and workers in the tasks of one Slurm allocation (dask-jobqueue's
    # SLURMRunner): ``srun -n N tilelabel label ...``
    "slurm-runner": {
        "scheduler_file": _text,
        "threads_per_worker": v.positive_int,
        "local_directory": _text,
        "wait_timeout": v.positive_number,
    },
}
#: the kinds whose jobs a batch system runs (tilelabel.cluster.jobqueue)
BATCH_KINDS = ("slurm", "pbs", "lsf", "sge", "htcondor")
REQUIRED_KEYS = {"scheduler": ("address",)}


class ClusterSpecError(ValueError):
    """A bad ``cluster:`` section; the message is complete (it names ``cluster.KEY``)."""


def check_cluster(value: Any) -> dict[str, Any]:
    """A validated ``cluster:`` mapping, keys with underscores."""
    kinds = ", ".join(CLUSTER_KINDS)
    if not isinstance(value, dict):
        raise ClusterSpecError(f"'cluster' must be a mapping with a 'kind' (one of {kinds})")
    kind = value.get("kind")
    if kind not in CLUSTER_KINDS:
        raise ClusterSpecError(f"bad value {kind!r} for 'cluster.kind': expected one of {kinds}")
    allowed = CLUSTER_KINDS[kind]
    out: dict[str, Any] = {"kind": kind}
    for key, sub in value.items():
        name = str(key).replace("-", "_")
        if name == "kind":
            continue
        if name not in allowed:
            raise ClusterSpecError(
                f"unknown key 'cluster.{key}' for kind {kind}; allowed keys: kind, "
                f"{', '.join(sorted(allowed))}"
            )
        try:
            out[name] = allowed[name](sub)
        except ValueError as e:
            raise ClusterSpecError(f"bad value {sub!r} for 'cluster.{key}': expected {e}") from None
    missing = [k for k in REQUIRED_KEYS.get(kind, ()) if k not in out]
    if missing:
        raise ClusterSpecError(f"missing 'cluster.{missing[0]}' (required for kind {kind})")
    return out
