"""Storage: zarr arrays and OME-Zarr images in and out, read and written by the tasks.

:func:`open_volume` opens what a run labels, :func:`open_output` checks where it writes
(:mod:`.outputs`, :mod:`.places`) and :mod:`.lease` keeps it one run's; the tasks read and write
through :class:`ZarrSource` and :class:`ZarrTarget`, picklable and opened in each task
(:mod:`.arrays`), on each thread's own event loop (:mod:`.loops`).
"""

from tilelabel.storage.arrays import (
    RawChunks,
    ZarrSource,
    ZarrTarget,
    normalize_url,
    open_input,
    raw_chunks,
    raw_codec,
)
from tilelabel.storage.errors import CorruptChunk, OutputBusy, OutputTaken
from tilelabel.storage.outputs import Created, Output, open_output
from tilelabel.storage.volumes import Volume, open_volume

__all__ = [
    "CorruptChunk",
    "Created",
    "Output",
    "OutputBusy",
    "OutputTaken",
    "RawChunks",
    "Volume",
    "ZarrSource",
    "ZarrTarget",
    "normalize_url",
    "open_input",
    "open_output",
    "open_volume",
    "raw_chunks",
    "raw_codec",
]
