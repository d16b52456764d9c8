"""The options of a run, declared once.

Every option of ``tilelabel label`` and :func:`tilelabel.label_zarr` is a field of
:class:`Options` with its default, its check, its help and, where the command line has it, its
flags. From this one table come the command line's flags (:func:`add_flags`, :func:`given`), a
run config's keys and their validation (:mod:`tilelabel.config`), the docstring of
:func:`tilelabel.label_zarr` (:func:`parameters_doc`; its typed keywords are checked against
this table by the tests), and the checked object a run takes: an :class:`Options` checks every
value as it is made.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelabel import periodic
from tilelabel import validate as v
from tilelabel.cluster.kinds import ClusterSpecError, check_cluster
from tilelabel.resources.encoding import MIN_OUTPUT_TILES


class OptionError(ValueError):
    """A bad option value; the message names the option and what it expects."""


@dataclass(frozen=True)
class Flag:
    """One command-line spelling of an option: argparse's names and keywords (``dest`` is the
    option's name; ``help`` is the option's unless given here)."""

    names: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def flag(*names: str, **kwargs: Any) -> Flag:
    return Flag(names, kwargs)


@dataclass(frozen=True)
class Spec:
    """What an option is besides its default (see :func:`option`)."""

    help: str
    doc: str = ""
    check: v.Check | None = None
    flags: tuple[Flag, ...] = ()
    #: the argparse group its flags are listed under
    group: str | None = None
    #: its flags are mutually exclusive
    exclusive: bool = False


def option(
    default: Any,
    help: str,
    *,
    doc: str = "",
    check: v.Check | None = None,
    flags: Sequence[Flag] = (),
    group: str | None = None,
    exclusive: bool = False,
) -> Any:
    """A field of :class:`Options`: ``help`` is one line (``--help``, config errors), ``doc``
    what the API docstring says beyond it, ``check`` normalises a value or raises a
    ``ValueError`` saying what is expected, ``flags`` its command-line spellings."""
    spec = Spec(help, doc, check, tuple(flags), group, exclusive)
    return field(default=default, metadata={"spec": spec})


def parsed(check: v.Check):
    """argparse type from a check that takes strings: its message on a bad value."""
    import argparse

    def parse(text: str):
        try:
            return check(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected {e}, got {text!r}") from None

    parse.__name__ = getattr(check, "__name__", "value")
    return parse


def _label_dtype(value: Any) -> str:
    import numpy as np

    names = ("auto", "uint32", "uint64")
    try:
        name = value if value == "auto" else str(np.dtype(value))
    except TypeError:
        name = None
    if name not in names:
        raise ValueError(f"one of {', '.join(names)}")
    return name


def _stats(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    return v.text("true, false, or a path or URL for the statistics table (.parquet)")(value)


_OME = "OME-Zarr image input"


@dataclass(frozen=True, kw_only=True)
class Options:
    """The options of one run, each checked as the object is made (:class:`OptionError`).
    How options combine is checked where they are used (e.g. the statistics' in
    :func:`tilelabel.pipeline.stats.options`)."""

    input: str | None = option(
        None,
        "path or URL of the input zarr array (v2 or v3), or of an OME-Zarr image",
        doc="Local paths or fsspec URLs (``s3://``, ``gs://``, ``memory://``, ...). For an "
        "OME-Zarr image, its full-resolution dataset is labeled (see ``channel``, "
        "``timepoint``).",
        check=v.text("a path or URL of a zarr array"),
        flags=[flag("input", nargs="?")],
    )
    output: str | None = option(
        None,
        "path or URL of the output zarr array (optional for an OME-Zarr image input: the labels "
        "then go into its labels/ group)",
        doc="It gets the input's shape, chunks, shards, codecs and zarr format. It is created "
        "once the component count is known, removed again if writing fails, and marked "
        "``complete`` in its attributes only once every chunk is written.",
        check=v.text("a path or URL for the output zarr array"),
        flags=[flag("output", nargs="?")],
    )
    connectivity: int | None = option(
        None,
        "1..ndim (scikit-image style) or 4/8 (2D), 6/18/26 (3D); default: full",
        doc="As in :func:`tilelabel.label` (or pass one of scipy's standard ``structure``s).",
        check=v.positive_int,
        flags=[flag("--connectivity", "-c", type=int)],
    )
    multilabel: bool = option(
        False,
        "each distinct nonzero value is a class of its own: a component is a connected set of "
        "voxels of one value (cc3d's connected_components); integer or bool input",
        doc="The output then equals ``cc3d.connected_components(volume, connectivity=...)``, "
        "and the statistics table gets each component's source ``value``.",
        check=v.boolean,
        flags=[flag("--multilabel", action="store_true", default=None)],
    )
    delta: float | None = option(
        None,
        "continuous values: neighbours join where both are nonzero and their values differ by "
        "at most D (cc3d's delta; --multilabel is D = 0); bool, integer or float input",
        doc="The output then equals ``cc3d.connected_components(volume, connectivity=..., "
        "delta=D)``: integers compared as the unsigned integers of their bits and ``D`` "
        "truncated to an integer, as cc3d; every NaN voxel a component of its own.",
        check=v.non_negative_number,
        flags=[flag("--delta", type=float, metavar="D")],
    )
    wrap_axes: tuple[int | str, ...] | None = option(
        None,
        "periodic boundaries: the axes whose two end faces touch each other, as names or "
        "indices (e.g. z,y,x or 0,2)",
        doc="As in :func:`tilelabel.label` (dask-image's ``wrap_axes``); where several wrap, "
        "the box's edges and corners touch too. The numbering stays by first voxel. "
        + periodic.STATISTICS,
        check=periodic.spelled,
        flags=[flag("--wrap", type=parsed(periodic.spelled), metavar="AXES")],
    )
    chunks: tuple[int, ...] | None = option(
        None,
        "processing chunk Z,Y,X: whole multiples of the storage chunks",
        doc="By default storage chunks are grouped into chunks of about 256^3 voxels (cpu) or "
        "512^3 (cuda): smaller for small volumes, so that every worker thread gets work, and "
        "where the GPUs have no room for those.",
        check=v.sizes,
        flags=[flag("--chunks", type=parsed(v.sizes), metavar="Z,Y,X")],
    )
    backend: str = option(
        "auto",
        "auto (the default: GPUs where usable), cpu or cuda",
        doc="``cuda`` without a usable GPU is refused before a cluster starts.",
        check=v.choice("auto", "cpu", "cuda"),
        flags=[flag("--backend", choices=("auto", "cpu", "cuda"))],
    )
    algorithm: str | None = option(
        None,
        "kernel name (e.g. bke, buf, uf); default: the fastest for the connectivity",
        doc="The names are those of :func:`tilelabel.kernels.algorithms`.",
        check=v.text("a kernel name such as bke, buf or uf"),
        flags=[flag("--algorithm")],
    )
    dtype: str = option(
        "auto",
        "label dtype: auto (uint32 where the count fits, the default), uint32 or uint64",
        doc="A ``uint32`` that cannot hold the count is refused before anything is written.",
        check=_label_dtype,
        flags=[flag("--dtype", choices=("auto", "uint32", "uint64"))],
    )
    overwrite: bool = option(
        False,
        "replace OUTPUT if it is a zarr array or group",
        check=v.boolean,
        flags=[flag("--overwrite", action="store_true", default=None)],
    )
    force: bool = option(
        False,
        "replace OUTPUT whatever is there, also a file or a directory that holds no zarr array "
        "or group (implies --overwrite)",
        doc="A file in the way is removed when the run starts, anything else only once the "
        "labels are written. An output that is, holds or lies inside the input is refused "
        "whatever the flags.",
        check=v.boolean,
        flags=[flag("--force", action="store_true", default=None)],
    )
    resume: bool = option(
        False,
        "finish the labels that a killed run left in OUTPUT, writing only the chunks it had not "
        "written; label anew where OUTPUT does not exist, and do nothing where it is complete",
        doc="The run labels and merges again (the output is unchanged by that) and writes the "
        "chunks that the killed run had not recorded as written. It must be given the same "
        "input and the same connectivity, wrapped axes and size filter; the processing chunks "
        "are the killed run's.",
        check=v.boolean,
        flags=[flag("--resume", action="store_true", default=None)],
    )
    scheduler: str | None = option(
        None,
        "address of a running dask scheduler (tcp://host:port) or its scheduler file (.json)",
        doc="Without it (and without ``client`` or ``cluster``), the active client is used, or a "
        "local cluster is started for the run.",
        check=v.text("a dask scheduler address such as tcp://host:8786"),
        flags=[flag("--scheduler")],
    )
    workers: int | None = option(
        None,
        "workers of the local cluster started for the run (default: one per core; with cuda: "
        "GPUs, default every visible one)",
        check=v.positive_int,
        flags=[flag("--workers", type=int)],
    )
    cluster: dict[str, Any] | None = option(
        None,
        "the cluster that runs it: a mapping with a kind (local, local-cuda, scheduler, slurm, "
        "pbs, lsf, sge, htcondor, slurm-runner) and that kind's keys",
        doc="Used where ``client`` and ``scheduler`` are not given (see "
        ":mod:`tilelabel.cluster.kinds` for the keys).",
        check=check_cluster,
    )
    storage_options: dict[str, Any] | None = option(
        None,
        "fsspec options of the stores (credentials, endpoints)",
        check=v.mapping,
    )
    stats: bool | str | None = option(
        None,
        "per-component statistics (regionprops_table columns), written as Parquet to PATH",
        doc="Computed in the labeling pass and merged across chunk borders (columns: "
        ":func:`tilelabel.regionprops`). ``True`` returns ``(count, DataFrame)`` "
        "(``Result.table`` with ``return_result``); a path or URL writes Parquet there, one "
        "slab of chunks at a time.",
        check=_stats,
        flags=[flag("--stats", metavar="PATH")],
    )
    contacts: str | None = option(
        None,
        "the region graph: every pair of touching output labels with its voxel pairs in "
        "contact and its face area, written as Parquet to PATH",
        doc="cc3d's ``contacts`` of the output labels, computed in the labeling pass and "
        "merged across chunk borders: columns ``label_a < label_b``, with multi-label input "
        "``value_a`` and ``value_b`` (their source values), ``count`` (touching voxel pairs "
        "under ``contacts_connectivity``) and ``area`` (face contacts, a face weighing the "
        "product of the other axes' ``spacing``), in no order.",
        check=v.text("a path or URL for the region graph (.parquet)"),
        flags=[flag("--contacts", metavar="PATH")],
    )
    contacts_connectivity: int | None = option(
        None,
        "which neighbours touch in the region graph: 4/8 (2D), 6/18/26 (3D); default: the "
        "labeling's with --multilabel, else full",
        doc="Components of a binary input touch only through neighbours the labeling does not "
        "join: label with ``connectivity=6`` and take the graph at 18 or 26.",
        check=v.positive_int,
        flags=[flag("--contacts-connectivity", type=int, metavar="C")],
    )
    intensity: str | None = option(
        None,
        "zarr array of the input's shape: intensity sum, mean, min and max in the statistics",
        check=v.text("a path or URL of a zarr array of the input's shape"),
        flags=[flag("--intensity", metavar="ZARR")],
    )
    spacing: tuple[float, ...] | None = option(
        None,
        "physical size of a voxel along each axis, for the statistics' area, centroids, boxes "
        "and moments and the region graph's areas (default: an OME-Zarr input's scale, else 1)",
        doc="As scikit-image's ``regionprops_table(spacing=...)``: ``area``, ``centroid-*``, the "
        "inertia tensor, its eigenvalues and the axis lengths are physical; ``bbox-*`` stays in "
        "voxels and ``bbox_scaled-*`` is the box in physical units.",
        check=v.spacing,
        flags=[flag("--spacing", type=parsed(v.spacing), metavar="Z,Y,X")],
    )
    min_size: int | None = option(
        None,
        "drop components of fewer than N voxels",
        doc="The components kept are numbered 1..count in raster order, as "
        "``scipy.ndimage.label`` numbers the filtered volume.",
        check=v.voxels,
        flags=[flag("--min-size", type=int, metavar="N")],
    )
    max_size: int | None = option(
        None,
        "drop components of more than N voxels",
        check=v.voxels,
        flags=[flag("--max-size", type=int, metavar="N")],
    )
    largest_k: int | None = option(
        None,
        "keep only the K largest components (after --min-size / --max-size)",
        doc="As cc3d's ``largest_k``: of equal sizes, the one whose first voxel comes first in "
        "raster order counts as the larger. The kept components are numbered as ``order`` says.",
        check=v.index,
        flags=[flag("--largest-k", type=int, metavar="K")],
    )
    order: str = option(
        "raster",
        "numbering of the components: raster (scipy's: by first voxel, the default) or size "
        "(largest first; over chunks, with --largest-k)",
        doc="``size`` numbers the largest component 1 (ITK's ``RelabelComponent``); of equal "
        "sizes, the one whose first voxel comes first gets the smaller label.",
        check=v.choice("raster", "size"),
        flags=[flag("--order", choices=("raster", "size"))],
    )
    dust: int | None = option(
        None,
        "remove the components of fewer than N voxels and write the input's own values, as "
        "cc3d's dust (components per value, as with --multilabel)",
        doc="The output has the input's dtype and values, with the voxels of every component of "
        "fewer than N voxels set to 0; with ``invert``, only those are kept. An integer or bool "
        "input; the count is that of the components kept.",
        check=v.voxels,
        flags=[flag("--dust", type=int, metavar="N")],
    )
    invert: bool = option(
        False,
        "with --dust: keep only the components of fewer than N voxels",
        check=v.boolean,
        flags=[flag("--invert", action="store_true", default=None)],
    )
    keep_labels: int | None = option(
        None,
        "memory per worker (GPU memory with cuda) for chunk labels kept from the labeling pass, "
        "so that the writing pass neither reads nor labels those chunks again (e.g. 8GB; "
        "default: one chunk's labels where the run has no more chunks than worker threads, "
        "else none; 0: none)",
        doc="Where it is not given, a GPU run also keeps none where the labels would not fit "
        "beside the chunks in GPU memory (:mod:`tilelabel.resources`).",
        check=v.byte_count,
        flags=[flag("--keep-labels", type=parsed(v.byte_count), metavar="SIZE")],
    )
    keep_input: bool = option(
        True,
        "keep each chunk's foreground, one bit per voxel, on the worker that labeled it, so "
        "that the writing pass labels the bits again instead of reading the input again",
        doc="A worker keeps at most as many bytes as one chunk's uint32 labels (the bits of 32 "
        "chunks), so memory stays bounded by the chunk size; chunks past that are read again.",
        check=v.boolean,
        flags=[
            flag(
                "--no-keep-input",
                action="store_const",
                const=False,
                help="read and decode every chunk again in the writing pass, instead of keeping "
                "its foreground (one bit per voxel, at most one chunk's labels of memory per "
                "worker)",
            )
        ],
    )
    gpu_encode: bool | None = option(
        None,
        "with cuda, compress output chunks on the GPU (nvCOMP zstd) instead of zarr on the host",
        doc="Used where nvCOMP is installed and the output's chunks are plain zstd (level 3 or "
        "below, no checksum): the frames are standard zstd. None (the default): every "
        f"chunk where the output has at least {MIN_OUTPUT_TILES} storage chunks and the GPUs "
        "have room for the encoder, else none; True: every chunk; False: none.",
        check=v.boolean,
        exclusive=True,
        flags=[
            flag(
                "--gpu-encode",
                action="store_const",
                const=True,
                help="with cuda, compress every output chunk on the GPU (nvCOMP zstd, where "
                "installed and the output's codec is plain zstd) instead of zarr on the host "
                f"(default: where the output has at least {MIN_OUTPUT_TILES} storage chunks "
                "and the GPUs have room, else --no-gpu-encode)",
            ),
            flag(
                "--no-gpu-encode",
                action="store_const",
                const=False,
                help="let zarr compress the output on the host whatever the cluster",
            ),
        ],
    )
    channel: int | None = option(
        None,
        "channel to label (index along the c axis)",
        doc="Needed where the image's c axis is longer than 1; only that plane of each chunk "
        "is read.",
        check=v.index,
        flags=[flag("--channel", type=int)],
        group=_OME,
    )
    timepoint: int | None = option(
        None,
        "time point to label (index along the t axis)",
        check=v.index,
        flags=[flag("--timepoint", type=int)],
        group=_OME,
    )
    ome_labels: str | None = option(
        None,
        "write the labels into the image as labels/NAME (default without OUTPUT: tilelabel)",
        check=v.text("a name for the labels in the OME-Zarr image's labels/ group"),
        flags=[flag("--ome-labels", metavar="NAME")],
        group=_OME,
    )

    @property
    def table(self) -> str | None:
        """Where the statistics table is written (``stats`` as a path or URL; None: no file)."""
        return None if isinstance(self.stats, bool) or self.stats is None else str(self.stats)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value, check = getattr(self, f.name), f.metadata["spec"].check
            if value is None or check is None:
                continue
            try:
                object.__setattr__(self, f.name, check(value))
            except ClusterSpecError as e:
                raise OptionError(str(e)) from None
            except ValueError as e:
                raise OptionError(f"bad value {value!r} for {f.name!r}: expected {e}") from None
        if self.scheduler is not None and self.cluster is not None:
            raise OptionError("give either 'scheduler' or 'cluster' (kind: scheduler), not both")


def specs() -> dict[str, Spec]:
    """Every option's :class:`Spec`, by name, in declaration order."""
    return {f.name: f.metadata["spec"] for f in dataclasses.fields(Options)}


def checked(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (some options, by name) checked and normalised, as :class:`Options` would."""
    unknown = sorted(set(values) - set(specs()))
    if unknown:
        raise OptionError(
            f"unknown option {unknown[0]!r}; the options are: {', '.join(sorted(specs()))}"
        )
    made = Options(**values)
    return {name: getattr(made, name) for name in values}


# -- the command line ---------------------------------------------------------------------------


def add_flags(parser) -> None:
    """Add every option's flags to an ``argparse`` parser (unset flags parse as None)."""
    groups: dict[str, Any] = {}
    for name, spec in specs().items():
        target = parser
        if spec.group is not None:
            if spec.group not in groups:
                groups[spec.group] = parser.add_argument_group(spec.group)
            target = groups[spec.group]
        if spec.exclusive:
            target = target.add_mutually_exclusive_group()
        for fl in spec.flags:
            kwargs = {"help": spec.help, **fl.kwargs}
            if fl.names[0].startswith("-"):
                kwargs = {"dest": name, "default": None, **kwargs}
            target.add_argument(*fl.names, **kwargs)


def given(args) -> dict[str, Any]:
    """The options an ``argparse`` namespace was given (see :func:`add_flags`)."""
    return {
        name: getattr(args, name)
        for name, spec in specs().items()
        if spec.flags and getattr(args, name, None) is not None
    }


# -- the Python API ------------------------------------------------------------------------------


def parameters_doc(extra: dict[str, str]) -> str:
    """A numpydoc Parameters section: every option (its help and doc) and ``extra``'s entries
    (name -> text) after ``input`` and ``output``: the docstring of
    :func:`tilelabel.label_zarr`, whose keywords are these options."""
    lines = ["Parameters", "----------"]

    def entry(name: str, text: str) -> None:
        lines.append(name)
        lines.extend(textwrap.wrap(text, 92, initial_indent="    ", subsequent_indent="    "))

    for i, f in enumerate(dataclasses.fields(Options)):
        if i == 2:
            for other, text in extra.items():
                entry(other, text)
        spec = f.metadata["spec"]
        entry(f"{f.name} : {f.type}", f"{spec.help}. {spec.doc}".strip())
    return "\n".join(lines)
