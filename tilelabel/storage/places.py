"""Where an output may go: places compared as real paths or store prefixes, and what is there.

1. :func:`place`: a path or URL as (protocol, normalised path): local paths are real paths
   (symbolic links and ``..`` resolved, ``file://`` URLs among them), URLs keep their protocol and
   a path without ``.`` or ``..`` steps or doubled and trailing slashes;
2. :func:`nesting`: whether one place is another, holds it or lies inside it (an output that
   holds its input would delete it when replaced, one inside it would nest in it);
3. :func:`found`: what a place holds: nothing, a file, a zarr array or group, a directory of
   other things, or only an unfinished run's record (:mod:`.lease`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from tilelabel.storage.arrays import normalize_url

#: the directory a run keeps beside its labels: its lease and the chunks it wrote (:mod:`.lease`)
RECORD = ".tilelabel"

#: what zarr (v2 or v3) stores where an array or group is
ZARR_KEYS = ("zarr.json", ".zarray", ".zgroup")


@dataclass(frozen=True)
class Place:
    protocol: str
    path: str

    def holds(self, other: Place) -> bool:
        """Whether ``other`` lies inside this place (not equal to it)."""
        if self.protocol != other.protocol or self.path == other.path:
            return False
        prefix = self.path if self.path.endswith("/") else self.path + "/"
        return other.path.startswith(prefix)


def place(url: str) -> Place:
    """``url`` (a path or an fsspec URL) as a comparable :class:`Place`."""
    url = normalize_url(url)
    if "://" not in url:
        return Place("file", url)
    protocol, _, path = url.partition("://")
    path = posixpath.normpath("/" + path.lstrip("/"))
    return Place(protocol.split("::")[-1].lower(), path)


def nesting(output: str, other: str) -> str | None:
    """How ``output`` relates to ``other``: ``"is"``, ``"holds"`` (other lies inside it),
    ``"inside"`` (it lies inside other), or None where they are apart."""
    a, b = place(output), place(other)
    if a == b:
        return "is"
    if a.holds(b):
        return "holds"
    if b.holds(a):
        return "inside"
    return None


def filesystem(url: str, storage_options: dict | None = None):
    """``(fsspec filesystem, path)`` of a path or URL."""
    import fsspec

    return fsspec.core.url_to_fs(normalize_url(url), **(storage_options or {}))


def found(url: str, storage_options: dict | None = None) -> str:
    """What ``url`` holds: ``"nothing"`` (also an empty directory), ``"file"``, ``"zarr"`` (an
    array or a group), ``"record"`` (only a run's :data:`RECORD`, left by a run that never
    created its labels), or ``"other"`` (a directory of other things)."""
    fs, path = filesystem(url, storage_options)
    if fs.isfile(path):
        return "file"
    try:
        names = [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return "nothing"
    if any(name in ZARR_KEYS for name in names):
        return "zarr"
    if any(name != RECORD for name in names):
        return "other"
    return "record" if names else "nothing"


def remove(url: str, storage_options: dict | None = None, keep: str | None = None) -> None:
    """Delete what ``url`` holds (all of it, or all but its entry ``keep``); absent is fine."""
    fs, path = filesystem(url, storage_options)
    if fs.isfile(path):
        fs.rm(path)
        return
    if keep is None:
        if fs.exists(path):
            fs.rm(path, recursive=True)
        return
    try:
        entries = fs.ls(path, detail=False)
    except FileNotFoundError:
        return
    for entry in entries:
        if posixpath.basename(entry.rstrip("/")) != keep:
            fs.rm(entry, recursive=True)
