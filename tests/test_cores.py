"""Default thread counts follow the cores a process may use: its CPU affinity (a Slurm job's
cpuset, taskset) and its cgroup CPU quota (a container's CPU limit)."""

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

#: what a process reports: the cores it may use and the codec pool's threads (both defaults)
CODE = (
    "from tilelabel.cores import usable_cores\n"
    "from tilelabel.settings import codec_threads\n"
    "print(usable_cores(), codec_threads())\n"
)
ENV = {k: v for k, v in os.environ.items() if not k.startswith("DASK_TILELABEL")}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
@pytest.mark.skipif(os.cpu_count() == 1, reason="needs two cores to tell affinity from the count")
def test_every_default_thread_count_follows_the_cpu_affinity():
    # a process held to one core, as a Slurm job's cpuset or taskset holds it: the codec pool
    # and the local cluster's workers (both sized by usable_cores) count that one core
    first = min(os.sched_getaffinity(0))
    done = subprocess.run(
        [sys.executable, "-c", CODE],
        capture_output=True,
        text=True,
        env=ENV,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {first}),
    )
    assert done.stdout.split() == ["1", "1"]


V1 = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller, where it is mounted on its own
V2 = Path("/sys/fs/cgroup")


@contextlib.contextmanager
def one_cpu_cgroup():
    """A new cgroup limited to one CPU's time (a quota of 100 ms per 100 ms) and the shell
    command that runs a program inside it, seeing its own cgroup as a container does; skips
    where this machine does not let the test make one (not root, no writable cpu controller)."""
    name = f"tilelabel-test-{uuid.uuid4().hex[:8]}"
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    if (V1 / "cpu.cfs_quota_us").exists() and os.access(V1, os.W_OK):
        group = V1 / name
        group.mkdir()
        try:
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text("100000")
            # a container sees its own group where the host mounts the controller (both names
            # are in use); in a mount namespace of its own, as a container runtime does
            view = V2 / "cpu,cpuacct"
            enter = (
                f"mkdir -p '{view}' && mount --bind '{group}' '{view}' && "
                f"echo $$ > '{group}/cgroup.procs' && exec"
            )
            yield ["unshare", "-m", "sh", "-c", f'{enter} "$0" "$@"']
        finally:
            with contextlib.suppress(OSError):
                (V2 / "cpu,cpuacct").rmdir()  # the mount point, left by the namespace
            _remove(group)
        return
    controllers = V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        group = V2 / name
        try:
            (V2 / "cgroup.subtree_control").write_text("+cpu")
            group.mkdir()
            (group / "cpu.max").write_text("100000 100000")
        except OSError as e:
            _remove(group)
            pytest.skip(f"this machine does not let the test make a cgroup v2 CPU limit: {e}")
        try:
            yield ["sh", "-c", f'echo $$ > \'{group}/cgroup.procs\' && exec "$0" "$@"']
        finally:
            _remove(group)
        return
    pytest.skip("no writable cgroup cpu controller here")


def _remove(group: Path) -> None:
    with contextlib.suppress(OSError):
        group.rmdir()


@pytest.mark.skipif(sys.platform != "linux", reason="cgroups are Linux's")
@pytest.mark.skipif(os.cpu_count() == 1, reason="needs two cores to tell a quota from the count")
def test_every_default_thread_count_follows_a_cgroup_cpu_quota():
    # a container limited to one CPU's time on a machine of more: its affinity still lists
    # every core, and only the quota says how many threads it can run at once
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores in this process's affinity")
    with one_cpu_cgroup() as inside:
        done = subprocess.run(
            [*inside, sys.executable, "-c", CODE], capture_output=True, text=True, env=ENV
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]
