"""What storage refuses or fails with, by kind: the command line's exit status follows the kind
(a ``ValueError`` is input the user can fix); and the check every write makes that its output is
still its run's."""

from __future__ import annotations


class OutputBusy(ValueError):
    """Another run writes the output: refused before any work."""


class OutputTaken(RuntimeError):
    """Another run took the output over while this one ran: this one stops writing there."""


class CorruptChunk(ValueError):
    """A stored chunk of the input that cannot be read back (truncated, or not its codec's)."""


def check_run(array, run: str | None) -> None:
    """Refuse to write into ``array`` (a zarr array) unless its attributes name ``run`` (None:
    no check): another run has replaced the output meanwhile (see
    :mod:`tilelabel.storage.outputs`)."""
    if run is None:
        return
    named = (array.attrs.get("tilelabel") or {}).get("run")
    if named != run:
        raise OutputTaken(
            f"output {array.store_path} was replaced by another run (run {named}); this run "
            "stops writing there"
        )
