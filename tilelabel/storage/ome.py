"""OME-Zarr (OME-NGFF 0.4 and 0.5) images in, labels written into the image's ``labels/`` group.

Input: the URL of an image group (``multiscales`` metadata). Its full-resolution dataset is
labeled; a ``channel`` and a ``timepoint`` select along its c and t axes (axes of size 1 are
selected by themselves), leaving the 2D or 3D spatial data. Only the selected plane of each chunk
is read.

Output: ``<image>/labels/<name>``, a multiscale label image with ``image-label`` metadata and the
image's axes (non-spatial axes of size 1), its ``name`` added to ``labels/``'s list, in the
image's own NGFF version and zarr format. Pyramid levels mirror the image's: level *i* takes every
r-th label of level *i-1* (nearest neighbour; labels are never averaged) where the image's scale
ratio r between the levels is a whole number, so that napari and ome-zarr-py show the labels over
every level of the image. The group's metadata is written last: a failed run leaves no label
image behind, and the level-0 array says ``complete: true`` only once it is.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr

from tilelabel.storage import arrays
from tilelabel.storage.errors import check_run
from tilelabel.validate import check_input

DEFAULT_NAME = "tilelabel"


def _ngff(attrs: dict) -> tuple[dict, str | None]:
    """(the NGFF metadata mapping, its version): 0.5 keeps it under ``ome``, 0.4 at the top."""
    if isinstance(attrs.get("ome"), dict):
        return attrs["ome"], attrs["ome"].get("version", "0.5")
    if "multiscales" in attrs:
        return attrs, attrs["multiscales"][0].get("version", "0.4")
    return {}, None


@dataclass
class OmeImage:
    url: str  # the image group, normalised (a path or a URL)
    version: str
    zarr_format: int
    axes: list[dict]
    datasets: list[dict]
    array: zarr.Array  # the full-resolution dataset
    index: tuple[int, ...]  # the selected position along each leading non-spatial axis
    #: the full-resolution dataset's scale along the spatial axes (physical size of a voxel)
    spacing: tuple[float, ...] | None = None

    @property
    def array_url(self) -> str:
        return f"{self.url}/{self.datasets[0]['path']}"

    @property
    def shape(self) -> tuple[int, ...]:
        """The spatial shape that is labeled."""
        return tuple(self.array.shape)[len(self.index) :]

    def labels_url(self, name: str) -> str:
        return f"{self.url}/labels/{name}"


def _axis_type(axis: dict) -> str:
    if "type" in axis:
        return axis["type"]
    return {"t": "time", "c": "channel"}.get(axis.get("name", ""), "space")


def open_image(
    url: str,
    storage_options: dict | None = None,
    channel: int | None = None,
    timepoint: int | None = None,
) -> OmeImage | None:
    """The OME-Zarr image at ``url`` with its selection, or None when ``url`` is not an image
    group (then ``channel`` and ``timepoint`` are refused)."""
    target = arrays.normalize_url(url)
    try:
        node = zarr.open(target, mode="r", storage_options=storage_options)
    except Exception:
        node = None
    meta, version = _ngff(dict(node.attrs)) if isinstance(node, zarr.Group) else ({}, None)
    if version is None:
        if channel is not None or timepoint is not None:
            raise ValueError(
                f"channel and timepoint select along the axes of an OME-Zarr image; input {url} "
                "is not one (no multiscales metadata)"
            )
        return None
    ms = meta["multiscales"][0]
    if not all(isinstance(a, dict) for a in ms.get("axes") or [None]):
        raise ValueError(
            f"input {url}: OME-NGFF {version} without axes objects (needs 0.4 or later)"
        )
    axes = ms["axes"]
    array = node[ms["datasets"][0]["path"]]
    types = [_axis_type(a) for a in axes]
    nlead = next((i for i, t in enumerate(types) if t == "space"), len(types))
    if any(t != "space" for t in types[nlead:]):
        raise ValueError(f"input {url}: OME-Zarr axes {axes} do not end in the spatial axes")
    wanted = {"time": ("timepoint", timepoint), "channel": ("channel", channel)}
    index = []
    for axis, kind, size in zip(axes[:nlead], types[:nlead], array.shape[:nlead], strict=True):
        option, value = wanted.get(kind, (f"axis {axis.get('name')}", None))
        if value is None:
            if size != 1:
                raise ValueError(
                    f"input {url} has {size} positions along its {kind} axis "
                    f"{axis.get('name')!r}; choose one with --{option} 0..{size - 1}"
                    if kind in wanted
                    else f"input {url} has a {kind} axis {axis.get('name')!r} of size {size}; "
                    "tilelabel can select only channels and time points"
                )
            value = 0
        if not 0 <= value < size:
            raise ValueError(f"input {url}: {option} {value} is out of range 0..{size - 1}")
        index.append(value)
    for kind, (option, value) in wanted.items():
        if value is not None and kind not in types[:nlead]:
            raise ValueError(f"input {url} has no {kind} axis to select a {option} from")
    image = OmeImage(
        url=target,
        version=str(version),
        zarr_format=node.metadata.zarr_format,
        axes=axes,
        datasets=ms["datasets"],
        array=array,
        index=tuple(index),
        spacing=_spacing(ms, nlead),
    )
    check_input(image.shape, array.dtype, what=f"input {url} (full resolution, selected)")
    return image


def _scale(transforms: list[dict] | None) -> list[float] | None:
    return next((t["scale"] for t in transforms or [] if t.get("type") == "scale"), None)


def _spacing(ms: dict, nlead: int) -> tuple[float, ...] | None:
    """The full-resolution dataset's scale along the spatial axes, times the multiscale's own
    (NGFF applies both); None where neither gives one."""
    scales = [_scale(ms["datasets"][0].get("coordinateTransformations")),
              _scale(ms.get("coordinateTransformations"))]  # fmt: skip
    if all(s is None for s in scales):
        return None
    out = [1.0] * (len(ms["axes"]) - nlead)
    for s in scales:
        if s is not None:
            out = [a * float(b) for a, b in zip(out, s[nlead:], strict=True)]
    return tuple(out)


def output_name(image: OmeImage | None, dst: str | None, name: str | None) -> str | None:
    """The label name to write into the image's ``labels/``, or None for a plain output array."""
    if image is None:
        if name is not None:
            raise ValueError("ome_labels (--ome-labels) needs an OME-Zarr image as input")
        if dst is None:
            raise ValueError("missing OUTPUT (give it as an argument or in --config)")
        return None
    if dst is not None and name is not None:
        raise ValueError("give either OUTPUT or ome_labels (--ome-labels), not both")
    return None if dst is not None else name or DEFAULT_NAME


def check_label_name(name: str) -> None:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"bad label name {name!r}: a single path component such as 'cells'")


def _levels(
    image: OmeImage, storage_options: dict | None = None
) -> list[tuple[str, list[dict], tuple[int, ...], tuple[int, ...]]]:
    """Per label level: (path, coordinate transformations, shape, stride from the level before);
    the image's levels as long as each is a whole-number subsampling of the one before."""
    group = zarr.open_group(image.url, mode="r", storage_options=storage_options)
    nlead = len(image.index)
    out = []
    prev_scale = prev_shape = None
    for ds in image.datasets:
        shape = (1,) * nlead + tuple(group[ds["path"]].shape)[nlead:]
        scale = next(
            (t["scale"] for t in ds.get("coordinateTransformations", []) if t["type"] == "scale"),
            [1.0] * len(shape),
        )
        stride = (1,) * len(shape)
        if prev_scale is not None:
            ratio = [s / p for s, p in zip(scale, prev_scale, strict=True)]
            stride = tuple(round(r) for r in ratio)
            whole = all(abs(r - k) < 1e-6 and k >= 1 for r, k in zip(ratio, stride, strict=True))
            fits = all(-(-p // k) >= n for p, k, n in zip(prev_shape, stride, shape, strict=True))
            if not (whole and fits):
                break
        out.append((ds["path"], ds.get("coordinateTransformations", []), shape, stride))
        prev_scale, prev_shape = scale, shape
    return out


def _key_encoding(arr: zarr.Array) -> dict:
    if arr.metadata.zarr_format == 2:
        return {"name": "v2", "separator": arr.metadata.dimension_separator}
    return arr.metadata.chunk_key_encoding.to_dict()


def create_labels(
    image: OmeImage,
    name: str,
    dtype: np.dtype,
    attributes: dict[str, Any],
    storage_options: dict | None = None,
) -> tuple[zarr.Array, str, tuple[int, ...]]:
    """Create the label image's arrays (no group metadata yet) where nothing of zarr's is;
    return its level-0 array, that array's URL and the index of the labeled plane in it."""
    root = zarr.open_group(image.url, mode="r+", storage_options=storage_options)
    group = root.require_group("labels").create_group(name)
    like = image.array
    nlead = len(image.index)
    made = []
    for path, _, shape, _ in _levels(image, storage_options):
        chunks = (1,) * nlead + tuple(like.chunks)[nlead:]
        kwargs: dict[str, Any] = {}
        if like.shards:
            kwargs["shards"] = (1,) * nlead + tuple(like.shards)[nlead:]
        made.append(
            group.create_array(
                path,
                shape=shape,
                chunks=tuple(min(c, s) for c, s in zip(chunks, shape, strict=True)),
                dtype=dtype,
                compressors=like.compressors,
                fill_value=0,
                chunk_key_encoding=_key_encoding(like),
                attributes=attributes if not made else {},
                dimension_names=[a["name"] for a in image.axes] if image.zarr_format == 3 else None,
                **kwargs,
            )
        )
    return made[0], f"{image.labels_url(name)}/{image.datasets[0]['path']}", (0,) * nlead


def _subsample(src_url, dst_url, slices, stride, storage_options, run=None, level0=None) -> None:
    if run is not None:  # the labels are still the run's (level 0 names it)
        check_run(zarr.open_array(level0, mode="r", storage_options=storage_options), run)
    src = zarr.open_array(src_url, mode="r", storage_options=storage_options)
    dst = zarr.open_array(dst_url, mode="r+", storage_options=storage_options)
    read = tuple(
        slice(s.start * k, (s.stop - 1) * k + 1, k) for s, k in zip(slices, stride, strict=True)
    )
    dst[slices] = src[read]


def level_tasks(
    image: OmeImage, name: str, storage_options: dict | None = None, run: str | None = None
) -> list[list[Callable[[], None]]]:
    """The tasks that fill the label image's lower levels from level 0, level by level (each
    level's tasks read the one before, so a level starts once the last is done), each writing
    one block of its level while level 0 names ``run`` (see :func:`.errors.check_run`)."""
    levels = _levels(image, storage_options)
    base = image.labels_url(name)
    out = []
    for (prev, *_), (path, _, shape, stride) in itertools.pairwise(levels):
        dst = zarr.open_array(f"{base}/{path}", mode="r", storage_options=storage_options)
        unit = tuple(dst.shards or dst.chunks)
        grid = [-(-n // u) for n, u in zip(shape, unit, strict=True)]
        out.append(
            [
                functools.partial(
                    _subsample,
                    f"{base}/{prev}",
                    f"{base}/{path}",
                    tuple(
                        slice(i * u, min((i + 1) * u, n))
                        for i, u, n in zip(ix, unit, shape, strict=True)
                    ),
                    stride=stride,
                    storage_options=storage_options,
                    run=run,
                    level0=f"{base}/{levels[0][0]}",
                )
                for ix in np.ndindex(*grid)
            ]
        )
    return out


def publish_labels(image: OmeImage, name: str, storage_options: dict | None = None) -> list[str]:
    """Write the NGFF metadata that makes the label image visible: its multiscales and
    image-label metadata, then its name in ``labels/``. Returns the level paths."""
    levels = _levels(image, storage_options)
    multiscale = {
        "name": name,
        "axes": image.axes,
        "datasets": [{"path": p, "coordinateTransformations": t} for p, t, _, _ in levels],
    }
    label = {"source": {"image": "../../"}}
    root = zarr.open_group(image.url, mode="r+", storage_options=storage_options)
    labels = root["labels"]
    group = labels[name]
    if image.version.startswith("0.4"):
        group.attrs.update(
            {
                "multiscales": [{"version": image.version, **multiscale}],
                "image-label": {"version": image.version, **label},
            }
        )
        names = list(labels.attrs.get("labels", []))
        labels.attrs["labels"] = names + [name] if name not in names else names
    else:
        group.attrs["ome"] = {
            "version": image.version,
            "multiscales": [multiscale],
            "image-label": label,
        }
        ome = dict(labels.attrs.get("ome", {}))
        names = list(ome.get("labels", []))
        labels.attrs["ome"] = {
            **ome,
            "version": image.version,
            "labels": names + [name] if name not in names else names,
        }
    return [p for p, *_ in levels]
