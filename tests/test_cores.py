import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
@pytest.mark.skipif(os.cpu_count() == 1, reason="needs two cores to tell affinity from the count")
def test_every_default_thread_count_follows_the_cpu_affinity():
    # a process held to one core, as a Slurm job's cpuset or taskset holds it: the codec pool
    # and the local cluster's workers (both sized by usable_cores) count that one core
    first = min(os.sched_getaffinity(0))
    code = (
        "from tilelabel.cores import usable_cores\n"
        "from tilelabel.settings import codec_threads\n"
        "print(usable_cores(), codec_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_TILELABEL")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {first}),
    )
    assert done.stdout.split() == ["1", "1"]
