"""The checksum of a block's bytes that a resumed run compares with the killed run's
(:func:`fingerprint`); the CUDA backend computes the same number on its device (``ops.cu``).

The block's bytes in C order are read as little-endian 64-bit words, the last one padded with
zeros; word ``i`` adds ``mix(word + (i + 1) * GOLDEN)`` to a sum modulo 2**64, ``mix`` being
splitmix64's finalizer. Each word's term depends on where it lies (a mirror image differs) and
the sum on no order of adding, so a GPU reduces it in parallel to the same value.
"""

from __future__ import annotations

import numba
import numpy as np

#: splitmix64's increment and finalizer multipliers
GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB
_MASK = (1 << 64) - 1


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * _C1) & _MASK
    z = ((z ^ (z >> 27)) * _C2) & _MASK
    return z ^ (z >> 31)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _sum(words):
    g = np.uint64(GOLDEN)
    c1, c2 = np.uint64(_C1), np.uint64(_C2)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    h = np.uint64(0)
    k = np.uint64(0)
    for i in range(words.size):
        k += g
        z = words[i] + k
        z = (z ^ (z >> s30)) * c1
        z = (z ^ (z >> s27)) * c2
        h += z ^ (z >> s31)
    return h


def fingerprint(block: np.ndarray) -> int:
    """The checksum of ``block``'s bytes (see the module's docstring), as a Python int."""
    data = np.ascontiguousarray(block).reshape(-1).view(np.uint8)
    whole = data.size // 8
    h = int(_sum(data[: whole * 8].view(np.uint64))) if whole else 0
    if data.size % 8:
        last = int.from_bytes(data[whole * 8 :].tobytes(), "little")
        h = (h + _mix((last + (whole + 1) * GOLDEN) & _MASK)) & _MASK
    return h
