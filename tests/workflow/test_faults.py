"""Runs under faults, as users and operators meet them, with real processes: the command in a
process of its own, worker processes stopped and killed, a disk that fills, a corrupt chunk.
Nothing is lost, nothing is marked complete that is not, and a killed run can be resumed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin
from scipy import ndimage

import tilelabel
from tests.conftest import tmpfs, wait_until, write_zarr
from tilelabel.connectivity import structure
from tilelabel.synth import random_volume


def command(*args) -> subprocess.Popen:
    """``tilelabel label ARGS`` in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "tilelabel.cli", "label", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def expected(img, conn=26):
    return ndimage.label(img, structure(img.ndim, conn))[0]


def kept_entries() -> int:
    """On a worker: the chunks kept there between the passes, of any run."""
    from tilelabel.pipeline import kept

    return len(kept._kept)


def worker_pids(client) -> list[int]:
    return list(client.run(os.getpid).values())


@contextlib.contextmanager
def stopped(pids):
    """The worker processes stopped (SIGSTOP) for the block: what they run stays in flight."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def idle(client) -> None:
    """Until no worker runs a task (a killed client's tasks finish on the workers)."""

    def executing(dask_worker):
        return dask_worker.state.executing_count

    wait_until(lambda: not any(client.run(executing).values()), 60, "the workers to be idle")


def soon(predicate, timeout: float = 120) -> None:
    """Until ``predicate`` holds, looked at every 5 ms (a writing pass is short)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def writing_began(out: Path, proc: subprocess.Popen) -> bool:
    """Some chunk of the output is stored (or the command ended)."""
    return proc.poll() is not None or any(p.is_file() for p in (out / "c").rglob("*"))


def marks(out: Path) -> list[Path]:
    """The chunks a run recorded as written in ``out``."""
    return [p for p in (out / ".tilelabel").glob("*/*") if p.name.replace(".", "").isdigit()]


def resumed_exact(args, marked: int, img) -> zarr.Array:
    """``tilelabel label ARGS --resume`` (ARGS: input, output, ...) after a run that wrote
    ``marked`` of 27 chunks: it says so, and its output is complete and exact."""
    resumed = command(*args, "--resume")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert f"resuming: {marked} of 27 chunks written already" in err
    arr = zarr.open_array(str(args[1]))
    np.testing.assert_array_equal(arr[...], expected(img))
    assert arr.attrs["tilelabel"]["complete"] is True
    return arr


def interrupt_while_writing(client, out: Path, proc: subprocess.Popen) -> None:
    """SIGINT to ``proc`` once its writing pass has begun, the workers held still meanwhile
    (the writes they run stay in flight), and let go a second later."""
    pids = worker_pids(client)
    soon(lambda: writing_began(out, proc))
    with stopped(pids):
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)


@pytest.fixture(scope="module")
def client():
    """A cluster of its own, of two worker processes, whose nannies start a new one for each
    killed (the runs here are stopped, interrupted and killed)."""
    kwargs = dict(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    # a killed worker whose new process takes a while to start (a busy machine) is waited for,
    # not given up after the default 15 s
    with (
        dask.config.set({"distributed.deploy.lost-worker-timeout": "300s"}),
        LocalCluster(**kwargs) as lc,
        Client(lc, set_as_default=False) as c,
    ):
        yield c


@pytest.fixture
def sched(client):
    client.wait_for_workers(2, timeout=120)
    return client.scheduler.address


@pytest.fixture
def volume(tmp_path):
    """A 96^3 volume in 16^3 storage chunks (written by 27 tasks of 32^3, or 216 of 16^3)."""
    img = random_volume((96, 96, 96), 0.3, seed=11)
    return img, write_zarr(tmp_path / "in.zarr", img, (16, 16, 16))


def test_two_runs_into_one_output_one_wins_and_the_other_touches_nothing(
    tmp_path, client, sched, volume
):
    """Two --overwrite runs with other connectivities, started together into one output: one
    writes it, complete and exact for its connectivity; the other is refused at once and
    removes nothing. (The workers are held still meanwhile, so that the runs overlap.)"""
    img, src = volume
    out = tmp_path / "out.zarr"
    write_zarr(out, np.zeros((4, 4), np.uint8), (2, 2))  # an older output, to be replaced
    args = [src, out, "--overwrite", "--chunks", "32,32,32", "--scheduler"]
    with stopped(worker_pids(client)):
        a = command(*args, sched, "-c", "26", "-q")
        b = command(*args, sched, "-c", "6", "-q")
        wait_until(lambda: a.poll() is not None or b.poll() is not None, 120, "a refusal")
    results = {conn: (p.wait(120), p.stderr.read()) for conn, p in ((26, a), (6, b))}
    (won,) = [c for c, (code, _) in results.items() if code == 0]
    (lost,) = [c for c, (code, _) in results.items() if code != 0]
    code, err = results[lost]
    assert code == 2 and err.startswith("tilelabel: error: output") and err.count("\n") == 1
    assert "is being written by another run" in err
    arr = zarr.open_array(str(out))
    meta = arr.attrs["tilelabel"]
    assert meta["complete"] is True and meta["connectivity"] == won
    np.testing.assert_array_equal(arr[...], expected(img, won))
    assert sorted(os.listdir(out)) == ["c", "zarr.json"]


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs (where this process may mount one)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    with tmpfs(disk, "size=256k"):
        yield disk


def test_a_disk_that_fills_fails_the_run_with_its_cause_and_leaves_nothing(
    tmp_path, client, sched, volume, small_disk
):
    """Each write stores hundreds of chunk files, more than the disk holds. One worker is held
    still once the writing pass has begun (its write in flight) while the other fills the disk:
    the run fails with the full disk, in one line, and once the held worker goes on nothing of
    the output is left (removed at once, the held worker's write landed in it afterwards)."""
    img, _ = volume
    src = write_zarr(tmp_path / "small.zarr", img, (8, 8, 8))
    out = small_disk / "out.zarr"
    args = ["--scheduler", sched, "--chunks", "24,96,96", "-c", "6", "-q"]
    proc = command(src, out, *args)
    held = worker_pids(client)[:1]
    soon(lambda: writing_began(out, proc))
    with stopped(held):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(3.0)  # a run that waits for the held worker's writes waits on
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert err.startswith("tilelabel: failed: OSError: [Errno 28] No space left on device")
    assert err.count("\n") == 1, err
    idle(client)
    assert os.listdir(small_disk) == []


def test_ctrl_c_in_the_writing_pass_waits_for_the_writes_and_leaves_nothing(
    tmp_path, client, sched, volume
):
    """SIGINT while writes are in flight (the workers held still meanwhile): the command
    cancels the writes, waits for those running and removes the output; it says it was
    interrupted, in one line, and exits 130."""
    _, src = volume
    out = tmp_path / "out.zarr"
    proc = command(src, out, "--scheduler", sched, "--chunks", "32,32,32", "-q")
    interrupt_while_writing(client, out, proc)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "tilelabel: interrupted\n")
    idle(client)
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))


def signalled_while_writing(client, args, out, sig):
    """The command ``args`` (quiet), sent ``sig`` once its writing pass began, while the
    workers are held still for a second so that writes are in flight."""
    proc = command(*args, "-q")
    pids = worker_pids(client)
    soon(lambda: writing_began(out, proc))
    with stopped(pids):
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        time.sleep(1.0)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_in_the_writing_pass_leaves_the_output_to_resume(
    tmp_path, client, sched, volume, sig
):
    """SIGTERM (a batch system's time limit) or SIGHUP while writes are in flight: the command
    cancels the writes and waits for those running, says so in one line and exits 128 + the
    signal's number; the output keeps what was written and no lease, and --resume finishes it
    exact, writing only the chunks not written."""
    img, src = volume
    out = tmp_path / "out.zarr"
    args = [src, out, "--scheduler", sched, "--chunks", "32,32,32"]
    proc = signalled_while_writing(client, args, out, sig)
    _, err = proc.communicate(timeout=120)
    name = signal.Signals(sig).name
    said = f"tilelabel: terminated ({name}); --resume finishes the labels\n"
    assert (proc.returncode, err) == (128 + sig, said)
    idle(client)
    assert not (out / ".tilelabel" / "lease.json").exists()
    assert zarr.open_array(str(out)).attrs["tilelabel"]["complete"] is False
    resumed_exact(args, len(marks(out)), img)


def test_sigterm_before_the_output_is_made_leaves_nothing(tmp_path, client, sched, volume):
    """SIGTERM in the labeling pass (the workers held still): nothing of the output was made,
    so nothing is left, and a --resume labels anew."""
    img, src = volume
    out = tmp_path / "out.zarr"
    args = [src, out, "--scheduler", sched, "--chunks", "32,32,32"]
    pids = worker_pids(client)
    with stopped(pids):
        proc = command(*args, "-q")
        soon(lambda: proc.poll() is not None or (out / ".tilelabel" / "lease.json").exists())
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and err.count("\n") == 1, err
    idle(client)
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))
    resumed = command(*args, "--resume", "-q")
    assert resumed.wait(300) == 0, resumed.stderr.read()
    np.testing.assert_array_equal(zarr.open_array(str(out))[...], expected(img))


def test_ctrl_c_at_a_terminal_prints_one_line_not_the_workers_tracebacks(tmp_path):
    """Ctrl-C at a terminal reaches the whole process group: the command's own local cluster's
    workers leave it to the command, which says it was interrupted in one line."""
    img = random_volume((128, 128, 128), 0.3, seed=5)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 16))
    out = tmp_path / "out.zarr"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tilelabel.cli", "label", src, str(out), "--workers", "2", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's job
    )
    soon(lambda: writing_began(out, proc), timeout=300)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "tilelabel: interrupted\n")
    assert not out.exists()


API_RUN = """
import json, sys
import tilelabel
from distributed import Client

with Client(sys.argv[1]) as client:
    try:
        tilelabel.label_zarr(sys.argv[2], sys.argv[3], client=client, chunks=(32, 32, 32))
        print(json.dumps({"interrupted": False}))
    except KeyboardInterrupt:
        def ours(dask_scheduler):
            return sorted(str(k) for k in dask_scheduler.tasks if "tilelabel" in str(k))

        def writing(dask_worker):  # a cancelled task of another kind may still finish
            return sum("tilelabel-write-" in str(ts.key) for ts in dask_worker.state.executing)

        left = client.run_on_scheduler(ours)
        running = sum(client.run(writing).values())
        print(json.dumps({"interrupted": True, "tasks": left, "writing": running}))
"""


def test_a_write_counts_as_in_flight_from_its_start_on_a_worker(client, sched):
    """A failed run waits for its writes in flight: on a dask worker a write counts from the
    moment the worker executes its task, before it enters ``write_chunk`` (a cancelled write
    may start before the cancel arrives), until it is done."""
    from tilelabel.pipeline.relabel import write_key, writes_in_flight

    tag = "f00d"
    # one write per worker, so that neither waits for the other (a worker killed by an earlier
    # test may still be restarting)
    client.wait_for_workers(2, timeout=60)
    a, b = sorted(client.scheduler_info()["workers"])
    fut = client.submit(time.sleep, 5.0, key=write_key(tag, 0), pure=False, workers=[a])
    other = client.submit(time.sleep, 5.0, key=write_key("beef", 0), pure=False, workers=[b])
    try:
        wait_until(lambda: sum(client.run(writes_in_flight, tag).values()) == 1, 60, "the write")
        wait_until(lambda: sum(client.run(writes_in_flight, "beef").values()) == 1, 60, "beef")
        assert sum(client.run(writes_in_flight, tag).values()) == 1  # each tag its own
        fut.result(), other.result()
    finally:
        client.cancel([fut, other])
    wait_until(lambda: sum(client.run(writes_in_flight, tag).values()) == 0, 60, "its end")
    assert writes_in_flight(tag) == 0  # here, no worker: only write_chunk's own count


def test_ctrl_c_in_the_writing_pass_of_the_python_api(tmp_path, client, sched, volume):
    """The same in a user's program on its own cluster: once KeyboardInterrupt reaches it, no
    task of the run is left on the cluster and no write runs."""
    _, src = volume
    out = tmp_path / "out.zarr"
    proc = subprocess.Popen(
        [sys.executable, "-c", API_RUN, sched, src, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    interrupt_while_writing(client, out, proc)
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(stdout) == {"interrupted": True, "tasks": [], "writing": 0}
    assert not out.exists()


def test_a_corrupt_chunk_is_named_in_one_line_and_tracebacks_wait_for_verbose(tmp_path):
    """A truncated input chunk: exit 2 and one line naming its index and key, without the
    workers' tracebacks (nor distributed's start-up warnings, the dashboard's port taken
    here); -v shows them. The command runs its own local cluster, whose workers share its
    stderr."""
    img = random_volume((32, 32, 32), 0.3, seed=13)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 16))
    key = Path(src) / "c" / "1" / "0" / "1"
    key.write_bytes(key.read_bytes()[:20])
    args = [src, tmp_path / "out.zarr", "--workers", "1", "--chunks", "32,32,32"]
    with contextlib.ExitStack() as taken:
        with contextlib.suppress(OSError):  # (or someone else has it)
            taken.enter_context(socket.create_server(("127.0.0.1", 8787)))
        proc = command(*args, "-q")
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert err.startswith("tilelabel: error: input") and err.count("\n") == 1, err
    assert "stored chunk (1, 0, 1) (key 'c/1/0/1') cannot be read" in err
    proc = command(*args, "-v")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "Traceback" in err and "Compute Failed" in err
    assert not (tmp_path / "out.zarr").exists()


def test_resume_after_a_kill_writes_only_the_chunks_not_written(tmp_path, client, sched, volume):
    """SIGKILL in the writing pass leaves an output marked incomplete, which a plain run
    refuses; --resume labels again and writes only the chunks the killed run had not recorded
    (those it had keep their files), with the same exact output."""
    img, src = volume
    out = tmp_path / "out.zarr"
    args = [src, out, "--scheduler", sched]
    proc = command(*args, "--chunks", "32,32,32", "-q")
    pids = worker_pids(client)
    soon(lambda: proc.poll() is not None or len(marks(out)) >= 3)
    with stopped(pids):  # the writing pass held where it is while the command is killed
        proc.kill()
        proc.wait()
    idle(client)  # the killed run's writes in flight end
    assert zarr.open_array(str(out)).attrs["tilelabel"]["complete"] is False
    again = command(*args, "-q")
    assert again.wait(120) == 2 and "--resume" in again.stderr.read()
    marked = {tuple(int(v) for v in p.name.split(".")) for p in marks(out)}
    assert 3 <= len(marked) < 27
    stored = {p: p.stat().st_mtime_ns for p in (out / "c").rglob("*") if p.is_file()}
    done = {p: t for p, t in stored.items() if tuple(int(v) // 2 for v in p.parts[-3:]) in marked}
    assert done

    arr = resumed_exact(args, len(marked), img)
    assert {p: p.stat().st_mtime_ns for p in done} == done  # not written again
    assert sorted(os.listdir(out)) == ["c", "zarr.json"]
    # what the killed run kept on the workers went when the next run kept and dropped its own
    assert not any(client.run(kept_entries).values())
    # resumed once more: complete already, nothing to do
    assert (
        tilelabel.label_zarr(src, str(out), client=client, resume=True)
        == arr.attrs["tilelabel"]["components"]
    )


class Killer(SchedulerPlugin):
    """On the scheduler: when the ``nth`` task of a kind (its key's name) is done, its worker
    process is killed (SIGKILL); with ``pause``, stopped first (SIGSTOP) and killed that many
    seconds later, so that what the run asks of the workers meanwhile meets a dying one."""

    name = "tilelabel-test-killer"

    def __init__(self, kind: str, nth: int, pids: dict[str, int], pause: float = 0.0):
        self.kind, self.nth, self.pids, self.pause = kind, nth, pids, pause
        self.seen, self.killed = 0, None

    def transition(self, key, start, finish, *args, **kwargs):
        name = key[0] if isinstance(key, tuple) else key
        if self.killed or finish != "memory" or not name.startswith(f"tilelabel-{self.kind}-"):
            return
        self.seen += 1
        if self.seen < self.nth or kwargs.get("worker") not in self.pids:
            return
        self.killed = pid = self.pids[kwargs["worker"]]
        if self.pause:
            os.kill(pid, signal.SIGSTOP)
            asyncio.get_running_loop().call_later(self.pause, os.kill, pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "kind, nth, pause",
    [
        ("summary", 5, 0.0),  # labeling
        ("counts", 27, 1.0),  # the end of the labeling pass: the run asks what was kept
        ("count", 1, 0.0),  # the end of the merge
        ("write", 10, 0.0),  # writing
        ("write", 27, 1.0),  # the end of the writing pass: the run drops what was kept
    ],
)
def test_a_worker_killed_at_any_point_of_the_run_is_survived(tmp_path, client, kind, nth, pause):
    img = random_volume((48, 48, 48), 0.3, seed=14)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 16))
    client.wait_for_workers(2, timeout=120)
    pids = client.run(os.getpid)
    client.register_plugin(Killer(kind, nth, pids, pause))
    try:
        n = tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client, chunks=(16,) * 3)
        killed = client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.plugins[Killer.name].killed
        )
    finally:
        client.unregister_scheduler_plugin(Killer.name)
    assert killed in pids.values()
    arr = zarr.open_array(str(tmp_path / "out.zarr"))
    np.testing.assert_array_equal(arr[...], expected(img))
    assert arr.attrs["tilelabel"]["complete"] is True and arr.attrs["tilelabel"]["components"] == n


def test_a_resume_refuses_an_input_changed_since_and_leaves_the_output_to_resume(
    tmp_path, client, sched, volume
):
    """The input rewritten in place after a SIGTERM (its mirror image: the same shape, the same
    count of components): --resume names a changed chunk and exits 2, leaving the output as
    it was; with the input back as it was, --resume finishes it exact."""
    img, src = volume
    out = tmp_path / "out.zarr"
    args = [src, out, "--scheduler", sched, "--chunks", "32,32,32"]
    proc = signalled_while_writing(client, args, out, signal.SIGTERM)
    assert proc.wait(120) == 143, proc.stderr.read()
    idle(client)
    before = sorted(str(p) for p in out.rglob("*"))
    zarr.open_array(src, mode="r+")[...] = img[::-1]
    refused = command(*args, "--resume")
    _, err = refused.communicate(timeout=300)
    assert refused.returncode == 2, err
    assert "changed since the interrupted run read it (chunk (" in err, err
    assert "--overwrite to label it again" in err
    assert sorted(str(p) for p in out.rglob("*")) == before
    zarr.open_array(src, mode="r+")[...] = img
    resumed_exact(args, len(marks(out)), img)


def test_a_resume_replaces_the_table_its_run_was_told_to(tmp_path, client, sched, volume):
    """A run with --overwrite --stats T stopped by SIGTERM, T holding an earlier run's table:
    --resume --stats T finishes the labels and replaces T with their table."""
    import pandas as pd

    img, src = volume
    out, table = tmp_path / "out.zarr", tmp_path / "t.parquet"
    args = [src, out, "--scheduler", sched, "--chunks", "32,32,32", "--stats", table]
    assert command(*args, "-q").wait(300) == 0
    proc = command(*args, "-c", "6", "--overwrite", "-q")
    pids = worker_pids(client)
    soon(lambda: proc.poll() is not None or marks(out))  # (the old labels are stored)
    with stopped(pids):
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
    assert proc.wait(120) == 143, proc.stderr.read()
    idle(client)
    resumed = command(*args, "-c", "6", "--resume", "-q")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    ref, n = ndimage.label(img)
    np.testing.assert_array_equal(zarr.open_array(str(out))[...], ref)
    assert len(pd.read_parquet(table)) == n
