"""The tilelabel command on real zarr stores on disk: results, summary line, every bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import zarr
from scipy import ndimage

from tests.conftest import write_zarr
from tilelabel import dtypes
from tilelabel.cli import main
from tilelabel.connectivity import structure
from tilelabel.synth import random_volume


@pytest.fixture
def sched(cluster):
    return cluster.scheduler_address


def run(*args):
    return main([str(a) for a in args])


def test_synth_then_label(tmp_path, sched, capsys):
    vol, out = tmp_path / "vol.zarr", tmp_path / "labels.zarr"
    assert (
        run(
            "synth",
            vol,
            "--shape",
            "40,36,30",
            "--density",
            "0.3",
            "--granularity",
            "2",
            "--chunks",
            "10,12,10",
            "--seed",
            "7",
        )
        == 0
    )
    img = zarr.open_array(str(vol))[...]
    np.testing.assert_array_equal(img, random_volume((40, 36, 30), 0.3, 2, seed=7))
    assert run("label", vol, out, "--chunks", "20,12,10", "--scheduler", sched, "-q") == 0
    ref, n = ndimage.label(img, structure(3, 26))
    np.testing.assert_array_equal(zarr.open_array(str(out))[...], ref)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"tilelabel: {n:,} components in 43,200 voxels")
    assert "Mvoxel/s" in line


def test_label_options(tmp_path, sched):
    img = random_volume((50, 60), 0.45, 1, seed=2)
    src = write_zarr(tmp_path / "in.zarr", img, (10, 20), zarr_format=2)
    out = tmp_path / "out.zarr"
    assert (
        run(
            "label",
            src,
            out,
            "-c",
            "1",
            "--dtype",
            "uint64",
            "--backend",
            "cpu",
            "--scheduler",
            sched,
            "-q",
        )
        == 0
    )
    arr = zarr.open_array(str(out))
    assert arr.dtype == np.uint64 and arr.metadata.zarr_format == 2
    np.testing.assert_array_equal(arr[...], ndimage.label(img)[0])
    assert (
        run(
            "label",
            src,
            out,
            "--overwrite",
            "--connectivity",
            "8",
            "--keep-labels",
            "64MB",
            "--no-keep-input",
            "--gpu-encode",
            "--scheduler",
            sched,
            "-q",
        )
        == 0
    )
    np.testing.assert_array_equal(
        zarr.open_array(str(out))[...], ndimage.label(img, np.ones((3, 3)))[0]
    )


def test_config_file_and_flag_override(tmp_path, sched):
    img = random_volume((30, 30), 0.5, 1, seed=3)
    src = write_zarr(tmp_path / "in.zarr", img, (10, 10))
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        f"input: {src}\noutput: {tmp_path / 'out.zarr'}\nconnectivity: 4\n"
        f"chunks: [10, 20]\nbackend: cpu\nscheduler: {sched}\n"
    )
    assert run("label", "--config", cfg, "-q") == 0
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "out.zarr"))[...], ndimage.label(img)[0]
    )
    assert run("label", "--config", cfg, "--connectivity", "8", "--overwrite", "-q") == 0
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "out.zarr"))[...], ndimage.label(img, np.ones((3, 3)))[0]
    )


def test_local_cluster_of_worker_processes(tmp_path):
    """Without --scheduler the command starts (and stops) its own LocalCluster."""
    img = random_volume((24, 24, 24), 0.3, 1, seed=5)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    assert (
        run("label", src, tmp_path / "out.zarr", "--workers", "2", "--chunks", "8,8,8", "-q") == 0
    )
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "out.zarr"))[...], ndimage.label(img, np.ones((3, 3, 3)))[0]
    )


def test_console_script_help_and_version():
    exe = [sys.executable, "-m", "tilelabel.cli"]
    out = subprocess.run([*exe, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("tilelabel ")
    out = subprocess.run([*exe, "label", "--help"], capture_output=True, text=True, check=True)
    assert "examples:" in out.stdout and "--connectivity" in out.stdout


def _bad(tmp_path):
    """Each bad input: (name, argv maker, expected message part)."""
    good = write_zarr(tmp_path / "good.zarr", random_volume((8, 8, 8), 0.5, 1, 0), (4, 4, 4))
    notzarr = tmp_path / "plain"
    notzarr.mkdir()
    (notzarr / "file.txt").write_text("hello")
    one_d = write_zarr(tmp_path / "1d.zarr", np.ones(10, np.uint8), (5,))
    four_d = write_zarr(tmp_path / "4d.zarr", np.ones((2, 2, 2, 2), np.uint8), (1, 2, 2, 2))
    strings = zarr.create_array(str(tmp_path / "str.zarr"), shape=(3, 3), dtype=str)
    zero = zarr.create_array(str(tmp_path / "zero.zarr"), shape=(0, 5), chunks=(1, 5), dtype="u1")
    nan = np.zeros((8, 8), np.float32)
    nan[7, 7] = np.nan
    nanp = write_zarr(tmp_path / "nan.zarr", nan, (4, 4))
    exists = tmp_path / "exists.zarr"
    write_zarr(exists, np.zeros((2, 2), np.uint8), (2, 2))
    out = tmp_path / "out.zarr"
    return [
        ("missing input", [tmp_path / "nope.zarr", out], "does not exist"),
        ("not zarr", [notzarr, out], "not a zarr array"),
        ("output exists", [good, exists], "already exists; pass --overwrite to replace it"),
        ("output is input", [good, good], "is the input"),
        ("1D", [one_d, out], "2D and 3D"),
        ("4D", [four_d, out], "2D and 3D"),
        ("strings", [strings.store_path.store.root, out], "not numeric"),
        ("zero-size axis", [zero.store_path.store.root, out], "zero-size axis"),
        ("NaN", [nanp, out, "--chunks", "4,4"], "NaN at voxel (7, 7) (in chunk (1, 1)"),
        ("connectivity", [good, out, "--connectivity", "8"], "not valid for a 3D array"),
        ("cuda", [good, out, "--backend", "cuda"], "no usable GPU"),
        ("memory output", [good, "memory://labels.zarr"], "ends with the command"),
        ("memory table", [good, out, "--stats", "memory://s.parquet"], "ends with the command"),
    ]


def test_bad_inputs_fail_cleanly(tmp_path, sched, capsys):
    from tilelabel.kernels.backends import cuda_available

    for name, argv, message in _bad(tmp_path):
        if name == "cuda" and cuda_available():
            continue
        code = run("label", *argv, "--scheduler", sched, "-q")
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert message in err, (name, err)
        assert err.startswith("tilelabel: error:"), (name, err)
        assert not (tmp_path / "out.zarr").exists(), name


def test_uint32_overflow_refused(tmp_path, sched, capsys, monkeypatch):
    # counts over 2^32 need > 8.6e9 voxels; lowering the limit exercises the same refusal
    img = random_volume((12, 12), 0.5, 1, seed=1)
    src = write_zarr(tmp_path / "in.zarr", img, (6, 6))
    n = ndimage.label(img, np.ones((3, 3)))[1]
    monkeypatch.setattr(dtypes, "UINT32_MAX", n - 1)
    code = run("label", src, tmp_path / "out.zarr", "--dtype", "uint32", "--scheduler", sched, "-q")
    assert code == 2
    assert "do not fit in uint32" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out.zarr")


def test_missing_arguments(capsys):
    assert run("label") == 2
    assert "missing INPUT and OUTPUT" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run("synth", "x.zarr", "--shape", "10,0")
    with pytest.raises(SystemExit):
        run("label", "a.zarr", "b.zarr", "--keep-labels", "lots")
    assert "--keep-labels: expected a number of bytes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run("label", "a.zarr", "b.zarr", "--gpu-encode", "--no-gpu-encode")
    assert "not allowed with argument" in capsys.readouterr().err
    # a negative value is the option's to refuse, not taken for a flag
    for argv, said in [
        (["label", "a.zarr", "b.zarr", "--chunks", "-4,4,4"], "--chunks: expected a list of pos"),
        (["label", "a.zarr", "b.zarr", "--spacing", "-1,1,1"], "--spacing: expected positive"),
        (["label", "a.zarr", "b.zarr", "--spacing", "1,-1e3,1"], "--spacing: expected positive"),
        (["synth", "x.zarr", "--shape", "-8,8"], "--shape: expected a list of positive"),
    ]:
        with pytest.raises(SystemExit):
            run(*argv)
        assert said in capsys.readouterr().err, argv


def _run_on_terminal(argv, timeout=120):
    """The command in a subprocess whose stderr is a pseudo-terminal; returns what it wrote."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    # a terminal of 24 rows and 100 columns (a new pty has no size: tqdm would draw no bar)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tilelabel.cli", *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            proc.kill()
            raise TimeoutError("no output from the command")
        try:
            data = os.read(master, 4096)
        except OSError:  # the terminal closed: the process is done
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read()
    assert proc.wait(timeout) == 0, (out, b"".join(chunks))
    return out, b"".join(chunks).decode(errors="replace")


def test_progress_bar_on_a_terminal_only(tmp_path, sched):
    img = random_volume((24, 24, 24), 0.3, 1, seed=6)
    src = write_zarr(tmp_path / "in.zarr", img, (12, 12, 12))
    args = ["label", src, tmp_path / "a.zarr", "--scheduler", sched, "--chunks", "12,12,12"]
    _, err = _run_on_terminal(args)
    for phase in ("labeling", "merging", "writing"):
        assert f"{phase}: 100%" in err, err
    assert "8/8" in err  # the bars count chunks
    _, err = _run_on_terminal([*args[:2], tmp_path / "b.zarr", *args[3:], "--quiet"])
    assert "%|" not in err and "labeling" not in err, err
    # (stderr not a terminal: no bar; see tests/pipeline/test_cluster.py)
    ref = ndimage.label(img, np.ones((3, 3, 3)))[0]
    for name in ("a.zarr", "b.zarr"):
        np.testing.assert_array_equal(zarr.open_array(str(tmp_path / name))[...], ref)


def test_verbose_logs_more_and_top_level_help(tmp_path, sched, capsys):
    src = write_zarr(tmp_path / "in.zarr", random_volume((16, 16), 0.4, 1, seed=2), (8, 8))
    assert run("label", src, tmp_path / "a.zarr", "--scheduler", sched) == 0
    quiet = capsys.readouterr().err
    assert run("label", src, tmp_path / "b.zarr", "--scheduler", sched, "-v") == 0
    verbose, out = capsys.readouterr()[::-1]
    # the summary once, on stdout, also with -v
    assert out.count("components in 256 voxels") == 1 and "components in" not in verbose
    assert "tilelabel: labeling (16, 16)" in quiet
    out = subprocess.run(
        [sys.executable, "-m", "tilelabel.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "examples:" in out and "--config configs/slurm-gpu.yaml" in out and "--ome-labels" in out


def test_a_stopping_signal_waits_for_the_main_thread_to_leave_a_library():
    """SIGTERM raised inside a library's code could leave its locks held (a dask client's, and
    the stopping run hangs): it is raised once the main thread is in its own code or waiting,
    and never lost."""
    import os
    import signal
    import sys
    import threading
    import time

    import distributed.utils
    import pytest

    from tilelabel.cli import _safe_to_raise, _signals_stop_the_run
    from tilelabel.workflow.state import Terminated

    assert _safe_to_raise(sys._getframe())
    assert not _safe_to_raise(type("F", (), {"f_code": distributed.utils.sync.__code__})())
    assert _safe_to_raise(type("F", (), {"f_code": threading.Event.wait.__code__})())
    started = time.monotonic()
    with pytest.raises(Terminated) as e, _signals_stop_the_run():
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        while time.monotonic() - started < 10:  # mostly inside distributed's code
            distributed.utils.key_split_group("x-1")
    assert e.value.signum == signal.SIGTERM and time.monotonic() - started < 3
    assert not any("distributed" in str(entry.path) for entry in e.traceback)
    started = time.monotonic()
    # (Ctrl-C as Python sets it up: an earlier test's library may have set another handler)
    earlier = signal.signal(signal.SIGINT, signal.default_int_handler)
    with pytest.raises(KeyboardInterrupt) as e, _signals_stop_the_run():  # Ctrl-C alike
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        while time.monotonic() - started < 10:
            distributed.utils.key_split_group("x-1")
    assert not isinstance(e.value, Terminated) and time.monotonic() - started < 3
    assert not any("distributed" in str(entry.path) for entry in e.traceback)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGINT, earlier)
