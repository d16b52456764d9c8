"""Statistics and size filtering through the pipeline, against scipy and scikit-image on the whole
volume: exact for labels, counts and boxes, to float tolerance for centroids and means."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage
from skimage.measure import regionprops_table

import tilelabel
from tests.cases import diagonal
from tests.conftest import write_zarr
from tilelabel.cli import main
from tilelabel.config import ConfigError, validate
from tilelabel.connectivity import CONNECTIVITIES, structure
from tilelabel.measure import PROPERTIES
from tilelabel.pipeline.stats import columns
from tilelabel.synth import random_volume

#: every property tilelabel's table shares with scikit-image's
IPROPS = PROPERTIES
PROPS = tuple(p for p in PROPERTIES if not p.startswith("intensity"))


def reference(img, conn, min_size=None, max_size=None):
    """scipy's labels of the volume without the components outside the size range."""
    labels, n = ndimage.label(img, structure(img.ndim, conn))
    if min_size is None and max_size is None:
        return labels, n
    size = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    keep = np.ones(n, bool)
    if min_size is not None:
        keep &= size >= min_size
    if max_size is not None:
        keep &= size <= max_size
    return ndimage.label(np.isin(labels, np.flatnonzero(keep) + 1), structure(img.ndim, conn))


def check_table(df, labels, intensity=None, spacing=None):
    """The table equals scikit-image's regionprops_table of the labels (with ``spacing``):
    exact for labels, counts and boxes, to float tolerance for what is computed from sums."""
    n = int(labels.max(initial=0))
    ndim = labels.ndim
    assert list(df.columns) == columns(ndim, intensity is not None, spacing)
    assert len(df) == n
    if n == 0:
        return
    ref = regionprops_table(
        labels,
        intensity_image=intensity,
        properties=IPROPS if intensity is not None else PROPS,
        spacing=spacing,
    )
    for col, want in ref.items():
        got = df[col].to_numpy()
        if col.startswith(("label", "num_pixels", "bbox")):
            np.testing.assert_array_equal(got, want, err_msg=col)
        elif col.startswith("axis_"):
            # the square root of a sum of eigenvalues: where that is 0 (a flat component),
            # both sides hold the root of rounding noise; their squares agree
            big = max(1.0, float(np.max(want)) ** 2)
            np.testing.assert_allclose(got**2, want**2, rtol=1e-9, atol=1e-9 * big, err_msg=col)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=col)
    if spacing is not None:
        for i in range(2 * ndim):
            np.testing.assert_allclose(df[f"bbox_scaled-{i}"], ref[f"bbox-{i}"] * spacing[i % ndim])
    if intensity is not None:
        sums = ndimage.sum_labels(intensity.astype(np.float64), labels, np.arange(1, n + 1))
        np.testing.assert_allclose(df["intensity_sum"].to_numpy(), sums, rtol=1e-12)


def lazy_case(img, chunks, conn, intensity=None, min_size=None, max_size=None, spacing=None):
    ref, rn = reference(img, conn, min_size, max_size)
    x = da.from_array(img, chunks=chunks)
    with dask.config.set(scheduler="sync"):
        df = tilelabel.regionprops(
            x,
            conn,
            intensity=intensity,
            min_size=min_size,
            max_size=max_size,
            spacing=spacing,
            backend="cpu",
        )
        labels, n = tilelabel.label(x, conn, backend="cpu", min_size=min_size, max_size=max_size)
        labels, n = dask.compute(labels, n)
    assert int(n) == rn
    np.testing.assert_array_equal(labels, ref)
    check_table(df, ref, intensity, spacing)


@pytest.mark.parametrize(
    "shape, chunks, conn",
    [
        ((23, 31, 29), (5, 7, 6), 26),
        ((23, 31, 29), (23, 31, 29), 26),
        ((23, 31, 29), (8, 11, 10), 6),
        ((23, 31, 29), (4, 16, 9), 18),
        ((61, 47), (9, 13), 8),
        ((61, 47), (1, 47), 4),
    ],
)
def test_lazy_stats_any_chunking(shape, chunks, conn):
    img = random_volume(shape, 0.15 if len(shape) == 3 else 0.4, 1, seed=sum(chunks))
    intensity = np.random.default_rng(conn).normal(10, 3, shape)
    spacing = (2.0, 0.5, 0.75)[-len(shape) :] if conn in (26, 8) else None
    lazy_case(img, chunks, conn, intensity, spacing=spacing)


@pytest.mark.parametrize(
    "shape, chunks, conn",
    [
        ((23, 31, 29), (5, 7, 6), 26),
        ((23, 31, 29), (8, 11, 10), 6),
        ((61, 47), (9, 13), 8),
        ((61, 47), (1, 47), 4),
    ],
)
def test_lazy_stats_nan_intensity(shape, chunks, conn):
    # a component with a NaN among its values (in any chunk it spans) has intensity_min and
    # intensity_max NaN, as scikit-image's np.min / np.max give; one with +inf and -inf and no
    # NaN: min -inf, max +inf, mean and sum NaN; NaN in the background touches no component
    img = random_volume(shape, 0.3 if len(shape) == 3 else 0.5, 2, seed=sum(shape))
    ref, n = reference(img, conn)
    rng = np.random.default_rng(conn)
    intensity = rng.normal(10, 3, shape)
    flat, v = ref.reshape(-1), intensity.reshape(-1)
    v[rng.choice(np.flatnonzero(flat), n // 3 + 1, replace=False)] = np.nan
    v[(flat == 0) & (rng.random(flat.size) < 0.1)] = np.nan
    size = np.bincount(flat, minlength=n + 1)
    clean = np.setdiff1d(np.flatnonzero(size >= 2), np.unique(flat[np.isnan(v)]))
    clean = clean[clean != 0]
    v[np.flatnonzero(flat == clean[-1])[[0, -1]]] = np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        want = regionprops_table(ref, intensity, properties=("intensity_min", "intensity_max"))
    assert 0 < np.isnan(want["intensity_min"]).sum() < n
    assert want["intensity_min"][clean[-1] - 1] == -np.inf
    assert want["intensity_max"][clean[-1] - 1] == np.inf
    lazy_case(img, chunks, conn, intensity)


@pytest.mark.parametrize(
    "min_size, max_size, chunks",
    [
        (2, None, (6, 7, 5)),
        (None, 3, (11, 12, 13)),
        (3, 30, (6, 7, 5)),
        (3, 30, (11, 12, 13)),
        (10**9, None, (11, 12, 13)),
        (0, 0, (6, 7, 5)),
    ],
)
def test_lazy_filtering(min_size, max_size, chunks):
    img = random_volume((22, 24, 26), 0.2, 1, seed=1) | diagonal((22, 24, 26))
    lazy_case(img, chunks, 26, None, min_size, max_size)
    lazy_case(img, chunks, 6, None, min_size, max_size)


def test_component_spanning_every_chunk_is_merged():
    img = np.zeros((20, 20, 20), np.uint8)
    img[2:18, 3:17, 1:19] = 1  # one box through 8 chunks, plus specks inside chunks
    img[0, 0, 0] = img[19, 19, 19] = img[0, 19, 5] = 1
    intensity = np.arange(img.size, dtype=np.int64).reshape(img.shape) % 97
    lazy_case(img, (10, 10, 10), 26, intensity)
    lazy_case(img, (10, 10, 10), 26, None, 2, None)


@st.composite
def volumes(draw):
    ndim = draw(st.sampled_from([2, 3]))
    shape = tuple(draw(st.integers(1, 10 if ndim == 3 else 20)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, s)) for s in shape)
    density = draw(st.sampled_from([0.1, 0.3, 0.5, 0.8]))
    seed = draw(st.integers(0, 2**31))
    conn = draw(st.sampled_from(CONNECTIVITIES[ndim]))
    lo = draw(st.sampled_from([None, 1, 2, 4]))
    hi = draw(st.sampled_from([None, 3, 8, 1000]))
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return random_volume(shape, density, 1, seed), chunks, conn, lo, hi, seed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volumes())
def test_random_volumes_chunkings_and_filters(case):
    img, chunks, conn, lo, hi, seed = case
    intensity = np.random.default_rng(seed).integers(0, 50, img.shape).astype(np.uint16)
    lazy_case(img, chunks, conn, intensity, lo, hi)


@pytest.mark.parametrize("ndim", [2, 3])
def test_in_memory_arrays(ndim):
    img = random_volume((33,) * ndim if ndim == 2 else (17, 19, 21), 0.3, 1, seed=ndim)
    intensity = np.random.default_rng(0).random(img.shape)
    for conn in CONNECTIVITIES[ndim]:
        ref, rn = reference(img, conn)
        check_table(tilelabel.regionprops(img, conn, intensity=intensity), ref, intensity)
        for lo, hi in ((2, None), (None, 2), (3, 9)):
            ref, rn = reference(img, conn, lo, hi)
            labels, n = tilelabel.label(img, conn, min_size=lo, max_size=hi)
            assert n == rn and labels.dtype == np.uint32
            np.testing.assert_array_equal(labels, ref)
            check_table(tilelabel.regionprops(img, conn, min_size=lo, max_size=hi), ref)


def test_empty_and_all_dropped():
    img = np.zeros((9, 9, 9), np.uint8)
    check_table(tilelabel.regionprops(img), img.astype(np.int32))
    check_table(tilelabel.regionprops(da.from_array(img, chunks=4)), img.astype(np.int32))
    img[1, 1, 1] = img[5, 5, 5] = 1
    labels, n = tilelabel.label(da.from_array(img, chunks=4), min_size=2)
    assert int(n.compute()) == 0 and not labels.compute().any()


def test_bad_arguments():
    img = np.ones((4, 4), np.uint8)
    with pytest.raises(ValueError, match="min_size"):
        tilelabel.label(img, min_size=-1)
    with pytest.raises(ValueError, match="larger than max_size"):
        tilelabel.label(img, min_size=5, max_size=4)
    with pytest.raises(ValueError, match="intensity shape"):
        tilelabel.regionprops(img, intensity=np.ones((4, 5)))


@pytest.mark.parametrize(
    "shape, storage, chunks, conn",
    [((40, 37, 29), (8, 9, 10), (16, 18, 20), 26), ((130, 97), (16, 16), (32, 48), 4)],
)
def test_zarr_stats_frame_and_intensity(tmp_path, client, shape, storage, chunks, conn):
    img = random_volume(shape, 0.15 if len(shape) == 3 else 0.4, 1, seed=5)
    intensity = np.random.default_rng(0).integers(0, 255, shape).astype(np.uint8)
    src = write_zarr(tmp_path / "in.zarr", img, storage)
    isrc = write_zarr(tmp_path / "int.zarr", intensity, tuple(s // 2 + 1 for s in storage))
    n, df = tilelabel.label_zarr(
        src,
        str(tmp_path / "out.zarr"),
        connectivity=conn,
        chunks=chunks,
        backend="cpu",
        client=client,
        stats=True,
        intensity=isrc,
    )
    ref, rn = reference(img, conn)
    assert n == rn
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"))[...], ref)
    check_table(df, ref, intensity)


def test_zarr_filter_writes_parquet(tmp_path, client):
    img = random_volume((40, 37, 29), 0.15, 1, seed=8) | diagonal((40, 37, 29))
    src = write_zarr(tmp_path / "in.zarr", img, (8, 9, 10))
    path = tmp_path / "stats.parquet"
    n = tilelabel.label_zarr(
        src,
        str(tmp_path / "out.zarr"),
        chunks=(8, 9, 10),
        client=client,
        stats=str(path),
        min_size=3,
        max_size=200,
    )
    ref, rn = reference(img, 26, 3, 200)
    assert n == rn
    out = zarr.open_array(str(tmp_path / "out.zarr"))
    np.testing.assert_array_equal(out[...], ref)
    assert out.attrs["tilelabel"]["components"] == rn
    assert out.attrs["tilelabel"]["min_size"] == 3
    check_table(pd.read_parquet(path), ref)


def test_zarr_table_of_nothing(tmp_path, client):
    img = np.zeros((16, 16, 16), np.uint8)
    img[3, 3, 3] = 1
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    path = tmp_path / "s.parquet"
    n = tilelabel.label_zarr(
        src, str(tmp_path / "out.zarr"), client=client, stats=str(path), min_size=2
    )
    assert n == 0
    check_table(pd.read_parquet(path), np.zeros(img.shape, np.int32))


def test_cli_stats_and_filter(tmp_path, client, capsys):
    img = random_volume((24, 24, 24), 0.15, 1, seed=3)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    ints = write_zarr(tmp_path / "int.zarr", (img * 7).astype(np.int16), (12, 12, 12))
    path = tmp_path / "s.parquet"
    args = [
        "label",
        src,
        str(tmp_path / "out.zarr"),
        "--stats",
        str(path),
        "--intensity",
        ints,
        "--min-size",
        "2",
        "--scheduler",
        client.scheduler.address,
        "-q",
    ]
    assert main(args) == 0
    ref, rn = reference(img, 26, 2)
    assert f"{rn:,} components" in capsys.readouterr().out
    check_table(pd.read_parquet(path), ref, (img * 7).astype(np.int16))
    assert main(["label", src, str(tmp_path / "o2.zarr"), "--min-size", "4", "--max-size", "2"])
    assert "larger than max_size" in capsys.readouterr().err


def test_config_keys():
    opts = validate({"stats": "s.parquet", "min-size": 5, "max_size": 9, "intensity": "i.zarr"})
    assert opts == {"stats": "s.parquet", "min_size": 5, "max_size": 9, "intensity": "i.zarr"}
    with pytest.raises(ConfigError, match="min_size"):
        validate({"min_size": -1})


def test_spacing_keys_flags_and_refusals(tmp_path, client, capsys):
    opts = validate({"spacing": "2,0.5,0.5", "largest-k": 3, "order": "size", "stats": "s.pq"})
    assert opts["spacing"] == (2.0, 0.5, 0.5) and opts["largest_k"] == 3
    for bad in ([1, 0], [1, "a"], [], [True, 1], [1, float("inf")]):
        with pytest.raises(ConfigError, match="positive numbers, one per axis"):
            validate({"spacing": bad})
    img = random_volume((24, 24, 24), 0.15, 1, seed=4)
    src = write_zarr(tmp_path / "in.zarr", img, (8, 8, 8))
    path = tmp_path / "s.parquet"
    sched = ["--scheduler", client.scheduler.address, "-q"]
    args = ["label", src, str(tmp_path / "out.zarr"), "--stats", str(path), "--spacing", "2,1,0.5"]
    assert main([*args, *sched]) == 0
    check_table(pd.read_parquet(path), reference(img, 26)[0], spacing=(2.0, 1.0, 0.5))
    assert main(["label", src, str(tmp_path / "o2.zarr"), "--spacing", "2,1,0.5", *sched]) == 2
    assert "spacing is only used by the statistics" in capsys.readouterr().err
    args = ["label", src, str(tmp_path / "o3.zarr"), "--stats", str(path), "--spacing", "2,1"]
    assert main([*args, *sched]) == 2
    assert "has 2 values for 3 axes" in capsys.readouterr().err
