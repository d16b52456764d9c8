"""A chunk's summary as dask's scheduler sees it: its real size, so tasks go to its bytes."""

from __future__ import annotations

import numpy as np
from dask.sizeof import sizeof
from distributed import Client, LocalCluster

from tests.conftest import summarize_block
from tilelabel.pipeline import numbering
from tilelabel.synth import random_volume


def _summary(shape=(40, 48, 56)):
    block = random_volume(shape, 0.3, 1, seed=5)
    summary = summarize_block(block, (0, 0, 0), shape, ((True, True),) * 3, 26)
    return summary.borders, summary.counts


def _nbytes(arrays) -> int:
    return sum(a.nbytes for a in arrays if a is not None)


def test_a_summary_counts_its_arrays():
    borders, counts = _summary()
    faces = _nbytes(borders.faces)
    assert faces > 0
    assert sizeof(borders) >= faces + borders.ids.nbytes + borders.keys.nbytes
    assert sizeof(counts) >= counts.row_counts.nbytes + counts.ids.nbytes + counts.keys.nbytes
    assert sizeof(_whole_summary()) >= sizeof(borders) + sizeof(counts)


def test_faces_hold_only_their_own_bytes():
    """What the summary keeps of a chunk waits for the chunk's neighbours, about a slab of
    chunks: a face that was a view of the chunk's labels (the first axis's are contiguous) kept
    every such chunk's whole labels alive, unseen by dask, so that a worker's memory grew with
    the volume."""
    borders, _ = _summary()
    for face in borders.faces:
        assert face.base is None and face.flags.owndata and face.flags.c_contiguous


def test_a_lookup_spec_counts_its_arrays():
    _, counts = _summary()
    roots = counts.keys.copy()
    offsets = np.zeros(counts.row_counts.shape, np.int64)
    finals = np.arange(1, counts.ids.size + 1)
    spec = numbering.lut_spec(counts, roots, offsets, finals)
    assert sizeof(spec) >= spec.row_counts.nbytes + spec.row_step.nbytes + finals.nbytes


def _whole_summary():
    block = random_volume((40, 48, 56), 0.3, 1, seed=5)
    return summarize_block(block, (0, 0, 0), block.shape, ((True, True),) * 3, 26)


def test_the_scheduler_learns_a_summary_s_size_from_the_worker_that_made_it():
    """The sizes are registered in the worker processes too, which report them."""
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        future = client.submit(_whole_summary)
        summary = future.result()
        borders, counts = summary.borders, summary.counts
        key = future.key
        nbytes = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.tasks[key].nbytes)
    assert nbytes >= _nbytes(borders.faces) + counts.row_counts.nbytes


def test_row_counts_are_as_narrow_as_a_row_allows():
    """A 3D checkerboard, every voxel a component of its own under 6-connectivity: 255 first
    voxels in each 510-voxel row, uint8's most."""
    block = (np.indices((2, 3, 510)).sum(axis=0) % 2 == 0).astype(np.uint8)
    counts = summarize_block(block, (0, 0, 0), block.shape, ((False, False),) * 3, 6).counts
    assert counts.row_counts.dtype == np.uint8
    assert counts.row_counts.max() == 255 and counts.n == 255 * 6
