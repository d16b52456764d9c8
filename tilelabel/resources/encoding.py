"""Which output chunks the GPU compresses: by default all of them, where the output has enough.

A worker's GPU labels a chunk in milliseconds; compressing its labels on the host would take the
host's cores longer than the rest of the run. So where the output's codec has a GPU encoder
(:class:`tilelabel.kernels.cuda.backend.CUDAEncoder`), each write compresses its chunk on the
GPU and the host stores the bytes (:class:`GPUEncoder`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: fewest storage tiles a processing chunk holds where the GPU compresses the output. nvCOMP
#: compresses a batch's tiles side by side, and a chunk's tiles are all the work a write hands
#: the GPU at once: it needs many of them to run at speed.
MIN_BATCH_TILES = 64

#: with ``gpu_encode=None``, the GPU compresses output only where it holds more than one
#: processing chunk of :data:`MIN_BATCH_TILES`: with one chunk, loading the encoder costs more
#: than it saves.
MIN_OUTPUT_TILES = MIN_BATCH_TILES + 1


def encodes(gpu_encode: bool | None, tiles: int | None = None) -> bool:
    """Whether the GPU compresses the output, for a ``gpu_encode`` option. ``None`` (the
    default) compresses where the output has ``tiles`` storage tiles of at least
    :data:`MIN_OUTPUT_TILES` (or that is not known yet)."""
    if gpu_encode is None:
        return tiles is None or tiles >= MIN_OUTPUT_TILES
    return bool(gpu_encode)


@dataclass(frozen=True)
class GPUEncoder:
    """How a write compresses its chunk on its device, into storage chunks of ``layout``
    (:class:`tilelabel.storage.RawChunks`). Picklable: each write task takes one."""

    layout: Any

    def encode(self, backend, labels, lut) -> dict | None:
        """``lut[labels]`` as the layout's compressed storage chunks (see
        :meth:`tilelabel.kernels.backends.Encoder.encode_tiles`), or None where the host is to
        compress them: the backend has no encoder for the codec."""
        enc, codec = backend.encoder, self.layout.codec
        if enc is None or not enc.available(codec):
            return None
        return enc.encode_tiles(labels, lut, self.layout.tile, codec)
