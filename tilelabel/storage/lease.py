"""One run per output: the run's lease on the output's place, and the chunks it has written.

A run keeps a record beside its labels, in ``<output>/.tilelabel/``:

1. **take** (:meth:`Lease.take`, before any work): ``lease.json`` names the run (a random id),
   its process (host, pid) and when the lease expires; it is created only where it does not
   exist (atomically on local disks and where the store has exclusive writes), and read back.
   A lease that has expired, or whose process on this host is gone, is a killed run's: it is
   taken over. Any other means another run writes there, and this one is refused.
2. **renew**: a thread of the run's process moves the expiry forward while the run lasts, so
   that runs on other hosts can tell a live run from a killed one.
3. **check** (:meth:`Lease.check`): before the output is created and before it is marked
   complete, the lease must still name the run.
4. **mark** (:class:`Marks`): each write records its chunk in ``.tilelabel/<run id>/`` once the
   chunk is stored; a resumed run (the same id) writes only the chunks not recorded there.
   Before the first write the run records there the checksums of the input's chunks as it
   read them, which a resumed run compares with its own.
5. **release** (:meth:`Lease.release`): the record goes when the run ends, complete or failed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field

import numpy as np

from tilelabel.storage import places
from tilelabel.storage.arrays import normalize_url
from tilelabel.storage.errors import OutputBusy, OutputTaken

log = logging.getLogger("tilelabel")

#: seconds a lease holds without renewal: past it, a run on another host counts as killed
LEASE_SECONDS = 60.0
#: seconds between renewals
RENEW_SECONDS = 10.0

LEASE_FILE = "lease.json"
#: beside a run's marks: the checksums of the input's chunks as the run read them
INPUT_FILE = "input.fingerprint"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Holder:
    """What a lease file says: the run and the process that holds the output."""

    run: str
    host: str
    pid: int
    started: float
    expires: float

    def live(self) -> bool:
        """Whether the run may still be writing: not expired, and on this host its process
        still there."""
        if self.expires < time.time():
            return False
        return self.host != socket.gethostname() or _alive(self.pid)

    def same(self, other: Holder | None) -> bool:
        """Whether ``other`` is this taking of the lease (whatever its expiry)."""
        return other is not None and asdict(other) | {"expires": 0} == asdict(self) | {"expires": 0}

    def renewed(self) -> Holder:
        return Holder(**{**asdict(self), "expires": time.time() + LEASE_SECONDS})

    def __str__(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"run {self.run}, process {self.pid} on {self.host}, since {since}"


@dataclass(frozen=True)
class Marks:
    """Picklable: where a run's writes record their chunks (``.tilelabel/<run id>/``)."""

    url: str
    storage_options: dict | None = field(default=None, hash=False, compare=False)

    def mark(self, index: tuple[int, ...]) -> None:
        """Record chunk ``index`` as written (call once its data is stored)."""
        fs, path = places.filesystem(self.url, self.storage_options)
        fs.pipe_file(f"{path}/{'.'.join(map(str, index))}", b"")

    def record_input(self, prints: np.ndarray) -> None:
        """Record the checksums of the input's chunks as this run read them (before any
        write: a resumed run compares its own)."""
        fs, path = places.filesystem(self.url, self.storage_options)
        fs.pipe_file(f"{path}/{INPUT_FILE}", np.asarray(prints, "<u8").tobytes())

    def recorded_input(self) -> np.ndarray | None:
        """The checksums :meth:`record_input` recorded (None: none)."""
        fs, path = places.filesystem(self.url, self.storage_options)
        try:
            return np.frombuffer(fs.cat_file(f"{path}/{INPUT_FILE}"), "<u8")
        except FileNotFoundError:
            return None

    def written(self) -> set[tuple[int, ...]]:
        """The chunks recorded as written."""
        fs, path = places.filesystem(self.url, self.storage_options)
        try:
            names = [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
        except FileNotFoundError:
            return set()
        return {tuple(int(v) for v in n.split(".")) for n in names if n.replace(".", "").isdigit()}


def busy(root: str, other: Holder | None) -> str:
    """The refusal of an output another run writes."""
    return (
        f"output {root} is being written by another run ({other or 'unknown'}); wait for it to "
        "end, or write elsewhere"
    )


def peek(root: str, storage_options: dict | None = None) -> Holder | None:
    """The live run that holds ``root``'s lease, if any."""
    fs, path = places.filesystem(root, storage_options)
    holder = _read(fs, f"{path}/{places.RECORD}/{LEASE_FILE}")
    return holder if holder is not None and holder.live() else None


def _read(fs, path: str) -> Holder | None:
    """The lease at ``path``; None where there is none or it cannot be read (a run killed
    while creating it: read again a moment later to be sure)."""
    for attempt in range(2):
        try:
            return Holder(**json.loads(fs.cat_file(path)))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (ValueError, TypeError):
            if attempt == 0:
                time.sleep(1.0)
    return None


def _create(fs, path: str, data: bytes) -> None:
    """Write ``data`` at ``path`` where nothing is; FileExistsError where something is."""
    try:
        f = fs.open(path, "xb")
    except (ValueError, NotImplementedError):  # no exclusive writes in this store
        if fs.exists(path):
            raise FileExistsError(path) from None
        fs.pipe_file(path, data)
        return
    try:
        with f:
            f.write(data)
    except OSError:  # a full disk: no empty lease left behind for the next run to meet
        with contextlib.suppress(OSError):
            fs.rm(path)
        raise


def _replace(fs, path: str, data: bytes) -> None:
    """Write ``data`` at ``path`` at once: readers see the old bytes or the new, never part."""
    if "file" in fs.protocol or "local" in fs.protocol:
        tmp = f"{path}.{uuid.uuid4().hex}"
        try:
            fs.pipe_file(tmp, data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                fs.rm(tmp)
            raise
    else:  # an object store's put replaces the object whole
        fs.pipe_file(path, data)


class Lease:
    """A run's hold on its output's place (see the module's steps). ``made``: the outermost
    folder the run made to get there (the place itself or one above it), None where the place
    existed already."""

    def __init__(self, root: str, holder: Holder, storage_options: dict | None, made: str | None):
        self.root, self.holder, self.made = root, holder, made
        self.storage_options = storage_options
        self.fs, path = places.filesystem(root, storage_options)
        self.dir = f"{path}/{places.RECORD}"
        self.path = f"{self.dir}/{LEASE_FILE}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def run(self) -> str:
        return self.holder.run

    @classmethod
    def take(cls, root: str, storage_options: dict | None = None, run: str | None = None) -> Lease:
        """Take the lease on ``root`` for run ``run`` (default: a new id) and keep renewing it;
        :class:`OutputBusy` where a live run holds it."""
        fs, path = places.filesystem(root, storage_options)
        made, above = None, path
        while above and not fs.exists(above):
            made, above = above, posixpath.dirname(above.rstrip("/"))
        record = f"{path}/{places.RECORD}"
        new_record = not fs.exists(record)
        fs.makedirs(record, exist_ok=True)
        run = run or uuid.uuid4().hex
        mine = Holder(run, socket.gethostname(), os.getpid(), time.time(), 0.0).renewed()
        lease = cls(root, mine, storage_options, made)
        data = json.dumps(asdict(mine)).encode()
        for _ in range(3):
            try:
                _create(fs, lease.path, data)
                break
            except OSError as e:
                if not isinstance(e, FileExistsError):  # a full disk: the folders made go
                    gone = made if made is not None else record if new_record else None
                    if gone is not None:
                        with contextlib.suppress(OSError):
                            fs.rm(gone, recursive=True)
                    raise
                other = _read(fs, lease.path)
                if other is not None and other.live():
                    raise OutputBusy(busy(root, other)) from None
                log.info("output %s: taking over the lease of a run that ended (%s)", root, other)
                fs.rm(lease.path)
        if not mine.same(current := _read(fs, lease.path)):
            raise OutputBusy(busy(root, current))
        lease._thread = threading.Thread(target=lease._renew, name="tilelabel-lease", daemon=True)
        lease._thread.start()
        return lease

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            try:
                if not self.holder.same(_read(self.fs, self.path)):
                    return  # taken over: check() says so
                self.holder = self.holder.renewed()
                _replace(self.fs, self.path, json.dumps(asdict(self.holder)).encode())
            except Exception as e:  # a store that failed once may answer the next time
                log.debug("lease renewal of %s failed: %s", self.root, e)

    def held(self) -> bool:
        """Whether the lease still names this run (this process's taking of it)."""
        return self.holder.same(_read(self.fs, self.path))

    def check(self) -> None:
        """Raise :class:`.OutputTaken` where another run has taken the output over."""
        if not self.held():
            other = _read(self.fs, self.path)
            raise OutputTaken(
                f"output {self.root} was taken over by another run ({other or 'unknown'}) "
                "while this run was working; it is left to that run"
            )

    def marks(self) -> Marks:
        """Where this run's writes record their chunks (made here)."""
        self.fs.makedirs(f"{self.dir}/{self.run}", exist_ok=True)
        url = f"{normalize_url(self.root)}/{places.RECORD}/{self.run}"
        return Marks(url, self.storage_options)

    def forget_others(self) -> None:
        """Drop what other runs recorded here (the chunks of a run this one replaces)."""
        for entry in self.fs.ls(self.dir, detail=False):
            if posixpath.basename(entry.rstrip("/")) not in (LEASE_FILE, self.run):
                self.fs.rm(entry, recursive=True)

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def leave(self) -> None:
        """Stop renewing and give the output up where the lease is still this run's, keeping
        the record of the chunks written (a resume takes it up)."""
        self._stop_renewing()
        if self.held():
            self.fs.rm(self.path)

    def release(self, place: bool = False) -> None:
        """Stop renewing; where the lease is still this run's, remove the record, and where
        nothing else is left there the place too if the run made it (or ``place``: it removed
        what was there), with the folders above it that the run made."""
        self._stop_renewing()
        if not self.held():
            return
        self.fs.rm(self.dir, recursive=True)
        _, path = places.filesystem(self.root, self.storage_options)
        top = self.made or (path if place else None)
        while top is not None and self._empty(path):
            self.fs.rm(path, recursive=True)
            if path == top:
                break
            path = posixpath.dirname(path.rstrip("/"))

    def _empty(self, path: str) -> bool:
        try:
            return not self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return False
