"""Continuous values (cc3d's ``delta``) through the pipeline: random volumes and chunkings
against cc3d and a brute-force oracle, exactly, on numpy, dask arrays and zarr stores, with
periodic boundaries, statistics, NaN, the command line and a resume."""

from __future__ import annotations

import itertools

import cc3d
import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilelabel
from tests.conftest import write_zarr
from tilelabel.cli import main
from tilelabel.connectivity import structure
from tilelabel.kernels.cpu.continuous import join_rule, prepare

DTYPES = [np.uint8, np.int16, np.uint32, np.float32, np.float64]


def volume(shape, dtype, seed: int, background: float = 0.25) -> np.ndarray:
    """Values 0..9 (floats with fractions), a ``background`` fraction of them 0."""
    rng = np.random.default_rng(seed)
    vol = (rng.random(shape) * 10).astype(dtype)
    vol[rng.random(shape) < background] = 0
    return vol


def brute_force(img: np.ndarray, conn: int, delta: float, wrap=()) -> tuple[np.ndarray, int]:
    """Every voxel pair of the structure tried (across the ``wrap``ped axes' ends too), joined
    by the continuous rule, the components numbered by first voxel: the definition itself."""
    values, d, z = prepare(img, delta)
    flat = values.reshape(-1)
    parent = np.arange(img.size)

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    offsets = [o for o in zip(*np.nonzero(structure(img.ndim, conn)), strict=True)]
    for p in itertools.product(*(range(s) for s in img.shape)):
        i = np.ravel_multi_index(p, img.shape)
        for o in offsets:
            q = []
            for ax, (c, s) in enumerate(zip(p, o, strict=True)):
                c += int(s) - 1
                if ax in wrap:
                    c %= img.shape[ax]
                elif not 0 <= c < img.shape[ax]:
                    break
                q.append(c)
            else:
                j = np.ravel_multi_index(tuple(q), img.shape)
                if join_rule(flat[i], flat[j], d, z):
                    a, b = root(i), root(j)
                    parent[max(a, b)] = min(a, b)
    labels = np.zeros(img.size, np.int64)
    n = 0
    for i in range(img.size):
        if flat[i] != z:
            r = root(i)
            if r == i:
                n += 1
                labels[i] = n
            else:
                labels[i] = labels[r]
    return labels.reshape(img.shape), n


def _chunks(data, shape) -> tuple[int, ...]:
    return tuple(data.draw(st.integers(1, max(1, s))) for s in shape)


@pytest.mark.parametrize("nd, conn", [(2, 4), (3, 6), (3, 18), (3, 26)])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_dask_chunkings_equal_cc3d(nd, conn, data):
    shape = tuple(data.draw(st.integers(1, 12 if nd == 3 else 30)) for _ in range(nd))
    img = volume(shape, data.draw(st.sampled_from(DTYPES)), data.draw(st.integers(0, 99)))
    delta = data.draw(st.sampled_from([0, 1, 2.5, 9]))
    x = da.from_array(img, chunks=_chunks(data, shape))
    labels, n = tilelabel.label(x, conn, delta=delta)
    with dask.config.set(scheduler="sync"):
        labels, n = dask.compute(labels, n)
    ref, rn = cc3d.connected_components(img, connectivity=conn, delta=delta, return_N=True)
    assert int(n) == rn
    np.testing.assert_array_equal(labels, ref)


@pytest.mark.parametrize("nd, conn", [(2, 8), (3, 26), (3, 6)])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_periodic_equals_the_definition(nd, conn, data):
    """Numpy in memory and dask in chunks, every axis or one wrapped, against every voxel pair
    tried (2D at 8 too, where cc3d strays from its rule)."""
    shape = tuple(data.draw(st.integers(1, 7 if nd == 3 else 14)) for _ in range(nd))
    img = volume(shape, data.draw(st.sampled_from(DTYPES)), data.draw(st.integers(0, 99)))
    delta = data.draw(st.sampled_from([0, 1.5, 4]))
    wrap = data.draw(st.sampled_from([(), tuple(range(nd)), (nd - 1,)]))
    ref, rn = brute_force(img, conn, delta, wrap)
    labels, n = tilelabel.label(img, conn, delta=delta, wrap_axes=wrap)
    assert n == rn
    np.testing.assert_array_equal(labels, ref)
    x = da.from_array(img, chunks=_chunks(data, shape))
    lazy, count = tilelabel.label(x, conn, delta=delta, wrap_axes=wrap)
    with dask.config.set(scheduler="sync"):
        lazy, count = dask.compute(lazy, count)
    assert int(count) == rn
    np.testing.assert_array_equal(lazy, ref)


def test_nan_voxels_are_components_of_their_own():
    img = np.full((6, 9), 2.0, np.float32)
    img[2, 3] = img[4, 7] = np.nan
    labels, n = tilelabel.label(da.from_array(img, chunks=(3, 4)), 8, delta=1)
    with dask.config.set(scheduler="sync"):
        labels, n = dask.compute(labels, n)
    ref, rn = brute_force(img, 8, 1)
    assert int(n) == rn == 3
    np.testing.assert_array_equal(labels, ref)


def test_label_zarr_with_statistics_and_resume(tmp_path, client):
    img = volume((30, 34, 40), np.float32, seed=4, background=0.4)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    out = str(tmp_path / "out.zarr")
    n, table = tilelabel.label_zarr(
        src, out, connectivity=26, delta=1.5, chunks=(16, 16, 24), stats=True, client=client
    )
    ref, rn = cc3d.connected_components(img, connectivity=26, delta=1.5, return_N=True)
    arr = zarr.open_array(out)
    assert n == rn and arr.attrs["tilelabel"]["delta"] == 1.5
    np.testing.assert_array_equal(arr[...], ref)
    # no one value per component: the table has none
    assert "value" not in table.columns
    assert list(table["num_pixels"]) == list(np.bincount(ref.ravel())[1:])
    with pytest.raises(ValueError, match="delta"):  # not resumed with another delta
        tilelabel.label_zarr(src, out, connectivity=26, delta=2, resume=True, client=client)


def test_refused_where_it_cannot_run(tmp_path, client):
    src = write_zarr(tmp_path / "in.zarr", np.ones((8, 8), np.uint8), (4, 4))
    out = str(tmp_path / "out.zarr")
    for options, match in (
        ({"dust": 3}, "dust"),
        ({"algorithm": "bke"}, "algorithm"),
    ):
        with pytest.raises(ValueError, match=match):
            tilelabel.label_zarr(src, out, delta=1, client=client, **options)
        assert not (tmp_path / "out.zarr").exists()
    with pytest.raises(ValueError, match="delta"):
        tilelabel.label_zarr(src, out, delta=-1, client=client)


def test_cli_flag(tmp_path, cluster):
    img = volume((40, 50), np.int16, seed=7)
    src = write_zarr(tmp_path / "in.zarr", img, (16, 16))
    flags = ["--scheduler", cluster.scheduler_address, "-q"]
    assert main(["label", src, str(tmp_path / "a.zarr"), "--delta", "2", "-c", "4", *flags]) == 0
    ref = cc3d.connected_components(img, connectivity=4, delta=2)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"))[...], ref)
