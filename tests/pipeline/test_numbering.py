import itertools

import numpy as np
import pytest

from tests.kernels.test_backends import BACKENDS
from tilelabel.kernels.backends import get_backend
from tilelabel.pipeline.numbering import LutSpec, assemble_offsets, build_lut, concat_offsets


def test_grouped_prefix_equals_flat_cumsum():
    """Levels of grouped prefixes reproduce the raster-order exclusive cumsum of row segments."""
    rng = np.random.default_rng(0)
    zc, yc, xg = (3, 1, 4), (2, 5), 3  # chunk sizes along z, y; chunks along x
    grid = (len(zc), len(yc), xg)
    counts = {
        idx: rng.integers(0, 5, size=(zc[idx[0]], yc[idx[1]], 1))
        for idx in itertools.product(*(range(g) for g in grid))
    }
    # reference: the full (Z, Y, xg) array of row-segment counts, prefix-summed in raster order
    full = np.block(
        [[[counts[(i, j, k)] for k in range(xg)] for j in range(len(yc))] for i in range(len(zc))]
    )
    ref = (np.cumsum(full.reshape(-1)) - full.reshape(-1)).reshape(full.shape)
    lvl1, tot1 = {}, {}
    for i, j in itertools.product(range(len(zc)), range(len(yc))):
        offs, tot1[(i, j)] = concat_offsets([counts[(i, j, k)] for k in range(xg)])
        for k in range(xg):
            lvl1[(i, j, k)] = offs[k]
    lvl2, tot2 = {}, {}
    for i in range(len(zc)):
        offs, tot2[(i,)] = concat_offsets([tot1[(i, j)] for j in range(len(yc))])
        for j in range(len(yc)):
            lvl2[(i, j)] = offs[j]
    offs3, total = concat_offsets([tot2[(i,)] for i in range(len(zc))])
    assert total == full.sum()
    for (i, j, k), o1 in lvl1.items():
        got = assemble_offsets([o1, lvl2[(i, j)], offs3[i]])
        z0, y0 = sum(zc[:i]), sum(yc[:j])
        np.testing.assert_array_equal(got, ref[z0 : z0 + zc[i], y0 : y0 + yc[j], k])


@pytest.mark.parametrize(
    "shapes",
    [[(6, 5, 1)] * 2, [(6, 5, 1)] * 8, [(4, 1)] * 3, [(3, 4, 7), (3, 4, 2)], [(5,), (3,)]],
)
def test_concat_offsets_is_the_exclusive_prefix_along_the_last_axis(shapes):
    rng = np.random.default_rng(len(shapes))
    parts = [rng.integers(0, 9, s).astype(np.int64) for s in shapes]
    prefixes, totals = concat_offsets(parts)
    whole = np.concatenate(parts, axis=-1)
    excl = np.cumsum(whole, axis=-1) - whole
    np.testing.assert_array_equal(np.concatenate(prefixes, axis=-1), excl)
    assert [p.shape for p in prefixes] == [p.shape for p in parts]
    np.testing.assert_array_equal(totals, whole.sum(axis=-1))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int64])
def test_prefixes_are_as_narrow_as_their_totals_and_never_wrap(dtype):
    """Row counts as narrow as dtypes.row_count_dtype, summed far past what they hold: the
    prefixes come back in the narrowest dtype of the group's totals, and assembled offsets in
    int64."""
    rng = np.random.default_rng(7)
    parts = [rng.integers(200, 256, (3, 4, 1)).astype(dtype) for _ in range(300)]
    prefixes, totals = concat_offsets(parts)
    assert totals.dtype == np.int64 and totals.min() > 65535  # past uint16
    assert all(p.dtype == np.uint32 for p in prefixes)
    whole = np.concatenate(parts, axis=-1).astype(np.int64)
    excl = np.cumsum(whole, axis=-1) - whole
    np.testing.assert_array_equal(np.concatenate(prefixes, axis=-1), excl)
    big = np.full((3, 4), 2**40, np.int64)  # the level above, past uint32
    got = assemble_offsets([prefixes[-1], big])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, excl[..., -1] + 2**40)


def test_a_spec_keeps_row_offsets_as_narrow_steps_within_planes():
    """Offsets of 4 planes of 5 rows, planes 2**40 apart (past uint32), rows at most 300 apart:
    steps of uint16, plane bases of int64, and the offsets and the lookup table exact."""
    rng = np.random.default_rng(3)
    steps = rng.integers(0, 301, (4, 5))
    offsets = np.cumsum(steps, axis=1) + (np.arange(4) * 2**40)[:, None]
    row_counts = rng.integers(0, 3, 20).astype(np.uint16)
    n = int(row_counts.sum())
    none = np.empty(0, np.int64)
    spec = LutSpec.of(n, row_counts, offsets, none, none, none)
    assert spec.row_step.dtype == np.uint16 and spec.row_step.shape == (4, 5)
    assert spec.plane_base.dtype == np.int64
    np.testing.assert_array_equal(spec.row_offsets(), offsets.reshape(-1))
    # every label is a root: row r's labels are numbered 1 + its offset + 0, 1, ...
    pairs = zip(offsets.reshape(-1), row_counts, strict=True)
    want = [0] + [1 + o + i for o, c in pairs for i in range(c)]
    np.testing.assert_array_equal(build_lut(spec, np.uint64), np.array(want, np.uint64))
    flat = LutSpec.of(n, row_counts, offsets.reshape(-1), none, none, none)  # one plane
    assert flat.row_step.dtype == np.uint64
    np.testing.assert_array_equal(flat.row_offsets(), offsets.reshape(-1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reorder", [False, True])
def test_the_lookup_table_numbers_roots_by_row_and_keeps_border_finals(backend, reorder):
    """Against its definition, label by label: a root is numbered 1 + its row's offset + the
    roots before it in the row; a border label takes its final; a dropped root, 0. Built with
    the backend's own array module."""
    rng = np.random.default_rng(11)
    row_counts = rng.integers(0, 4, 40).astype(np.uint16)
    row_counts[:3] = 0  # empty rows first, as in a chunk whose top rows hold no first voxel
    n = int(row_counts.sum())
    offsets = np.cumsum(rng.integers(0, 9, 40)).reshape(4, 10)
    ids = np.arange(1, n + 1)
    border = np.sort(rng.choice(ids, n // 3, replace=False))
    demoted = np.sort(rng.choice(border, border.size // 2, replace=False))
    finals = rng.integers(1, 1000, border.size)
    dropped = np.sort(rng.choice(np.setdiff1d(ids, border), 3, replace=False))
    spec = LutSpec.of(
        n, row_counts, offsets, np.sort(np.concatenate([demoted, dropped])), border, finals, dropped
    )
    row_of = np.repeat(np.arange(40), row_counts)
    want = np.zeros(n + 1, np.int64)
    for i in ids:
        r = row_of[i - 1]
        before = [j for j in ids[: i - 1] if row_of[j - 1] == r]
        roots = [j for j in before if j not in spec.demoted]
        want[i] = 1 + offsets.reshape(-1)[r] + len(roots)
    want[border] = finals
    want[dropped] = 0
    if reorder:
        spec.reorder = rng.permutation(int(want.max()) + 1)
        spec.reorder[0] = 0
        want = spec.reorder[want]
    be = get_backend(backend)
    with be.arrays() as xp:
        lut = build_lut(spec, np.dtype(np.uint32), xp)
    np.testing.assert_array_equal(be.to_host(lut), want)
