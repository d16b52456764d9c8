"""A chunk's summary as dask's scheduler sees it: its real size, so tasks go to its bytes."""

from __future__ import annotations

import numpy as np
from dask.sizeof import sizeof
from distributed import Client, LocalCluster

from tilelabel.pipeline import numbering
from tilelabel.pipeline.local import summarize
from tilelabel.synth import random_volume


def _summary(shape=(40, 48, 56)):
    block = random_volume(shape, 0.3, 1, seed=5)
    open_faces = ((True, True),) * 3
    return summarize(block, "chunk", (0, 0, 0), shape, open_faces, "cpu", 26, None)


def _nbytes(arrays) -> int:
    return sum(a.nbytes for a in arrays if a is not None)


def test_a_summary_counts_its_arrays():
    borders, counts = _summary()
    faces = _nbytes(borders.faces)
    assert faces > 0
    assert sizeof(borders) >= faces + borders.ids.nbytes + borders.keys.nbytes
    assert sizeof(counts) >= counts.row_counts.nbytes + counts.ids.nbytes + counts.keys.nbytes
    assert sizeof((borders, counts)) >= sizeof(borders) + sizeof(counts)


def test_a_lookup_spec_counts_its_arrays():
    _, counts = _summary()
    roots = counts.keys.copy()
    offsets = np.zeros(counts.row_counts.shape, np.int64)
    finals = np.arange(1, counts.ids.size + 1)
    spec = numbering.lut_spec(counts, roots, offsets, finals)
    assert sizeof(spec) >= spec.row_counts.nbytes + spec.row_step.nbytes + finals.nbytes


def test_the_scheduler_learns_a_summary_s_size_from_the_worker_that_made_it():
    """The sizes are registered in the worker processes too, which report them."""
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        future = client.submit(_summary)
        borders, counts = future.result()
        key = future.key
        nbytes = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.tasks[key].nbytes)
    assert nbytes >= _nbytes(borders.faces) + counts.row_counts.nbytes


def test_row_counts_are_as_narrow_as_a_row_allows():
    """A 3D checkerboard, every voxel a component of its own under 6-connectivity: 255 first
    voxels in each 510-voxel row, uint8's most."""
    block = (np.indices((2, 3, 510)).sum(axis=0) % 2 == 0).astype(np.uint8)
    _, counts = summarize(
        block, "chunk", (0, 0, 0), block.shape, ((False, False),) * 3, "cpu", 6, None
    )
    assert counts.row_counts.dtype == np.uint8
    assert counts.row_counts.max() == 255 and counts.n == 255 * 6
