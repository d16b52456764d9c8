"""The ``tilelabel`` command: ``label`` (zarr to zarr) and ``synth`` (random test volumes)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from tilelabel._version import __version__

EXAMPLES = """\
examples:
  tilelabel synth sample.zarr --shape 256,256,256 --density 0.2 --chunks 64,64,64
  tilelabel label sample.zarr labels.zarr
  tilelabel label in.zarr out.zarr --connectivity 6 --chunks 256,256,256 --workers 4
  tilelabel label box.zarr out.zarr --wrap z,y,x                   # periodic boundaries
  tilelabel label in.zarr out.zarr --backend cuda --dtype uint64 --overwrite
  tilelabel label in.zarr out.zarr --scheduler tcp://10.0.0.5:8786
  tilelabel label image.ome.zarr --channel 1 --ome-labels nuclei   # into image.ome.zarr/labels
  tilelabel label s3://bucket/in.zarr s3://bucket/out.zarr         # fsspec URLs (s3fs, gcsfs)
  tilelabel label in.zarr out.zarr --stats stats.parquet --min-size 100 --intensity img.zarr
  tilelabel label --config configs/local-cpu.yaml --overwrite
  tilelabel label --config configs/slurm-gpu.yaml in.zarr out.zarr   # flags override the file
"""

#: exit status for input the user can fix (bad arguments, bad data, refused output)
EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130


def _density(text: str) -> float:
    v = float(text)
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"density must be within [0, 1], got {text}")
    return v


def build_parser() -> argparse.ArgumentParser:
    from tilelabel.options import add_flags, parsed
    from tilelabel.validate import sizes

    p = argparse.ArgumentParser(
        prog="tilelabel",
        description="Label the connected components of huge zarr volumes on dask clusters.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"tilelabel {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    lab = sub.add_parser(
        "label",
        help="label a zarr array into a new zarr array",
        description="Label INPUT (a zarr array, v2 or v3) into OUTPUT. The labels equal "
        "scipy.ndimage.label on the whole volume: 1..N in raster order of first voxels.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(lab)  # every run option's flags (tilelabel.options)
    lab.add_argument("--config", help="YAML run config; flags given here override it")
    lab.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    lab.add_argument("--verbose", "-v", action="count", default=0, help="log more (-vv: debug)")

    syn = sub.add_parser(
        "synth",
        help="write a random test volume (YACCLAB-style density and granularity)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  tilelabel synth sample.zarr --shape 512,512,512 --density 0.2 "
        "--granularity 4 --chunks 128,128,128 --seed 1\n",
    )
    syn.add_argument("output", help="path of the zarr array to write")
    syn.add_argument("--shape", type=parsed(sizes), required=True, help="Z,Y,X (or Y,X)")
    syn.add_argument("--density", type=_density, default=0.2, help="foreground fraction [0, 1]")
    syn.add_argument("--granularity", type=int, default=1, help="cell size in voxels (>= 1)")
    syn.add_argument("--chunks", type=parsed(sizes), help="storage chunks (default: 64 per axis)")
    syn.add_argument("--seed", type=int, default=0)
    syn.add_argument("--zarr-format", type=int, choices=(2, 3), default=3)
    syn.add_argument("--overwrite", action="store_true")
    return p


def _setup_logging(verbose: int, quiet: bool) -> None:
    """tilelabel's own messages (the dashboard address, phases) at INFO unless --quiet; the
    cluster's (distributed's, and its workers' task tracebacks) only with -v, at WARNING (-vv:
    DEBUG): a run that fails says why in one line of its own."""
    ours = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("tilelabel: %(message)s"))
    log = logging.getLogger("tilelabel")
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(ours)
    import dask

    theirs = "debug" if verbose >= 2 else "warning" if verbose else "critical"
    # distributed configures its loggers from dask's config when first imported (below this),
    # and a local cluster's workers take their level from it (silence_logs)
    dask.config.set({"logging": {"distributed": theirs, "distributed.scheduler": theirs}})
    for name in ("distributed", "dask_cuda"):
        logging.getLogger(name).setLevel(theirs.upper())
    if not verbose:
        # what event loops and the cluster's start say to no one in particular: a pending task
        # destroyed as the process ends, a dashboard port taken (the address is logged)
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"distributed(\.|$)")


def _label(args: argparse.Namespace) -> int:
    from tilelabel import config
    from tilelabel.options import Options, given
    from tilelabel.workflow.run import label_zarr

    opts = config.load(args.config) if args.config else {}
    flags = given(args)
    if "scheduler" in flags:  # --scheduler replaces the config's cluster section
        opts.pop("cluster", None)
    opts.update(flags)
    missing = [k.upper() for k in ("input", "output") if not opts.get(k)]
    if "INPUT" in missing:  # OUTPUT may be left out for an OME-Zarr image (labels into it)
        raise ValueError(f"missing {' and '.join(missing)} (give them as arguments or in --config)")
    options = Options(**opts)
    for what, url in (("output", options.output), ("statistics table", options.table)):
        if str(url or "").startswith("memory://"):
            raise ValueError(
                f"{what} {url} is in this process's memory, which ends with the command: "
                "write it to a path or a store that outlives it"
            )
    if options.cluster is not None:  # an allocation's other tasks serve the run, then exit
        from tilelabel.cluster.jobqueue import serve_unless_client

        serve_unless_client(options.cluster)
    progress = not args.quiet and sys.stderr.isatty()
    log = logging.getLogger("tilelabel")
    log.info("importing: %.2f s from the interpreter's start to the run's", _since_start())
    result = label_zarr(options, progress=progress)
    print(f"tilelabel: {result.summary()}")
    return 0


def _since_start() -> float:
    """Seconds since this process began (its interpreter's start and imports, before a run)."""
    import time

    import psutil

    return time.time() - psutil.Process().create_time()


def _synth(args: argparse.Namespace) -> int:
    from tilelabel.synth import write_random_zarr

    chunks = args.chunks or tuple(min(64, s) for s in args.shape)
    write_random_zarr(
        args.output,
        args.shape,
        chunks,
        args.density,
        args.granularity,
        args.seed,
        overwrite=args.overwrite,
        zarr_format=args.zarr_format,
    )
    print(
        f"tilelabel: wrote {args.output} {args.shape} density {args.density} "
        f"granularity {args.granularity} seed {args.seed}"
    )
    return 0


#: a negative number, or a list that starts with one ("-4,64,64")
_NEGATIVE = re.compile(r"-\d[\d.,eE+-]*")


def _negatives_attached(argv: Sequence[str]) -> list[str]:
    """``--flag -4,64,64`` as ``--flag=-4,64,64``: argparse takes a value that starts with a
    dash for a flag (and says "expected one argument"), where the option's own check says what
    is wrong with it."""
    out: list[str] = []
    for a in map(str, argv):
        if out and _NEGATIVE.fullmatch(a) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={a}"
        else:
            out.append(a)
    return out


#: "keyword=value (--flag)" in a message: the keyword is the Python caller's, the flag ours
_KEYWORD_AND_FLAG = re.compile(r"\b\w+=\w+ \((--[\w-]+)\)")


def _one_line(e: BaseException) -> str:
    """An error's message on one line (a worker's may span several), in the command line's
    words: its flags, not the keywords that the library's messages give beside them."""
    return _KEYWORD_AND_FLAG.sub(r"\1", " ".join(str(e).split()))


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0 done, 2 input to fix (bad arguments or data, a refused output: one line
    ``tilelabel: error: ...``), 1 a run that failed (``tilelabel: failed: ...``, with its
    traceback at -v), 130 interrupted (Ctrl-C), 128 + the signal's number stopped by SIGTERM (143)
    or SIGHUP (129). A failed or interrupted run leaves no output; a stopped one leaves what it
    wrote to ``--resume``."""
    args = build_parser().parse_args(_negatives_attached(sys.argv[1:] if argv is None else argv))
    _setup_logging(getattr(args, "verbose", 0), getattr(args, "quiet", False))
    from tilelabel.dtypes import LabelOverflowError
    from tilelabel.kernels.backends import BackendUnavailable

    log = logging.getLogger("tilelabel")
    try:
        if args.command == "synth":
            return _synth(args)
        with _signals_stop_the_run():
            return _label(args)
    except (ValueError, LabelOverflowError, BackendUnavailable) as e:
        log.debug("refused", exc_info=True)
        print(f"tilelabel: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", None)  # tilelabel.workflow.state.Terminated's
        if signum is None:
            print("tilelabel: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        name = signal.Signals(signum).name
        print(f"tilelabel: terminated ({name}); --resume finishes the labels", file=sys.stderr)
        return 128 + signum
    except Exception as e:  # a failure of the run itself: say what, keep the traceback at -v
        log.debug("run failed", exc_info=True)
        print(f"tilelabel: failed: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return EXIT_FAILURE


#: the signals that stop a run as Ctrl-C does, but leave its output to --resume: a batch
#: system's time limit (Slurm, Kubernetes), ``timeout`` and ``kill`` send SIGTERM; a closed
#: terminal or ssh session, SIGHUP
STOPPING = (signal.SIGTERM, signal.SIGHUP)


#: the packages whose code holds locks that a run's own later calls take again
_LOCKING = ("distributed", "tornado", "asyncio", "zarr", "fsspec", "concurrent", "threading")


def _safe_to_raise(frame: Any) -> bool:
    """Whether an exception raised in ``frame`` (the main thread's, as a signal came) leaves
    no lock of a library held: outside their code, or blocked in a wait (a condition's, which
    takes its lock back as it ends)."""
    if frame is None:
        return True
    code = frame.f_code
    if code.co_name == "wait" and code.co_filename.endswith("threading.py"):
        return True
    parts = code.co_filename.replace("\\", "/").split("/")
    return not any(p in _LOCKING or p == f"{_LOCKING[-1]}.py" for p in parts)


@contextlib.contextmanager
def _signals_stop_the_run() -> Iterator[None]:
    """While a run goes: a :data:`STOPPING` signal raises
    :class:`tilelabel.workflow.state.Terminated` in it (a second one ends the process at once),
    and Ctrl-C KeyboardInterrupt, as it would (where it is not ignored), both only where no
    library's lock is left held (:func:`_safe_to_raise`). Only in the main thread, where Python
    delivers signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from tilelabel.workflow.state import Terminated

    deferred_since: list[float] = []

    def stop(signum: int, frame: Any) -> None:
        # raised inside a library's code, the exception could leave a lock of its held (a
        # dask client's: the run would then hang as it stops); there, it waits for the main
        # thread to wait, delivered again every 20 ms, at most for a second
        if not _safe_to_raise(frame):
            deferred_since[:] = deferred_since or [time.monotonic()]
            if time.monotonic() - deferred_since[0] < 1.0:
                threading.Timer(0.02, os.kill, (os.getpid(), signum)).start()
                return
        deferred_since.clear()
        if signum == signal.SIGINT:  # a second Ctrl-C interrupts the stop at once, as ever
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        for s in STOPPING:
            signal.signal(s, signal.SIG_DFL)
        raise Terminated(signum)

    caught = list(STOPPING)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        caught.append(signal.SIGINT)
    before = {s: signal.signal(s, stop) for s in caught}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


#: what multiprocessing's resource tracker says once this process is gone (see :func:`command`)
_TRACKER_WARNING = "ignore:resource_tracker:UserWarning"


def command() -> NoReturn:
    """The ``tilelabel`` command: :func:`main`, then out at once. A cluster the run started is
    still closing in the background (:func:`tilelabel.cluster.local.close_soon`): the output is
    complete and the summary printed, so the command does not wait for it; its worker
    processes end with this one, and multiprocessing's resource tracker (a child interpreter,
    which takes this one's warning options) removes what they shared, without a warning."""
    sys.warnoptions.append(_TRACKER_WARNING)
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    command()
