"""A seeded random walk of real runs of ``tilelabel label`` on one output, with the faults of
README "Errors, cleanup and resuming" among them: a worker killed, SIGINT, SIGTERM and SIGKILL
of the command, a second run into the same output, the input rewritten, an option changed on
resume, a disk that fills. A small model says what the output must be after each step (absent,
unfinished or complete, from which version of the input and with which options); each step's
exit status and one-line message are asserted, and after every step the invariants:

1. an output marked complete equals ``scipy.ndimage.label`` (under the run's options) of the
   input as it was when its run started, with its statistics table where one was asked for;
   an unfinished one holds those labels in every chunk it recorded as written;
2. the input and the intensity image hold, byte for byte, what the walk last wrote there;
3. nothing else is left: in the test's folder only what the walk made, in an unfinished output
   only its chunks, its metadata and the record of the run to resume (a lease only where a
   killed command left it), nowhere a ``*.tilelabel-partial`` file.

A failure names the seed and the steps taken. (A seeded ``random.Random`` walk rather than a
hypothesis state machine: each step is seconds of real processes, so a walk of fixed length per
seed keeps the time bounded, where hypothesis would try its simplest example first and shrink.)
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import zarr
from scipy import ndimage

from tests.conftest import tmpfs, wait_until, write_zarr
from tests.workflow import test_faults
from tests.workflow.test_faults import (
    command,
    expected,
    idle,
    marks,
    resumed_exact,
    soon,
    stopped,
    worker_pids,
    writing_began,
)
from tilelabel.synth import random_volume

# the cluster of test_faults: two worker processes of one thread, restarted by their nannies
client = test_faults.client
sched = test_faults.sched

SHAPE, STORAGE, CHUNKS = (96, 96, 96), (16, 16, 16), "32,32,32"
NCHUNKS = 27  # processing chunks of 32^3
#: the options that change the labels, which a resume must repeat
OPTIONS = {"full": (), "faces": ("-c", "6"), "no small": ("--min-size", "5")}
TIMEOUT = 300
SEEDS, STEPS = (1, 2, 3), 20


@dataclass(frozen=True)
class Labels:
    """What the model says the output holds: the labels of input version ``version`` under
    ``options`` (a key of :data:`OPTIONS`), complete or not, and whether the run that made it
    asked for the statistics table (with the intensity image)."""

    complete: bool
    version: int
    options: str
    stats: bool = False
    intensity: bool = False
    #: its run was given --overwrite: a table in the way is its to replace, and its resume's
    replace: bool = False

    def __str__(self) -> str:
        table = " --stats" + (" --intensity" if self.intensity else "") if self.stats else ""
        return f"v{self.version} {self.options}{table}"

    def state(self) -> str:
        return f"{'complete' if self.complete else 'unfinished'} {self}"


def labels_of(img: np.ndarray, options: str) -> np.ndarray:
    """scipy's labels of ``img`` under ``options``."""
    conn = 6 if options == "faces" else 26
    if options != "no small":
        return expected(img, conn)
    first = expected(img, conn)
    kept = (np.bincount(first.ravel()) >= 5)[first] & (first > 0)
    return expected(kept.astype(img.dtype), conn)


def began(out: Path, proc: subprocess.Popen, since: int) -> bool:
    """:func:`writing_began`, for an output that may hold an older run's chunks (replaced, or
    resumed): a chunk stored since ``since`` (ns), or the command ended."""
    if not out.exists():
        return writing_began(out, proc)
    if proc.poll() is not None:
        return True
    for root, _, files in os.walk(out / "c"):  # (folders may go meanwhile: a replaced output)
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                if os.stat(os.path.join(root, name)).st_mtime_ns >= since:
                    return True
    return False


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``path`` but a lease: its size and modification time."""
    found = {}
    for root, _, files in os.walk(path):
        for name in files:
            p = Path(root, name)
            if name != "lease.json":
                found[str(p.relative_to(path))] = (p.stat().st_size, p.stat().st_mtime_ns)
    return found


def contents(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def lease_pid(out: Path) -> int | None:
    try:
        return json.loads((out / ".tilelabel" / "lease.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def one_line(err: str, start: str, *said: str) -> None:
    assert err.startswith(start) and err.count("\n") == 1, err
    for words in said:
        assert words in err, err


class Walk:
    """The walk's state: the real places, the model, and the log of the steps taken."""

    def __init__(self, seed: int, root: Path, client, sched: str, disk: Path | None):
        self.rng = random.Random(seed)
        self.root, self.client, self.sched, self.disk = root, client, sched, disk
        self.src, self.out = root / "in.zarr", root / "out.zarr"
        self.table, self.intensity = root / "stats.parquet", root / "intensity.zarr"
        self.versions = [random_volume(SHAPE, 0.3, seed=seed)]
        write_zarr(self.src, self.versions[0], STORAGE)
        self.values = np.random.default_rng(seed).random(SHAPE, dtype=np.float32)
        write_zarr(self.intensity, self.values, STORAGE)
        self.written = {p: contents(p) for p in (self.src, self.intensity)}
        self.output: Labels | None = None
        self.table_exists = False
        self.dead_lease = False  # a SIGKILLed command's lease may be left
        self.log: list[str] = []
        self.taken: dict[str, int] = {}
        self.expect: dict[tuple[int, str], np.ndarray] = {}

    # ---- the model's helpers

    @property
    def now(self) -> int:
        return len(self.versions) - 1

    def same_input(self, version: int) -> bool:
        return np.array_equal(self.versions[version], self.versions[self.now])

    def want(self, labels: Labels) -> np.ndarray:
        key = (labels.version, labels.options)
        if key not in self.expect:
            self.expect[key] = labels_of(self.versions[labels.version], labels.options)
        return self.expect[key]

    def args(self, labels: Labels, *extra, out: Path | None = None, chunks: bool = True):
        """The command's arguments for a run that makes ``labels``."""
        a = [self.src, out or self.out, "--scheduler", self.sched, *OPTIONS[labels.options]]
        a += ["--chunks", CHUNKS] if chunks else []
        if labels.stats:
            a += ["--stats", self.table]
            a += ["--intensity", self.intensity] if labels.intensity else []
        return [*a, *extra]

    def fresh(self) -> Labels:
        """Labels of a new run with options drawn at random."""
        stats = self.rng.random() < 0.4
        intensity = stats and self.rng.random() < 0.5
        return Labels(False, self.now, self.rng.choice(list(OPTIONS)), stats, intensity)

    @contextlib.contextmanager
    def unchanged(self):
        """A block that must leave every file of the test's folder as it was (but a lease)."""
        before = tree(self.root)
        yield
        assert tree(self.root) == before, "files changed"

    # ---- the steps

    def overwrite(self, labels: Labels) -> tuple[str, ...]:
        """``--overwrite`` where the output, or the table ``labels`` asks for, is in the way."""
        in_the_way = self.output is not None or (labels.stats and self.table_exists)
        return ("--overwrite",) if in_the_way else ()

    def step_run(self) -> None:
        """A run, to be finished (``--overwrite`` where something is in the way)."""
        labels = self.fresh()
        extra = self.overwrite(labels)
        labels = replace(labels, replace=bool(extra))
        self.log.append(f"run {labels} {' '.join(extra)}")
        self.finish(self.args(labels, *extra, "-q"), labels)

    def step_refused(self) -> None:
        """A run without ``--overwrite`` where the output (or the table) is in the way."""
        labels = self.fresh()
        if self.output is None:
            labels = replace(labels, stats=True)  # (where only the table is in the way)
        self.log.append(f"run {labels} without --overwrite")
        with self.unchanged():
            proc = command(*self.args(labels), "-q")
            _, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 2, err
        if self.output is None:
            said = f"statistics table {self.table} already exists; pass --overwrite"
        elif self.output.complete:
            said = f"output {self.out} already exists; pass --overwrite to replace it"
        else:
            said = "holds the unfinished labels of an interrupted run; pass --resume"
        one_line(err, "tilelabel: error: ", said)

    def step_fault(self) -> None:
        """A run hit once its writing pass began: a worker killed, or SIGINT, SIGTERM or
        SIGKILL to the command."""
        fault = self.rng.choice(["worker", "SIGINT", "SIGTERM", "SIGKILL"])
        labels = self.fresh()
        extra = self.overwrite(labels)
        labels = replace(labels, replace=bool(extra))
        self.log.append(f"run {labels}, {fault} once writing")
        self.hit(self.args(labels, *extra, "-q"), labels, fault)

    def step_resume_fault(self) -> None:
        """A --resume of unfinished labels hit once its writing pass began."""
        fault, o = self.rng.choice(["worker", "SIGINT", "SIGTERM", "SIGKILL"]), self.output
        self.log.append(f"resume of {o}, {fault} once writing")
        self.hit(self.args(o, "--resume", "-q"), o, fault)

    def resumable(self) -> bool:
        """Whether the output is unfinished and a --resume must finish it. (Not where a table
        of another run is in the way that its run was not told to replace: a resume asking for
        one is refused, and --resume cannot be given with --overwrite.)"""
        o = self.output
        if o is None or o.complete:
            return False
        return self.same_input(o.version) and not self.table_in_the_way(o)

    def table_in_the_way(self, o: Labels) -> bool:
        """A table there that unfinished labels ``o`` may not replace as they complete."""
        return o.stats and self.table_exists and not o.replace

    def step_resume(self) -> None:
        """--resume with the options of the run that made the output (now and then without
        --chunks, which it takes from the output)."""
        o = self.output
        chunks = self.rng.random() < 0.7
        if o is None:
            labels = self.fresh()
            self.log.append(f"resume of nothing: {labels}")
            if labels.stats and self.table_exists:
                with self.unchanged():
                    proc = command(*self.args(labels, "--resume", "-q"))
                    _, err = proc.communicate(timeout=TIMEOUT)
                assert proc.returncode == 2, err
                one_line(err, "tilelabel: error: statistics table", "already exists")
                return
            self.finish(self.args(labels, "--resume", "-q"), labels)
            return
        self.log.append(f"resume of {o.state()}")
        if o.complete:  # nothing to do (where the table it asks for exists, whatever made it)
            self.nothing_to_do(self.args(o, "--resume", "-q", chunks=chunks))
            return
        args = self.args(o, "--resume", chunks=chunks)
        # a table there is another run's (this one's is written only as it completes): a
        # resume asking for one replaces it only where the run it finishes was told to
        # (--overwrite), and --overwrite cannot go with --resume
        if self.table_in_the_way(o):
            with self.unchanged():
                proc = command(*args, "-q")
                _, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 2, err
            said = "already exists and is not the table of these labels"
            one_line(err, f"tilelabel: error: statistics table {self.table} {said}")
            return
        if not self.same_input(o.version):
            with self.unchanged():
                proc = command(*args, "-q")
                _, err = proc.communicate(timeout=TIMEOUT)
            self.dead_lease = False
            assert proc.returncode == 2, err
            said = "changed since the interrupted run read it"
            one_line(err, f"tilelabel: error: input {self.src} {said}", "--overwrite")
            return
        marked = len(marks(self.out))
        if o.options == "full" and not o.stats and chunks and marked:
            resumed_exact(self.args(o), marked, self.versions[o.version])
        else:
            proc = command(*args)
            _, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, err
            said = f"resuming: {marked} of {NCHUNKS} chunks written already"
            assert (said in err) == (marked > 0), err
        self.output, self.dead_lease = replace(o, complete=True), False
        self.table_exists |= o.stats

    def nothing_to_do(self, args) -> None:
        with self.unchanged():
            proc = command(*args)
            out, err = proc.communicate(timeout=TIMEOUT)
        assert (proc.returncode, err) == (0, ""), err
        assert out.startswith(f"tilelabel: {self.want(self.output).max():,} components"), out

    def step_resume_table(self) -> None:
        """--resume --stats of complete labels made without a table: the table is written
        where they prove to be of the input as it is (where a table is there, whatever made
        it, there is nothing to do)."""
        o = self.output
        asked = replace(o, stats=True, intensity=self.rng.random() < 0.5)
        self.log.append(f"resume of {o.state()} asking for {asked}")
        args = self.args(asked, "--resume", "-q")
        # a table there is another run's (these labels have none): refused, not taken for theirs
        if self.table_exists:
            with self.unchanged():
                proc = command(*args)
                _, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 2, err
            said = "already exists and is not the table of these labels"
            one_line(err, f"tilelabel: error: statistics table {self.table} {said}")
            return
        proc = command(*args)
        _, err = proc.communicate(timeout=TIMEOUT)
        self.dead_lease = False
        if self.same_input(o.version):
            assert (proc.returncode, err) == (0, ""), err
            self.output, self.table_exists = asked, True
        else:
            assert proc.returncode == 2, err
            one_line(err, "tilelabel: error: output", "holds labels made from another input")

    def step_concurrent(self) -> None:
        """A second run into the output while one runs there (the workers held still while it
        is refused): it touches nothing, and the first finishes."""
        labels = self.fresh()
        first = self.args(labels, *self.overwrite(labels), "-q")
        how = self.rng.choice(
            [("--overwrite", "-c", "6"), ("--resume",), (), ("--overwrite", "--stats", self.table)]
        )
        said = " ".join(str(a).replace(str(self.root), ".") for a in how)
        self.log.append(f"run {labels}, another ({said}) meanwhile")
        proc = command(*first)
        pids = worker_pids(self.client)
        wait_until(
            lambda: proc.poll() is not None or lease_pid(self.out) == proc.pid, 120, "a lease"
        )
        with stopped(pids):
            assert proc.poll() is None, proc.communicate()
            before = tree(self.root)
            second = command(self.src, self.out, "--scheduler", self.sched, *how, "-q")
            _, err = second.communicate(timeout=TIMEOUT)
            assert tree(self.root) == before
            assert lease_pid(self.out) == proc.pid
        assert second.returncode == 2, err
        one_line(err, f"tilelabel: error: output {self.out}", "is being written by another run")
        self.dead_lease = False
        self.done(proc, labels)

    def step_change_input(self) -> None:
        """The input rewritten in place: its mirror image, a new random volume, or the one
        before; where that leaves an unfinished output of another input, a --resume follows at
        once (to be refused)."""
        how = self.rng.choice(["mirror", "new", "back"] if self.now else ["mirror", "new"])
        img = self.versions[self.now]
        if how == "mirror":
            img = img[::-1].copy()
        elif how == "new":
            img = random_volume(SHAPE, 0.3, seed=self.rng.randrange(1 << 16))
        else:
            img = self.versions[self.now - 1]
        self.log.append(f"input rewritten: {how}")
        zarr.open_array(str(self.src), mode="r+")[...] = img
        self.versions.append(img)
        self.written[self.src] = contents(self.src)
        o = self.output
        if o is not None and not o.complete and not self.same_input(o.version):
            self.log[-1] += f" -> {o.state()}"
            self.step_resume()

    def step_changed_option(self) -> None:
        """--resume with an option that changes the labels (or the processing chunks) unlike
        the output's: refused, the output left as it was."""
        o = self.output
        other = [k for k in OPTIONS if k != o.options] + ["chunks"]
        change = self.rng.choice(other)
        if change == "chunks":
            args = self.args(replace(o, stats=False), "--chunks", "48,48,48", chunks=False)
            said = "is being written in chunks of (32, 32, 32)"
        else:
            args, said = self.args(replace(o, options=change, stats=False)), "was made with"
        self.log.append(f"resume of {o.state()} with {change}")
        with self.unchanged():
            proc = command(*args, "--resume", "-q")
            _, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 2, err
        one_line(err, f"tilelabel: error: output {self.out}", said)

    def step_full_disk(self) -> None:
        """A run whose output is on a small disk that fills: it fails with the cause in one
        line and leaves nothing there."""
        labels = replace(self.fresh(), stats=False)
        self.log.append(f"run {labels} onto a full disk")
        proc = command(*self.args(labels, "-q", out=self.disk / "out.zarr"))
        _, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 1, err
        one_line(err, "tilelabel: failed: OSError: [Errno 28] No space left on device")
        idle(self.client)
        assert os.listdir(self.disk) == []

    # ---- runs and their outcomes

    def finish(self, args, labels: Labels) -> None:
        proc = command(*args)
        self.done(proc, labels)

    def done(self, proc: subprocess.Popen, labels: Labels, ended=None) -> None:
        """``proc``, a run that makes ``labels``, ends exact and complete (``ended``: its
        output and error, read already)."""
        out, err = ended or proc.communicate(timeout=TIMEOUT)
        assert (proc.returncode, err) == (0, ""), err
        assert out.startswith(f"tilelabel: {self.want(labels).max():,} components"), out
        self.output, self.dead_lease = replace(labels, complete=True), False
        self.table_exists |= labels.stats

    def hit(self, args, labels: Labels, fault: str) -> None:
        """``args``, a run that makes ``labels``, hit by ``fault`` once it writes."""
        since = time.time_ns()
        pids = worker_pids(self.client)
        proc = command(*args)
        soon(lambda: began(self.out, proc, since))
        if fault == "worker":  # the nanny starts another, and the run goes on
            os.kill(killed := self.rng.choice(pids), signal.SIGKILL)
            self.done(proc, labels)
            self.client.wait_for_workers(2, timeout=120)
            assert killed not in worker_pids(self.client)
            return
        with stopped(pids):  # the writes in flight stay so while the command is hit
            if proc.poll() is not None:
                self.log[-1] += " (ended before)"
                self.done(proc, labels)
                return
            proc.send_signal(getattr(signal, fault))
            if fault == "SIGKILL":
                proc.wait()
            else:
                time.sleep(1.0)
        out, err = proc.communicate(timeout=TIMEOUT)
        idle(self.client)
        if fault != "SIGKILL" and proc.returncode == 0:  # its last chunk written: it finished
            self.log[-1] += " (ended as hit)"
            self.done(proc, labels, (out, err))
            return
        unfinished = replace(labels, complete=False)
        if fault == "SIGINT":
            assert (proc.returncode, err) == (130, "tilelabel: interrupted\n")
            self.output, self.dead_lease = None, False
        elif fault == "SIGTERM":
            said = "tilelabel: terminated (SIGTERM); --resume finishes the labels\n"
            assert (proc.returncode, err) == (143, said)
            self.output, self.dead_lease = unfinished, False
        else:
            assert proc.returncode == -signal.SIGKILL
            self.output, self.dead_lease = unfinished, True

    # ---- the invariants

    def check(self) -> None:
        # 2. the inputs as the walk wrote them
        for path, was in self.written.items():
            assert contents(path) == was, f"{path} changed"
        np.testing.assert_array_equal(zarr.open_array(str(self.src))[...], self.versions[-1])
        # 3. nothing left but what the walk made
        made = {"in.zarr", "intensity.zarr"}
        made |= {"out.zarr"} if self.output is not None else set()
        made |= {"stats.parquet"} if self.table_exists else set()
        made |= {"disk"} if self.disk is not None else set()
        assert set(os.listdir(self.root)) == made
        if self.disk is not None:
            assert os.listdir(self.disk) == []
        partial = [f for _, _, fs in os.walk(self.root) for f in fs if "tilelabel-partial" in f]
        assert not partial
        o = self.output
        if o is None:
            return
        # 1. the labels
        arr = zarr.open_array(str(self.out), mode="r")
        record, want = arr.attrs["tilelabel"], self.want(o)
        assert record["complete"] is o.complete
        assert record["connectivity"] == (6 if o.options == "faces" else 26)
        assert record.get("min_size") == (5 if o.options == "no small" else None)
        if o.complete:
            assert sorted(os.listdir(self.out)) == ["c", "zarr.json"]
            assert record["components"] == want.max()
            np.testing.assert_array_equal(arr[...], want)
            if o.stats:
                self.check_table(want, o.intensity)
            return
        assert set(os.listdir(self.out)) <= {"c", "zarr.json", ".tilelabel"}
        kept = set(os.listdir(self.out / ".tilelabel"))
        assert kept - {"lease.json"} == {record["run"]}, kept
        assert self.dead_lease or "lease.json" not in kept
        names = os.listdir(self.out / ".tilelabel" / record["run"])
        assert all(n == "input.fingerprint" or n.replace(".", "").isdigit() for n in names)
        for mark in marks(self.out):  # a chunk recorded as written holds its labels
            idx = tuple(int(v) for v in mark.name.split("."))
            at = tuple(slice(32 * i, 32 * i + 32) for i in idx)
            np.testing.assert_array_equal(arr[at], want[at], err_msg=f"chunk {idx}")

    def check_table(self, want: np.ndarray, intensity: bool) -> None:
        n = int(want.max())
        table = pq.read_table(self.table).to_pydict()
        np.testing.assert_array_equal(table["label"], np.arange(1, n + 1))
        np.testing.assert_array_equal(table["area"], np.bincount(want.ravel())[1:])
        if intensity:
            sums = ndimage.sum_labels(self.values, want, np.arange(1, n + 1))
            np.testing.assert_allclose(table["intensity_sum"], sums, rtol=1e-4)

    # ---- the walk

    def steps(self) -> dict[str, float]:
        """The steps that may be taken now, with their weights."""
        o = self.output
        unfinished = o is not None and not o.complete
        steps = {"run": 2.0, "fault": 4.0, "resume": 4.0 if unfinished else 2.0}
        steps |= {"concurrent": 1.0, "change_input": 3.0 if unfinished else 1.0}
        if o is not None or self.table_exists:
            steps["refused"] = 1.0
        if o is not None:
            steps["changed_option"] = 1.0
        if self.resumable():
            steps["resume_fault"] = 3.0
        if o is not None and o.complete and not o.stats:
            steps["resume_table"] = 1.0
        if self.disk is not None:
            steps["full_disk"] = 0.5
        return {k: w / (1 + self.taken.get(k, 0)) for k, w in steps.items()}  # the least taken

    def walk(self, n: int) -> None:
        for _ in range(n):
            steps = self.steps()
            name = self.rng.choices(list(steps), list(steps.values()))[0]
            self.taken[name] = self.taken.get(name, 0) + 1
            self.client.wait_for_workers(2, timeout=120)
            t = time.monotonic()
            getattr(self, f"step_{name}")()
            t1 = time.monotonic()
            self.check()
            now = "absent" if self.output is None else self.output.state()
            self.log[-1] += f" -> {now} [{t1 - t:.1f}+{time.monotonic() - t1:.1f}s]"


@pytest.fixture
def disk(tmp_path):
    """A 256 KiB tmpfs (None where this process may not mount one: that step is left out)."""
    path = tmp_path / "disk"
    path.mkdir()
    try:
        with tmpfs(path, "size=256k"):
            yield path
    except pytest.skip.Exception:
        path.rmdir()
        yield None


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_walk_of_runs_faults_and_resumes(tmp_path, client, sched, disk, seed):
    walk = Walk(seed, tmp_path, client, sched, disk)
    try:
        walk.walk(STEPS)
    except BaseException as e:
        e.add_note(f"seed {seed}, steps:\n  " + "\n  ".join(walk.log))
        raise
    print(f"seed {seed}: {walk.taken}\n  " + "\n  ".join(walk.log))
