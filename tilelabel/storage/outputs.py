"""Where a run writes: its output, from the first check to the last write.

1. **open** (:func:`open_output`, before any cluster starts): a place that is, holds or lies
   inside an input is refused, and so is one ``overwrite`` may not replace (a file, or a
   directory of other things, need ``force``); what is there sets the run's
   :attr:`Output.mode`: ``new``, ``replace``, ``resume`` (an interrupted run's unfinished labels,
   with ``resume``) or ``done`` (complete already, with ``resume``; the run makes it ``table``
   where the labels' statistics table is missing: it writes the table and leaves the labels);
2. **take** (:meth:`Output.take`, the last check before any work): the run's lease on the place
   (:mod:`.lease`), so that a place another run writes, or one that cannot be written, is
   refused here rather than after the labeling;
3. **create** (:meth:`Output.create`, once the component count is known): what was there goes
   and the labels' arrays are made, their attributes naming the run (a resumed run opens its
   arrays again); every write checks that name (:class:`.arrays.ZarrTarget`), so that a run
   whose output was taken over stops writing into it;
4. **complete** (:meth:`Output.complete`): the lease and the name checked once more, the output
   marked complete and made visible, the lease released;
5. **discard**, where a run fails: :meth:`Output.stop_writes` lets no further write open the
   labels (the caller then waits for the writes in flight), :meth:`Output.discard` removes what
   the run made and releases the lease; never what another run's lease holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import zarr

from tilelabel.storage import arrays, lease, ome, places
from tilelabel.storage.errors import OutputBusy, OutputTaken
from tilelabel.storage.volumes import Volume

log = logging.getLogger("tilelabel")

#: what a resumed run must share with the run it finishes (the attributes that record them)
RESUME_KEYS = (
    "source",
    "selection",
    "connectivity",
    "multilabel",
    "delta",
    "wrap_axes",
    "min_size",
    "max_size",
    "largest_k",
    "order",
    "dust",
)
#: a recorded value that means what an absent one does (the default)
_DEFAULTS = {"order": "raster"}


@dataclass(frozen=True)
class Created:
    """A created output: its level-0 array, where tasks write it, and the fixed leading
    indices of the labeled plane in it (an OME label image's t/c axes)."""

    array: zarr.Array
    url: str
    index: tuple[int, ...]


class Layout(Protocol):
    """What an output's arrays are: a plain array, or a label image in an OME-Zarr image."""

    #: the place that is leased, replaced and removed
    root: str
    #: the level-0 array, whose attributes record the run
    array_url: str

    def create(self, dtype: np.dtype, attributes: dict[str, Any]) -> Created: ...

    def open(self) -> Created: ...

    def levels(self, run: str) -> list[list[Callable[[], None]]]:
        """After the labels are written: the tasks of anything made from them, in turns (an
        image's lower levels, one turn per level)."""

    def publish(self) -> None:
        """After the output is complete: what makes it visible to readers."""


@dataclass(frozen=True)
class ArrayLayout:
    """A new zarr array laid out like the input."""

    url: str
    like: Volume
    storage_options: dict | None = None

    @property
    def root(self) -> str:
        return arrays.normalize_url(self.url)

    @property
    def array_url(self) -> str:
        return self.root

    def create(self, dtype: np.dtype, attributes: dict[str, Any]) -> Created:
        like, lead = self.like.array, len(self.like.lead)
        array = arrays.create_output(
            self.url, like, dtype, attributes, False, self.storage_options, lead=lead
        )
        return Created(array, self.root, ())

    def open(self) -> Created:
        array = zarr.open_array(self.root, mode="r+", storage_options=self.storage_options)
        return Created(array, self.root, ())

    def levels(self, run: str) -> list[list[Callable[[], None]]]:
        return []

    def publish(self) -> None:
        pass


@dataclass(frozen=True)
class LabelImageLayout:
    """A label image ``labels/<name>`` inside the input's OME-Zarr image (:mod:`.ome`)."""

    image: ome.OmeImage
    name: str
    storage_options: dict | None = None

    @property
    def root(self) -> str:
        return self.image.labels_url(self.name)

    @property
    def array_url(self) -> str:
        return f"{self.root}/{self.image.datasets[0]['path']}"

    def create(self, dtype: np.dtype, attributes: dict[str, Any]) -> Created:
        array, url, index = ome.create_labels(
            self.image, self.name, dtype, attributes, self.storage_options
        )
        return Created(array, url, index)

    def open(self) -> Created:
        array = zarr.open_array(self.array_url, mode="r+", storage_options=self.storage_options)
        return Created(array, self.array_url, (0,) * len(self.image.index))

    def levels(self, run: str) -> list[list[Callable[[], None]]]:
        return ome.level_tasks(self.image, self.name, self.storage_options, run=run)

    def publish(self) -> None:
        ome.publish_labels(self.image, self.name, self.storage_options)


@dataclass
class Output:
    """Where a run writes, and how far it has got there (see the module's steps)."""

    layout: Layout
    #: ``new``, ``replace``, ``resume``, ``done`` or ``table`` (see :func:`open_output`)
    mode: str
    #: the tilelabel attributes of the labels found there (``resume``, ``done``)
    record: dict | None = None
    storage_options: dict | None = None
    #: a file in the way, removed (``force``) when the lease is taken
    clear_file: bool = False
    lease: lease.Lease | None = None
    created: Created | None = None

    @property
    def url(self) -> str:
        return self.layout.root

    @property
    def run_id(self) -> str | None:
        return None if self.lease is None else self.lease.run

    def take(self) -> None:
        """Step 2: the lease (a resumed run takes it under the interrupted run's id)."""
        run = self.record.get("run") if self.mode in ("resume", "table") else None
        try:
            if self.clear_file:
                places.remove(self.url, self.storage_options)
            self.lease = lease.Lease.take(self.url, self.storage_options, run=run)
        except OutputBusy:
            raise
        except OSError as e:
            raise ValueError(
                f"output {self.url} cannot be written ({type(e).__name__}: {e})"
            ) from e

    def create(self, dtype: np.dtype, attributes: dict[str, Any]) -> Created:
        """Step 3: the labels' arrays, whatever was there gone (a resumed run's opened)."""
        self.lease.check()
        attributes["tilelabel"]["run"] = self.lease.run
        if self.mode == "resume":
            created = self.layout.open()
            self._check_name(created.array)
            was, now = self.record.get("components"), attributes["tilelabel"]["components"]
            if was != now:
                raise ValueError(
                    f"the input has {now} components where the killed run found {was}: it "
                    f"changed since; pass overwrite=True (--overwrite) to replace {self.url}"
                )
            if created.array.dtype != np.dtype(dtype):
                raise ValueError(
                    f"output {self.url} holds {created.array.dtype} labels, not {np.dtype(dtype)}; "
                    f"resume it with --dtype {created.array.dtype}"
                )
        else:
            places.remove(self.url, self.storage_options, keep=places.RECORD)
            self.lease.forget_others()
            created = self.layout.create(dtype, attributes)
        self.created = created
        return created

    def open_complete(self, count: int, checksum: str | None) -> Created:
        """Step 3 of a run that only writes the table of complete labels (``table``): they
        are opened as they are, once they prove to be of this input (``checksum``:
        :func:`tilelabel.workflow.state.input_checksum`) with ``count`` components."""
        self.lease.check()
        made = self.record.get("input_checksum")
        if made is None or made != checksum or self.record.get("components") != count:
            what = "another input" if made is not None else "an input it holds no checksum of"
            raise ValueError(
                f"output {self.url} holds labels made from {what}; pass overwrite=True "
                "(--overwrite) to label again with the statistics table"
            )
        self.created = self.layout.open()
        self._check_name(self.created.array)
        return self.created

    def resumed_dtype(self) -> str | None:
        """The dtype of the labels a resumed run finishes (None: not resuming)."""
        if self.mode not in ("resume", "done", "table"):
            return None
        array = zarr.open_array(
            self.layout.array_url, mode="r", storage_options=self.storage_options
        )
        return str(array.dtype)

    def marks(self) -> lease.Marks:
        return self.lease.marks()

    def _check_name(self, array: zarr.Array) -> None:
        named = (array.attrs.get("tilelabel") or {}).get("run")
        if named != self.lease.run:
            raise OutputTaken(
                f"output {self.url} was replaced by another run (run {named}) while this run "
                "was working; it is left to that run"
            )

    def levels(self) -> list[list[Callable[[], None]]]:
        """The tasks that make the rest of the output from its labels, in turns: each turn's
        tasks once the last turn's are done (:meth:`Layout.levels`)."""
        return self.layout.levels(self.lease.run)

    def complete(self, attributes: dict[str, Any]) -> None:
        """Step 4: marked complete (``attributes``), made visible, the lease released."""
        self.lease.check()
        array = zarr.open_array(
            self.layout.array_url, mode="r+", storage_options=self.storage_options
        )
        self._check_name(array)
        attributes["tilelabel"]["run"] = self.lease.run
        array.attrs.update(attributes)
        self.layout.publish()
        self.lease.release()

    def stop_writes(self) -> None:
        """Step 5a: no write opens the labels from now on (their metadata goes first)."""
        if self.created is not None and self.lease.held():
            fs, path = places.filesystem(self.layout.array_url, self.storage_options)
            for key in places.ZARR_KEYS:
                if fs.exists(f"{path}/{key}"):
                    fs.rm(f"{path}/{key}")

    def discard(self) -> None:
        """Step 5b: what the run made goes (never another run's), the lease is released. A
        resume refused before it opened the labels leaves them as it found them."""
        if self.lease is None:
            return
        if self.mode == "resume" and self.created is None:
            self.lease.leave()
            return
        if self.mode == "table":  # complete labels: only the lease goes
            self.lease.release()
            return
        made = self.created is not None and self.lease.held()
        if made:
            places.remove(self.url, self.storage_options, keep=places.RECORD)
        self.lease.release(place=made)  # nothing of what was there is left: the place goes

    def leave(self) -> None:
        """Step 5b of a run stopped from outside (SIGTERM): where there are labels to resume
        (made by this run or the one it resumes), they stay with the record of their chunks
        and the lease is given up; where there are none, as :meth:`discard`."""
        if self.lease is None:
            return
        if self.created is None and self.mode != "resume" or self.mode == "table":
            self.discard()
        else:
            self.lease.leave()


def _refuse_nesting(url: str, inputs: dict[str, str], name: str = "output") -> None:
    """Refuse an output (``name``: which) that is, holds or lies inside one of ``inputs``
    (what -> URL)."""
    labels = name == "output"
    for what, other in inputs.items():
        how = places.nesting(url, other)
        if how == "is":
            where = "the labels to another array" if labels else "it elsewhere"
            raise ValueError(f"{name} {url} is the {what}; write {where}")
        if how == "holds":
            raise ValueError(
                f"{name} {url} holds the {what} {other}; replacing it would delete the {what}"
            )
        if how == "inside":
            hint = " (--ome-labels NAME writes into an OME-Zarr image)"
            hint = hint if what == "input" and labels else ""
            where = "the labels outside it" if labels else "it elsewhere"
            raise ValueError(f"{name} {url} lies inside the {what} {other}; write {where}{hint}")


def check_table(
    url: str,
    inputs: dict[str, str],
    overwrite: bool,
    storage_options: dict | None = None,
    resuming: bool = False,
    name: str = "statistics table",
) -> None:
    """Refuse, before any work, a table path (``name``: which table) that is, holds or lies
    inside one of ``inputs`` (the input, the intensity image, the labels output), that is a
    directory, that exists without ``overwrite`` (``resuming``: the file is not the table of
    the labels resumed, nor one their run may replace), or where a file cannot be written."""
    _refuse_nesting(url, inputs, name)
    fs, path = places.filesystem(url, storage_options)
    if fs.isdir(path):
        raise ValueError(f"{name} {url} is a directory; name a file")
    if fs.exists(path) and not overwrite:
        if resuming:
            raise ValueError(
                f"{name} {url} already exists and is not the table of these labels; remove "
                "it, or label again with overwrite=True (--overwrite)"
            )
        raise ValueError(f"{name} {url} already exists; pass overwrite=True (--overwrite)")
    probe = partial_path(path)
    try:
        fs.pipe_file(probe, b"")
        fs.rm(probe)
    except OSError as e:
        raise ValueError(f"{name} {url} cannot be written ({type(e).__name__}: {e})") from e


def partial_path(path: str) -> str:
    """Where a table is written before it is moved to ``path`` (whole or not at all)."""
    return f"{path}.tilelabel-partial"


def _record(layout: Layout, storage_options: dict | None) -> dict | None:
    """The tilelabel attributes of the level-0 array at the place, if it has them."""
    try:
        array = zarr.open_array(layout.array_url, mode="r", storage_options=storage_options)
    except Exception:
        return None
    record = array.attrs.get("tilelabel")
    return dict(record) if isinstance(record, dict) else None


def open_output(
    volume: Volume,
    url: str | None,
    ome_labels: str | None,
    storage_options: dict | None = None,
    *,
    overwrite: bool = False,
    force: bool = False,
    resume: bool = False,
    inputs: dict[str, str] | None = None,
) -> Output:
    """Step 1: where the labels of ``volume`` go, checked before any work: ``url``, or for an
    OME-Zarr image without ``url`` its ``labels/<ome_labels>``. ``inputs`` (what -> URL): the
    arrays the run reads, which the output may neither be, hold nor lie inside."""
    if resume and (overwrite or force):
        raise ValueError("give either resume (--resume) or overwrite (--overwrite, --force)")
    overwrite = overwrite or force
    name = ome.output_name(volume.image, url, ome_labels)  # None: a plain zarr array
    layout: Layout
    if name is not None:
        ome.check_label_name(name)
        layout = LabelImageLayout(volume.image, name, storage_options)
        what = f"labels {name!r} in {volume.image.url}/labels"
    else:
        _refuse_nesting(url, inputs or {"input": volume.image.url if volume.image else volume.url})
        layout = ArrayLayout(url, volume, storage_options)
        what = f"output {url}"
    holder = lease.peek(layout.root, storage_options)
    if holder is not None:
        raise OutputBusy(lease.busy(layout.root, holder))
    found = places.found(layout.root, storage_options)
    output = Output(layout, "new", storage_options=storage_options)
    if found in ("nothing", "record"):  # ("record": a killed run's, that never wrote labels)
        return output
    if found in ("file", "other"):
        kind = "a file" if found == "file" else "a directory that holds no zarr array or group"
        if not force:
            raise ValueError(f"{what} is {kind}; pass force=True (--force) to replace it")
        output.mode, output.clear_file = "replace", found == "file"
        return output
    record = _record(layout, storage_options)
    if resume:
        if record is None or "run" not in record:
            raise ValueError(
                f"{what} holds no labels of an interrupted tilelabel run to resume; pass "
                "overwrite=True (--overwrite) to replace it"
            )
        output.mode = "done" if record.get("complete") else "resume"
        output.record = record
        return output
    if not overwrite:
        if record is not None and record.get("complete") is False:
            raise ValueError(
                f"{what} holds the unfinished labels of an interrupted run; pass resume=True "
                "(--resume) to finish them or overwrite=True (--overwrite) to replace them"
            )
        raise ValueError(f"{what} already exists; pass overwrite=True (--overwrite) to replace it")
    output.mode = "replace"
    return output


def check_resume(output: Output, expected: dict[str, Any]) -> None:
    """Refuse to resume (or call done) an output made with other parameters than ``expected``
    (the attributes this run would record, :data:`RESUME_KEYS`)."""
    record = output.record or {}
    for key in RESUME_KEYS:
        made, now = record.get(key), expected.get(key)
        if made == _DEFAULTS.get(key):
            made = None
        if made != now:
            raise ValueError(
                f"output {output.url} was made with {key}={made!r} where this run has "
                f"{key}={now!r}; resume it with the same options, or pass "
                "overwrite=True (--overwrite) to replace it"
            )
