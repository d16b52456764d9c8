"""zarr to zarr on a real LocalCluster of worker processes, against scipy on the whole volume."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import zarr
from distributed.diagnostics.plugin import SchedulerPlugin
from scipy import ndimage

import tilelabel
from tests.cases import check_layout_kept, diagonal, storage_layouts
from tests.conftest import wait_until, write_zarr
from tilelabel import dtypes
from tilelabel.connectivity import structure
from tilelabel.synth import random_volume


def expected(img, conn):
    return ndimage.label(img, structure(img.ndim, conn))


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    "shape, storage, chunks, conn",
    [
        ((40, 37, 29), (8, 9, 10), (16, 18, 20), 26),
        ((40, 37, 29), (8, 9, 10), (8, 9, 10), 6),
        ((33, 31, 27), (5, 5, 5), None, 18),
        ((130, 97), (16, 16), (32, 48), 8),
        ((130, 97), (16, 16), None, 4),
    ],
)
def test_zarr_to_zarr_equals_scipy(tmp_path, client, zarr_format, shape, storage, chunks, conn):
    img = random_volume(shape, 0.35, 1, seed=sum(shape))
    src = write_zarr(tmp_path / "in.zarr", img, storage, zarr_format)
    n = tilelabel.label_zarr(
        src,
        str(tmp_path / "out.zarr"),
        connectivity=conn,
        chunks=chunks,
        backend="cpu",
        client=client,
        keep_input=zarr_format == 3,  # kept bits relabeled, or the input read again
    )
    ref, rn = expected(img, conn)
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    assert n == rn
    np.testing.assert_array_equal(out[...], ref)
    assert out.dtype == np.uint32
    assert out.chunks == tuple(storage)
    assert out.metadata.zarr_format == zarr_format
    meta = out.attrs["tilelabel"]
    assert meta["complete"] is True and meta["components"] == rn and meta["connectivity"] == conn


def test_many_workers_and_one_agree(tmp_path, client):
    """The same result whatever the number of workers (here: the 2-process cluster and 1 thread)."""
    from distributed import Client, LocalCluster

    img = diagonal((24, 24, 24)) | random_volume((24, 24, 24), 0.3, 2, seed=9)
    src = write_zarr(tmp_path / "in.zarr", img, (6, 6, 6))
    tilelabel.label_zarr(src, str(tmp_path / "a.zarr"), chunks=(6, 12, 6), client=client)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as lc,
        Client(lc, set_as_default=False) as one,
    ):
        tilelabel.label_zarr(src, str(tmp_path / "b.zarr"), chunks=(12, 6, 24), client=one)
    a = zarr.open_array(str(tmp_path / "a.zarr"))[...]
    b = zarr.open_array(str(tmp_path / "b.zarr"))[...]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, expected(img, 26)[0])


def test_sharded_input_keeps_shards(tmp_path, client):
    img = random_volume((32, 32, 32), 0.4, 1, seed=3)
    src = write_zarr(tmp_path / "in.zarr", img, (4, 4, 4), shards=(16, 16, 16))
    tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client)
    out = zarr.open_array(str(tmp_path / "out.zarr"))
    assert out.shards == (16, 16, 16)
    np.testing.assert_array_equal(out[...], expected(img, 26)[0])


@pytest.mark.parametrize("name, zarr_format, layout", storage_layouts())
def test_input_codecs_and_layouts(tmp_path, client, name, zarr_format, layout):
    """Every common input codec and layout is read, and the output is written like it."""
    img = random_volume((40, 36, 32), 0.35, 1, seed=len(name))
    src = tmp_path / "in.zarr"
    write_zarr(src, img, zarr_format=zarr_format, **layout)
    dst = str(tmp_path / "out.zarr")
    n = tilelabel.label_zarr(str(src), dst, chunks=(16, 16, 16), client=client)
    ref, rn = expected(img, 26)
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(dst)[...], ref)
    check_layout_kept(str(src), dst)


def test_float_and_int_inputs(tmp_path, client):
    rng = np.random.default_rng(1)
    f = (rng.normal(size=(20, 21, 22)) * (rng.random((20, 21, 22)) < 0.3)).astype(np.float32)
    src = write_zarr(tmp_path / "f.zarr", f, (10, 7, 11))
    n = tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), connectivity=6, client=client)
    ref, rn = expected(f != 0, 6)
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)


def test_overwrite(tmp_path, client):
    img = random_volume((16, 16), 0.5, 1, seed=0)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8))
    dst = str(tmp_path / "out.zarr")
    tilelabel.label_zarr(src, dst, client=client)
    with pytest.raises(ValueError, match="already exists"):
        tilelabel.label_zarr(src, dst, client=client)
    tilelabel.label_zarr(src, dst, connectivity=4, overwrite=True, client=client)
    np.testing.assert_array_equal(zarr.open_array(dst)[...], expected(img, 4)[0])


def test_nan_fails_without_output(tmp_path, client):
    f = np.zeros((16, 16, 16), np.float64)
    f[15, 15, 15] = np.nan
    src = write_zarr(tmp_path / "in.zarr", f, (8, 8, 8))
    where = r"NaN at voxel \(15, 15, 15\) \(in chunk \(1, 1, 1\) at \(8, 8, 8\)"
    with pytest.raises(ValueError, match=where):
        tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), chunks=(8, 8, 8), client=client)
    assert not (tmp_path / "out.zarr").exists()
    wait_until(lambda: not placing_plugins(client), 10, "the specs' plugin to leave")


def placing_plugins(client) -> list[str]:
    """The scheduler plugins that place runs' lookup specs (:mod:`tilelabel.workflow.placement`)."""
    plugins = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins))
    return [n for n in plugins if n.startswith("tilelabel-specs-")]


def test_uint32_overflow_refused_before_writing(tmp_path, client, monkeypatch):
    """A forced uint32 that cannot hold the count is refused before the output exists.

    Counts above 2^32 need volumes of >8.6e9 voxels, so the limit is lowered here; the decision
    is taken on the client, where the patch applies.
    """
    img = random_volume((20, 20), 0.5, 1, seed=4)
    n = expected(img, 4)[1]
    monkeypatch.setattr(dtypes, "UINT32_MAX", n - 1)
    src = write_zarr(tmp_path / "in.zarr", img, (10, 10))
    with pytest.raises(dtypes.LabelOverflowError, match="do not fit in uint32"):
        tilelabel.label_zarr(
            src, str(tmp_path / "out.zarr"), connectivity=4, dtype="uint32", client=client
        )
    assert not (tmp_path / "out.zarr").exists()
    # auto picks uint64 for the same count
    tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), connectivity=4, client=client)
    out = zarr.open_array(str(tmp_path / "out.zarr"))
    assert out.dtype == np.uint64
    np.testing.assert_array_equal(out[...], expected(img, 4)[0])


def test_group_input_names_its_arrays(tmp_path):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("raw", shape=(4, 4), dtype="u1")
    with pytest.raises(ValueError, match="is a zarr group, not an array.*raw"):
        tilelabel.label_zarr(str(tmp_path / "g.zarr"), str(tmp_path / "out.zarr"))


def test_chunk_shares_of_the_merge_are_not_root_tasks(tmp_path, client):
    """The merge's one-task steps (resolve, distribute) hold every chunk's border labels. Each
    chunk's share is cut out by a task the scheduler must not treat as a root task: those go to
    whichever worker is idle, each such worker fetching the whole result (what plain getitem
    tasks on the one result were). Tied to its own chunk too, a share is placed by its inputs'
    bytes, so it runs where the whole result is once that is large."""
    from tilelabel.chunking import plan_for_storage
    from tilelabel.pipeline.graph import Source, build
    from tilelabel.pipeline.local import Labeler
    from tilelabel.storage.arrays import ZarrSource

    img = random_volume((48, 48, 48), 0.3, 1, seed=4)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16, 16))
    plan = plan_for_storage(img.shape, (16, 16, 16), (16, 16, 16))
    reader = ZarrSource(src)
    graph = build(source=Source(lambda idx: reader), plan=plan, labeler=Labeler("cpu", 26))
    shares = [k for k in graph.graph if k[0].startswith(("tilelabel-roots-", "tilelabel-bfinals-"))]
    assert len(shares) == 2 * plan.nchunks > 4 * len(client.scheduler_info()["workers"])
    futures = client.compute([graph.delayed(k) for k in shares], optimize_graph=False)
    client.gather(futures)

    def rootish(keys, dask_scheduler=None):
        return [dask_scheduler.is_rootish(dask_scheduler.tasks[k]) for k in keys]

    assert not any(client.run_on_scheduler(rootish, shares))


def label_watched(client, plugin: SchedulerPlugin, attr: str, tmp_path, img, **kwargs):
    """label_zarr of ``img`` in 8^3 chunks with ``plugin`` on the scheduler; returns the
    plugin's ``attr`` after the run, and checks the output against scipy."""
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    name = plugin.name
    client.register_plugin(plugin)
    try:
        tilelabel.label_zarr(
            src, str(tmp_path / "out.zarr"), client=client, chunks=(8, 8, 8), **kwargs
        )
        seen = client.run_on_scheduler(
            lambda dask_scheduler: getattr(dask_scheduler.plugins[name], attr)
        )
    finally:
        client.unregister_scheduler_plugin(name)
    out = zarr.open_array(str(tmp_path / "out.zarr"))[...]
    np.testing.assert_array_equal(out, expected(img, 26)[0])
    return seen


class TransitionLog(SchedulerPlugin):
    """Every task transition on the scheduler, in order: (the key's layer name, from, to)."""

    name = "tilelabel-test-transitions"

    def __init__(self):
        self.log = []

    def transition(self, key, start, finish, *args, **kwargs):
        self.log.append((key[0] if isinstance(key, tuple) else key, start, finish))


def test_borders_are_freed_by_their_pairs_not_at_the_count(tmp_path, client):
    """A chunk's faces are the bulk of what the labeling pass leaves on its worker. The run lets
    go of them once the merge's graph holds them, so each is freed when the border pairs that
    read it are done; held until the count was known, every chunk's faces were on the workers
    at once (the host peak per worker grew with the volume)."""
    img = random_volume((32, 32, 32), 0.3, seed=5)
    log = label_watched(client, TransitionLog(), "log", tmp_path, img)
    counted = next(
        i for i, (n, _, to) in enumerate(log) if n.startswith("tilelabel-count-") and to == "memory"
    )
    borders = [(i, a, b) for i, (n, a, b) in enumerate(log) if n.startswith("tilelabel-borders-")]
    assert sum(b == "memory" for _, _, b in borders) == 64  # one per chunk, none made twice
    assert sum(a == "memory" and i < counted for i, a, _ in borders) == 64


class WhereDone(SchedulerPlugin):
    """The worker of every task that finished: (the key's layer name, its chunk index, worker)."""

    name = "tilelabel-test-where-done"

    def __init__(self):
        self.done = []

    def transition(self, key, start, finish, *args, **kwargs):
        if start == "processing" and finish == "memory" and isinstance(key, tuple):
            self.done.append((key[0], key[1:], kwargs.get("worker")))


def test_each_spec_is_made_where_its_chunk_was_labeled(tmp_path, client):
    """Left to dask, a spec ran where its largest input was, the prefix sums of its chunk row,
    and waited there for its write: one worker held many. Placed, each is made on the worker
    that labeled its chunk (which holds the chunk's counts). The place is a preference: dask's
    work stealing may still move a few specs to an idle worker."""
    img = random_volume((32, 32, 32), 0.3, seed=6)
    done = label_watched(client, WhereDone(), "done", tmp_path, img, keep_input=False)
    by_kind = {}
    for name, idx, worker in done:
        by_kind.setdefault(name.split("-")[1], {})[idx] = worker
    assert len(by_kind["spec"]) == len(by_kind["counts"]) == 64
    assert len(set(by_kind["counts"].values())) > 1  # the chunks were spread
    beside = sum(by_kind["spec"][idx] == w for idx, w in by_kind["counts"].items())
    assert beside >= 56, beside  # left to dask, about half or fewer
    assert not placing_plugins(client)  # it left once every spec had started


class MostHeld(SchedulerPlugin):
    """The most results of each kind (the key's layer name) in memory at once."""

    name = "tilelabel-test-most-held"

    def __init__(self):
        self.now, self.most = {}, {}

    def transition(self, key, start, finish, *args, **kwargs):
        kind = (key[0] if isinstance(key, tuple) else key).split("-")[1]
        if finish == "memory":
            self.now[kind] = self.now.get(kind, 0) + 1
            self.most[kind] = max(self.most.get(kind, 0), self.now[kind])
        elif start == "memory":
            self.now[kind] -= 1


def test_faces_wait_for_about_a_slab_of_chunks_not_for_the_whole_pass(tmp_path, client):
    """A chunk's faces are freed once its border pairs are done, which needs its forward
    neighbours labeled (the next slab's among them). Chunks labeled in raster order, and the
    pairs run before the chunks still to label, hold the faces of about a slab at once: on a
    6^3 grid, a chunk waits for the one 6 * 6 + 6 + 1 = 43 places after it. In dask's own
    order, 95-97 of the 216 were held at once."""
    img = random_volume((48, 48, 48), 0.3, seed=8)
    most = label_watched(client, MostHeld(), "most", tmp_path, img)
    assert most["borders"] <= 43 + 12, most  # 47-48 seen; 95-97 in dask's own order


def test_result_reports_every_phase_in_order(tmp_path, client):
    img = random_volume((24, 24, 24), 0.3, seed=3)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    res = tilelabel.label_zarr(
        src, str(tmp_path / "out.zarr"), client=client, chunks=(8, 8, 8), return_result=True
    )
    assert list(res.phases) == [
        "opening",
        "starting",
        "planning",
        "submitting",
        "labeling",
        "merging",
        "writing",
        "finishing",
    ]
    assert all(v >= 0 for v in res.phases.values())
    # the phases follow each other inside the run; what is left is closing and the statistics
    assert sum(res.phases.values()) <= res.seconds


@pytest.mark.parametrize("shape", [(48, 48), (48, 48, 48)])
def test_numbering_chain_has_one_task_per_level(tmp_path, shape):
    """The prefix sum over the chunks is the merge's critical path, one scheduler round trip
    per task: from a chunk's roots to the count there is one task per level and the count's
    own, and to a chunk's border finals one per level and its own."""
    from dask.core import get_dependencies

    from tilelabel.chunking import plan_for_storage
    from tilelabel.pipeline.graph import Source, build
    from tilelabel.pipeline.local import Labeler
    from tilelabel.storage.arrays import ZarrSource

    img = random_volume(shape, 0.3, 1, seed=4)
    storage = (16,) * len(shape)
    src = write_zarr(tmp_path / "in.zarr", img, storage)
    plan = plan_for_storage(img.shape, storage, storage)
    conn = 26 if len(shape) == 3 else 8
    graph = build(
        source=Source(lambda idx: ZarrSource(src)), plan=plan, labeler=Labeler("cpu", conn)
    )
    dsk = dict(graph.graph)

    def kind(key):
        return key[0].split("-")[1]

    @functools.cache
    def depth(key):  # tasks after the nearest roots up to and including ``key``
        if kind(key) == "roots":
            return 0
        below = [depth(d) for d in get_dependencies(dsk, key)]
        below = [b for b in below if b is not None]
        return 1 + max(below) if below else None

    count = next(k for k in dsk if kind(k) == "count")
    assert depth(count) == plan.ndim + 1
    assert max(depth(k) for k in dsk if kind(k) == "finals") == plan.ndim + 1


def test_the_gpu_may_compress_only_plain_outputs(tmp_path):
    """The writes' decision (from the output): a fit without the GPU's compression, or lead
    axes (an OME label image's t/c) whose chunks hold more than one position, leave the chunks
    to zarr."""
    from tilelabel.chunking import plan_for_storage
    from tilelabel.resources import RunPlan
    from tilelabel.resources.encoding import GPUEncoder
    from tilelabel.resources.gpu import GPUResources
    from tilelabel.resources.host import HostResources
    from tilelabel.storage import Created, RawChunks

    arr = zarr.create_array(tmp_path / "a.zarr", shape=(4, 8, 8), chunks=(2, 4, 4), dtype="u4")
    plan = plan_for_storage(arr.shape, arr.chunks, arr.chunks)

    def encoder(encode, lead=0, resources=None):
        resources = resources or GPUResources()
        created = Created(arr, str(tmp_path / "a.zarr"), (0,) * lead)
        return resources.encoder(RunPlan(plan, 0, 0, "zstd" if encode else None), created)

    assert encoder(True) == GPUEncoder(RawChunks("zstd", (2, 4, 4)))
    assert encoder(False) is None
    assert encoder(True, lead=2) is None
    assert encoder(True, resources=HostResources()) is None


@pytest.mark.parametrize("width", [510, 512])
def test_narrow_row_counts_sum_without_overflow(tmp_path, client, width):
    """Rows full of components (a 3D checkerboard under 6-connectivity): each row count is at
    its dtype's limit at 510 voxels (255 of uint8), 256 at 512 (uint16), and their sums over
    rows and chunks run far past it."""
    img = (np.indices((4, 5, 2 * width)).sum(axis=0) % 2 == 0).astype(np.uint8)
    src = write_zarr(tmp_path / "in.zarr", img, (2, 5, width))
    tilelabel.label_zarr(src, str(tmp_path / "out.zarr"), client=client, connectivity=6)
    want, n = expected(img, 6)
    assert n > 255 * 20
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], want)
