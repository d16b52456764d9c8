import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
@pytest.mark.skipif(os.cpu_count() == 1, reason="needs two cores to tell affinity from the count")
def test_every_default_thread_count_follows_the_cpu_affinity():
    # a process held to one core, as a Slurm job's cpuset or taskset holds it: the local
    # cluster's workers, the codec pool and the synthetic writer's pool count that one core
    first = min(os.sched_getaffinity(0))
    code = (
        "from tilelabel.cores import usable_cores\n"
        "from tilelabel.pipeline.cluster import default_workers\n"
        "from tilelabel.pipeline.zarr_io import codec_threads\n"
        "print(usable_cores(), default_workers(), codec_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TILELABEL_CODEC_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {first}),
    )
    assert done.stdout.split() == ["1", "1", "1"]
