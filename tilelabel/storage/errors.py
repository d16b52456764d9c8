"""What storage refuses or fails with, by kind: the command line's exit status follows the kind
(a ``ValueError`` is input the user can fix)."""

from __future__ import annotations


class OutputBusy(ValueError):
    """Another run writes the output: refused before any work."""


class OutputTaken(RuntimeError):
    """Another run took the output over while this one ran: this one stops writing there."""


class CorruptChunk(ValueError):
    """A stored chunk of the input that cannot be read back (truncated, or not its codec's)."""
