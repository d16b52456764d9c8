"""Where a run may write: outputs that would destroy an input, what --overwrite may replace
(--force for the rest), places that cannot be written or that another run holds, all refused
before any work; the lease and the run's name on its labels."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time

import numpy as np
import pytest
import zarr
from scipy import ndimage

import tilelabel
from tests.conftest import tmpfs, write_zarr
from tilelabel.cli import main
from tilelabel.storage import lease, places
from tilelabel.synth import random_volume

FULL3 = np.ones((3, 3, 3))


@pytest.fixture
def sched(cluster):
    return cluster.scheduler_address


def label(*args):
    return main(["label", *map(str, args), "-q"])


def test_output_that_is_holds_or_lies_inside_the_input_is_refused(tmp_path, sched, capsys):
    """An output that holds the input (its group, its folder) would delete it when replaced;
    one inside it would nest in it: refused whatever the flags, the input left as it was."""
    img = random_volume((16, 16, 16), 0.3, seed=1)
    group = zarr.open_group(str(tmp_path / "grp.zarr"), mode="w")
    group.create_array("raw", data=img, chunks=(8, 8, 8))
    raw = tmp_path / "grp.zarr" / "raw"
    pdir = tmp_path / "pdir"
    pdir.mkdir()
    src = write_zarr(pdir / "in.zarr", img, (8, 8, 8))
    os.symlink(pdir, tmp_path / "link")
    cases = [
        ([raw, tmp_path / "grp.zarr", "--overwrite"], "holds the input"),
        ([raw, tmp_path / "grp.zarr", "--force", "--no-keep-input"], "holds the input"),
        ([src, pdir, "--overwrite"], "holds the input"),
        ([src, tmp_path, "--force"], "holds the input"),
        ([src, pdir / "in.zarr" / "labels", "--overwrite"], "lies inside the input"),
        ([src, tmp_path / "link" / "in.zarr" / ".." / "in.zarr", "--overwrite"], "is the input"),
        ([src, f"file://{tmp_path}/link", "--overwrite"], "holds the input"),
        ([f"file://{src}", f"{tmp_path}/link/in.zarr/c", "--overwrite"], "lies inside the input"),
        ([src, raw, "--intensity", raw, "--stats", tmp_path / "s.pq", "--overwrite"], "is the int"),
    ]
    for argv, message in cases:
        assert label(*argv, "--scheduler", sched) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("tilelabel: error: output") and message in err, (argv, err)
        assert err.count("\n") == 1
    np.testing.assert_array_equal(zarr.open_array(str(raw))[...], img)
    np.testing.assert_array_equal(zarr.open_array(src)[...], img)
    assert sorted(os.listdir(pdir)) == ["in.zarr"]
    assert not (tmp_path / "grp.zarr" / ".tilelabel").exists()


def test_a_statistics_table_is_an_output_too(tmp_path, sched, capsys):
    """--stats PATH is checked before any work as the labels output is: not the input, the
    intensity image or the labels output, nor inside them; not a directory; replaced only
    with --overwrite; writable. It is written whole (under a partial name, then moved) before
    the labels are marked complete, and --resume writes a complete output's missing table."""
    img = random_volume((16, 16, 16), 0.3, seed=1)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    vals = write_zarr(tmp_path / "vals.zarr", img.astype(np.float32), (8, 8, 8))
    out = tmp_path / "out.zarr"
    meta = (tmp_path / "in.zarr" / "zarr.json").read_bytes()
    (tmp_path / "taken.parquet").write_bytes(b"not ours")
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "plain.txt").write_text("a file, not a folder")
    cases = [
        (tmp_path / "in.zarr" / "zarr.json", "lies inside the input"),
        (tmp_path / "in.zarr", "is the input"),
        (tmp_path / "vals.zarr", "is the intensity image"),
        (out / "s.parquet", "lies inside the labels output"),
        (out, "is the labels output"),
        (tmp_path, "holds the input"),
        (tmp_path / "a-dir", "is a directory"),
        (tmp_path / "taken.parquet", "already exists"),
        (tmp_path / "plain.txt" / "s.parquet", "cannot be written"),
    ]
    for path, message in cases:
        argv = [src, out, "--stats", path, "--intensity", vals, "--scheduler", sched]
        assert label(*argv) == 2, path
        err = capsys.readouterr().err
        assert err.startswith("tilelabel: error: statistics table") and message in err, err
        assert err.count("\n") == 1 and not out.exists(), err
    assert (tmp_path / "in.zarr" / "zarr.json").read_bytes() == meta
    np.testing.assert_array_equal(zarr.open_array(src)[...], img)
    assert (tmp_path / "taken.parquet").read_bytes() == b"not ours"
    # replaced with --overwrite, whole, and nothing partial left beside it
    table = tmp_path / "taken.parquet"
    assert label(src, out, "--stats", table, "--overwrite", "--scheduler", sched) == 0
    import pandas as pd

    n = int(ndimage.label(img, FULL3)[1])
    assert len(pd.read_parquet(table)) == n
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["a-dir", "in.zarr", "out.zarr", "plain.txt", "taken.parquet", "vals.zarr"]
    )
    # complete with its table: nothing to do; without it, --resume writes it, labels untouched
    assert label(src, out, "--stats", table, "--resume", "--scheduler", sched) == 0
    whole = pd.read_parquet(table)
    stored = {p: p.stat().st_mtime_ns for p in (out / "c").rglob("*") if p.is_file()}
    table.unlink()
    assert label(src, out, "--stats", table, "--resume", "--scheduler", sched) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(table), whole)
    assert {p: p.stat().st_mtime_ns for p in stored} == stored
    assert sorted(os.listdir(out)) == ["c", "zarr.json"]
    assert zarr.open_array(str(out)).attrs["tilelabel"]["complete"] is True


def test_resume_writes_a_missing_table_only_of_the_input_the_labels_came_from(tmp_path, capsys):
    """Complete labels made without a table get one from --resume --stats; once the input
    has changed since, that is refused (the table would not describe the labels), and the
    labels stay complete and unchanged."""
    import pandas as pd

    img = random_volume((24, 24, 24), 0.3, seed=4)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    out, table = tmp_path / "out.zarr", tmp_path / "t.parquet"
    assert label(src, out, "--chunks", "8,8,8", "--backend", "cpu") == 0
    assert label(src, out, "--stats", table, "--resume", "--backend", "cpu") == 0
    ref, n = ndimage.label(img, FULL3)
    t = pd.read_parquet(table)
    assert len(t) == n
    np.testing.assert_array_equal(t["num_pixels"], np.bincount(ref.ravel())[1:])
    np.testing.assert_array_equal(zarr.open_array(str(out))[...], ref)
    table.unlink()
    zarr.open_array(src, mode="r+")[...] = img[::-1]  # the same count of components
    assert label(src, out, "--stats", table, "--resume", "--backend", "cpu") == 2
    err = capsys.readouterr().err
    assert "holds labels made from another input" in err and err.count("\n") == 1, err
    assert not table.exists() and sorted(os.listdir(out)) == ["c", "zarr.json"]
    arr = zarr.open_array(str(out))
    assert arr.attrs["tilelabel"]["complete"] is True
    np.testing.assert_array_equal(arr[...], ref)


def test_fsspec_urls_are_compared_by_store_prefix(tmp_path):
    from tilelabel.storage.places import nesting

    assert nesting("memory://a/b.zarr/", "memory:///a/b.zarr") == "is"
    assert nesting("memory://a", "memory://a/b.zarr/raw") == "holds"
    assert nesting("s3://bucket/x.zarr/./y/../labels", "s3://bucket/x.zarr") == "inside"
    assert nesting("s3://bucket/x.zarr2", "s3://bucket/x.zarr") is None
    assert nesting("gs://bucket/x.zarr", "s3://bucket/x.zarr") is None
    assert nesting(f"file://{tmp_path}/a", str(tmp_path / "a" / "b")) == "holds"


def test_overwrite_replaces_only_zarr_and_force_the_rest(tmp_path, sched, capsys):
    img = random_volume((16, 16, 16), 0.3, seed=2)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    afile = tmp_path / "file.zarr"
    afile.write_text("not zarr")
    for out, kind in ((notes, "a directory that holds no zarr"), (afile, "a file")):
        assert label(src, out, "--overwrite", "--scheduler", sched) == 2
        err = capsys.readouterr().err
        assert kind in err and "--force" in err, err
    assert (notes / "todo.txt").read_text() == "keep me" and afile.read_text() == "not zarr"
    assert sorted(os.listdir(notes)) == ["todo.txt"]
    ref = ndimage.label(img, FULL3)[0]
    for out in (notes, afile):
        assert label(src, out, "--force", "--scheduler", sched) == 0
        np.testing.assert_array_equal(zarr.open_array(str(out))[...], ref)
        assert sorted(os.listdir(out)) == ["c", "zarr.json"]  # nothing else, no run record
    # an empty folder is no one's data
    (tmp_path / "empty").mkdir()
    assert label(src, tmp_path / "empty", "--scheduler", sched) == 0


@contextlib.contextmanager
def read_only_place(tmp_path):
    """A folder this process cannot write in: a read-only tmpfs where it may mount one (root
    ignores permission bits), else a folder without write permission."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    with tmpfs(folder, "ro,size=64k"):
        yield folder


def test_a_place_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys):
    """Found before the labeling (no cluster is even started: no --scheduler, and the run
    fails at once), not after the merge."""
    src = write_zarr(tmp_path / "in.zarr", random_volume((64, 64, 64), 0.3, seed=3), (16,) * 3)
    with read_only_place(tmp_path) as ro:
        started = time.perf_counter()
        assert label(src, ro / "out.zarr") == 2
        err = capsys.readouterr().err
        assert time.perf_counter() - started < 5
        assert err.startswith("tilelabel: error: output") and "cannot be written" in err, err
        assert "Errno" in err and err.count("\n") == 1
    # below a file
    (tmp_path / "f").write_text("")
    assert label(src, tmp_path / "f" / "out.zarr") == 2
    assert "cannot be written" in capsys.readouterr().err


def test_a_full_disk_leaves_no_empty_lease(tmp_path, capsys):
    """A disk full before the run starts: the lease cannot be written, the run is refused in
    one line, and no empty lease file (nor folder) is left for the next run to meet."""
    src = write_zarr(tmp_path / "in.zarr", random_volume((16, 16, 16), 0.3, seed=3), (8,) * 3)
    disk = tmp_path / "disk"
    disk.mkdir()
    with tmpfs(disk, "size=64k"):
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:
            while True:
                f.write(b"x" * 4096)
                f.flush()
        assert label(src, disk / "out.zarr") == 2
        err = capsys.readouterr().err
        assert "cannot be written" in err and "No space left" in err, err
        assert sorted(os.listdir(disk)) == ["filler"]


def test_a_live_lease_refuses_the_output_and_a_dead_one_is_taken_over(tmp_path, client):
    """The output's lease names the run writing it: another run is refused at once, whatever
    its flags; a lease whose process is gone (this host) or which expired (another host) is a
    killed run's, and taken over."""
    img = random_volume((16, 16, 16), 0.3, seed=4)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    out = str(tmp_path / "out.zarr")
    held = lease.Lease.take(out)  # this process writes there
    try:
        for kwargs in ({}, {"overwrite": True}, {"force": True}, {"resume": True}):
            with pytest.raises(ValueError, match="is being written by another run"):
                tilelabel.label_zarr(src, out, client=client, **kwargs)
        assert os.listdir(out) == [".tilelabel"]
    finally:
        held.release()
    assert not os.path.exists(out)  # the lease made the folder: it goes with it
    record = tmp_path / "out.zarr" / ".tilelabel"
    ref = ndimage.label(img, FULL3)[0]
    dead = _pid_of_a_finished_process()
    for holder in (
        lease.Holder("killed", socket.gethostname(), dead, time.time(), time.time() + 3600),
        lease.Holder("elsewhere", "another-host", 1, time.time() - 7200, time.time() - 60),
    ):
        record.mkdir(parents=True, exist_ok=True)
        (record / "lease.json").write_text(json.dumps(holder.__dict__))
        tilelabel.label_zarr(src, out, client=client, overwrite=True)
        np.testing.assert_array_equal(zarr.open_array(out)[...], ref)
        assert sorted(os.listdir(out)) == ["c", "zarr.json"]


def _pid_of_a_finished_process() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_labels_name_their_run_and_writes_check_it(tmp_path):
    """Every write opens the array and checks that its attributes still name the run: a run
    whose output was replaced by another stops writing there."""
    from tilelabel.storage import OutputTaken, ZarrTarget

    arr = zarr.create_array(str(tmp_path / "a.zarr"), shape=(8, 8), chunks=(4, 4), dtype="u4")
    arr.attrs["tilelabel"] = {"run": "mine"}
    block = (slice(0, 4), slice(0, 4))
    ZarrTarget(str(tmp_path / "a.zarr"), run="mine")(block, np.ones((4, 4), np.uint32))
    arr.attrs["tilelabel"] = {"run": "theirs"}
    with pytest.raises(OutputTaken, match="replaced by another run"):
        ZarrTarget(str(tmp_path / "a.zarr"), run="mine")(block, np.full((4, 4), 2, np.uint32))
    assert zarr.open_array(str(tmp_path / "a.zarr"))[0, 0] == 1


def test_found_tells_what_is_at_a_place(tmp_path, memory_root="memory://tilelabel-found"):
    write_zarr(tmp_path / "a.zarr", np.zeros((2, 2), np.uint8), (2, 2))
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    (tmp_path / "f").write_text("")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("")
    (tmp_path / "r" / ".tilelabel").mkdir(parents=True)
    (tmp_path / "e").mkdir()
    found = {n: places.found(str(tmp_path / n)) for n in ("a.zarr", "g.zarr", "f", "d", "r", "e")}
    assert found == {
        "a.zarr": "zarr",
        "g.zarr": "zarr",
        "f": "file",
        "d": "other",
        "r": "record",
        "e": "nothing",
    }
    assert places.found(str(tmp_path / "none")) == "nothing"
    zarr.create_array(f"{memory_root}/m.zarr", shape=(2,), dtype="u1")
    assert places.found(f"{memory_root}/m.zarr") == "zarr"
    places.remove(memory_root)
    assert places.found(f"{memory_root}/m.zarr") == "nothing"


def test_a_table_of_other_labels_is_never_passed_for_theirs(tmp_path, capsys):
    """A table left by an earlier run beside labels made since without one: --resume --stats
    refuses it (one line) rather than calling the output complete, and writes the table once
    it is gone."""
    import pandas as pd

    img = random_volume((24, 24, 24), 0.3, seed=8)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    out, table = tmp_path / "out.zarr", tmp_path / "t.parquet"
    assert label(src, out, "--stats", table, "--backend", "cpu") == 0
    assert label(src, out, "-c", "6", "--overwrite", "--backend", "cpu") == 0
    for _ in range(2):  # refused, and refused again: nothing changed
        assert label(src, out, "-c", "6", "--stats", table, "--resume", "--backend", "cpu") == 2
        err = capsys.readouterr().err
        assert "already exists and is not the table of these labels; remove it" in err, err
    assert len(pd.read_parquet(table)) == ndimage.label(img, FULL3)[1]
    table.unlink()
    assert label(src, out, "-c", "6", "--stats", table, "--resume", "--backend", "cpu") == 0
    assert len(pd.read_parquet(table)) == ndimage.label(img)[1]
    assert label(src, out, "-c", "6", "--stats", table, "--resume", "--backend", "cpu") == 0
