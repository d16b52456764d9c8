"""``dust``: a segmentation's own values without its components of fewer than N voxels, as
``cc3d.dust`` gives them, chunk by chunk on either backend."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import tilelabel
from tests.kernels.test_backends import BACKENDS

cc3d = pytest.importorskip("cc3d")


def segmentation(shape, seed: int, dtype=np.uint16) -> np.ndarray:
    rng = np.random.default_rng(seed)
    seg = rng.integers(0, 4, shape).astype(dtype)
    seg[seg == 3] = 0
    return seg


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "dtype, chunks, conn, threshold, invert",
    [
        (np.uint16, (32, 16, 16), 26, 3, False),
        (np.int8, (16, 48, 8), 6, 4, False),
        (np.uint64, (64, 16, 40), 18, 3, True),
        (np.uint32, (16, 16, 8), 26, 1, True),
    ],
)
def test_dust_equals_cc3d_s(tmp_path, backend, dtype, chunks, conn, threshold, invert):
    seg = segmentation((64, 48, 40), seed=conn + threshold, dtype=dtype)
    src = str(tmp_path / "seg.zarr")
    zarr.create_array(src, data=seg, chunks=(16, 16, 8))
    out = str(tmp_path / "out.zarr")
    n = tilelabel.label_zarr(
        src, out, dust=threshold, invert=invert, connectivity=conn, chunks=chunks,
        backend=backend,
    )  # fmt: skip
    want, n_want = cc3d.dust(seg, threshold, conn, invert=invert, return_N=True)
    got = zarr.open_array(out)
    assert got.dtype == seg.dtype and n == n_want
    np.testing.assert_array_equal(got[...], want)
    assert got.attrs["tilelabel"]["dust"] == threshold


def test_dust_refuses_what_it_does_not_go_with_and_a_resume_without_it(tmp_path):
    seg = segmentation((32, 32, 16), seed=1)
    src, out = str(tmp_path / "seg.zarr"), str(tmp_path / "out.zarr")
    zarr.create_array(src, data=seg, chunks=(16, 16, 16))
    with pytest.raises(ValueError, match=r"does not go with min_size \(--min-size\)"):
        tilelabel.label_zarr(src, out, dust=3, min_size=2)
    with pytest.raises(ValueError, match="invert goes with dust"):
        tilelabel.label_zarr(src, out, invert=True)
    tilelabel.label_zarr(src, out, dust=3)
    with pytest.raises(ValueError, match="made with dust=3 where this run has dust=None"):
        tilelabel.label_zarr(src, out, multilabel=True, min_size=3, resume=True)
