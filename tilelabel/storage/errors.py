"""What storage refuses or fails with, by kind: the command line's exit status follows the kind
(a ``ValueError`` is input the user can fix)."""

from __future__ import annotations


class CorruptChunk(ValueError):
    """A stored chunk of the input that cannot be read back (truncated, or not its codec's)."""
