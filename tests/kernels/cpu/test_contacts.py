"""The contacts kernel (region graph, contact counts and areas) against cc3d, exactly."""

from __future__ import annotations

import itertools

import cc3d
import numpy as np
import pytest

from tilelabel.kernels.cpu import contacts as ct

CONNECTIVITIES = [(2, 4), (2, 8), (3, 6), (3, 18), (3, 26)]
DTYPES = [np.uint8, np.uint16, np.uint32, np.int64]
# dyadic weights: cc3d's float32 sums of them are exact, so its areas compare tightly
SPACING = (0.5, 1.25, 2.0)


def volume(shape, labels: int, grain: int, dtype, seed: int, background: float = 0.3):
    """Random labels 1..``labels`` in blocks of ``grain`` voxels, a share ``background`` of
    them 0: sparse (few labels, large blocks) or dense (many labels, single voxels)."""
    rng = np.random.default_rng(seed)
    cells = tuple(-(-s // grain) for s in shape)
    vol = rng.integers(1, labels + 1, cells)
    vol[rng.random(cells) < background] = 0
    for axis in range(len(shape)):
        vol = np.repeat(vol, grain, axis=axis)
    return vol[tuple(slice(0, s) for s in shape)].astype(dtype)


def neighbourhood(ndim: int, conn: int):
    """The forward offsets (first nonzero component +1), written out here afresh."""
    most = {4: 1, 8: 2, 6: 1, 18: 2, 26: 3}[conn]
    out = []
    for s in itertools.product((-1, 0, 1), repeat=ndim):
        nz = [c for c in s if c]
        if nz and len(nz) <= most and nz[0] == 1:
            out.append(s)
    return out


def reference(labels, conn: int, spacing=None, wrap: bool = False):
    """(pairs, counts, areas) in numpy: the image's middle copy in a 3x larger one (tiled for
    periodic boundaries, else zeros around), each forward offset one shifted slice."""
    nd = labels.ndim
    sp = np.ones(nd) if spacing is None else np.asarray(spacing, float)
    shape = [3 * n for n in labels.shape]
    big = np.tile(labels, (3,) * nd) if wrap else np.zeros(shape, labels.dtype)
    big[tuple(slice(n, 2 * n) for n in labels.shape)] = labels
    los, his, weights = [], [], []
    for s in neighbourhood(nd, conn):
        b = big[tuple(slice(n + d, 2 * n + d) for n, d in zip(labels.shape, s, strict=True))]
        m = (labels != b) & (labels != 0) & (b != 0)
        los.append(np.minimum(labels[m], b[m]))
        his.append(np.maximum(labels[m], b[m]))
        face = [i for i, d in enumerate(s) if d]
        w = float(np.prod(np.delete(sp, face[0]))) if len(face) == 1 else 0.0
        weights.append(np.full(int(m.sum()), w))
    pairs = np.stack([np.concatenate(los), np.concatenate(his)], axis=1)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    counts = np.bincount(inv, minlength=len(uniq))
    areas = np.bincount(inv, np.concatenate(weights), minlength=len(uniq))
    return uniq.reshape(-1, 2), counts, areas


def same(got, want, rtol=1e-12) -> None:
    """Equal pairs and counts, areas to ``rtol``."""
    np.testing.assert_array_equal(got[0].astype(object), want[0].astype(object))
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=rtol, atol=0)


def as_dict(result) -> dict:
    pairs, counts, areas = result
    return {
        (a, b): (c, s)
        for (a, b), c, s in zip(pairs.tolist(), counts.tolist(), areas.tolist(), strict=True)
    }


def check_result(result, dtype) -> None:
    """The result's form: sorted unique pairs a < b of the promised dtypes."""
    pairs, counts, areas = result
    assert pairs.dtype == (np.int64 if np.dtype(dtype).kind == "i" else np.uint64)
    assert counts.dtype == np.int64 and areas.dtype == np.float64
    assert pairs.shape == (len(counts), 2) and areas.shape == counts.shape
    assert np.all(pairs[:, 0] < pairs[:, 1]) and np.all(counts > 0)
    if len(pairs) > 1:
        p = pairs.tolist()
        assert all(x < y for x, y in itertools.pairwise(p))  # strictly sorted: unique


def cc3d_excess(labels, conn: int) -> dict:
    """What cc3d 4.1.1 counts more than once, at the image's edge (its counts only): it clamps
    an out-of-bounds neighbour offset to 0 per axis. 8: face pairs along axis 0 in axis 1's
    first line twice more, along axis 1 in axis 0's first and last line once more each; 26:
    edge pairs of offset (0, 1, +-1) in axis 0's first and last plane once more each."""
    out: dict = {}

    def add(a, b, times=1):
        m = (a != b) & (a != 0) & (b != 0)
        for x, y in zip(
            np.minimum(a[m], b[m]).tolist(), np.maximum(a[m], b[m]).tolist(), strict=True
        ):
            out[(x, y)] = out.get((x, y), 0) + times

    if conn == 8:
        line = labels[:, 0]
        add(line[:-1], line[1:], 2)
        for edge in (labels[0, :], labels[-1, :]):
            add(edge[:-1], edge[1:])
    elif conn == 26:
        for plane in (labels[0], labels[-1]):
            add(plane[:-1, :-1], plane[1:, 1:])
            add(plane[:-1, 1:], plane[1:, :-1])
    return out


def cc3d_dicts(labels, conn: int, spacing):
    an = tuple(spacing) + (1.0,) * (3 - len(spacing))
    counts = cc3d.contacts(labels, connectivity=conn, surface_area=False)
    areas = cc3d.contacts(labels, connectivity=conn, surface_area=True, anisotropy=an)
    return counts, areas, cc3d.region_graph(labels, connectivity=conn)


def cases(nd: int, dtype):
    """(shape, labels, grain, seed) of sparse and dense images, odd shapes, size-1 axes."""
    top = min(np.iinfo(dtype).max, 5000)
    if nd == 2:
        shapes = [(17, 23), (1, 9), (9, 1), (2, 31), (40, 3)]
    else:
        shapes = [(9, 11, 13), (1, 7, 9), (7, 1, 5), (6, 8, 1), (1, 1, 12), (2, 3, 19)]
    for i, shape in enumerate(shapes):
        yield shape, 3, 3, i  # sparse: a few labels in blocks
        yield shape, top, 1, i  # dense: many labels, voxel by voxel


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("nd", "conn"), CONNECTIVITIES)
def test_against_cc3d(nd, conn, dtype):
    """Counts, areas (non-unit anisotropy) and the pair set equal cc3d's on the image with a
    zero border (where cc3d counts every voxel pair once), and the numpy reference on the
    image itself; cc3d's pairs are those of the image itself too."""
    spacing = SPACING[:nd]
    for shape, labels, grain, seed in cases(nd, dtype):
        img = volume(shape, labels, grain, dtype, seed)
        got = ct.contacts(img, conn, spacing)
        check_result(got, dtype)
        mine = as_dict(got)
        counts, areas, graph = cc3d_dicts(np.pad(img, 1), conn, spacing)
        assert {k: c for k, (c, _) in mine.items()} == {k: int(v) for k, v in counts.items()}
        assert set(mine) == set(areas) == graph == cc3d.region_graph(img, connectivity=conn)
        keys = sorted(mine)
        np.testing.assert_allclose(
            [mine[k][1] for k in keys], [areas[k] for k in keys], rtol=1e-12, atol=0
        )
        same(got, reference(img, conn, spacing))


@pytest.mark.parametrize(("nd", "conn"), CONNECTIVITIES)
def test_cc3d_at_the_edge(nd, conn):
    """On the image itself (labels at its edge), cc3d's counts are this kernel's plus its
    double counts at the edge (:func:`cc3d_excess`, 8 and 26 only), and its areas (which those
    do not touch) and pairs are this kernel's; anisotropy that float32 does not hold exactly
    compares to float32's precision."""
    spacing = (0.3, 1.7, 2.9)[:nd]
    shapes = [(13, 17), (1, 11), (8, 1), (2, 2)] if nd == 2 else [(7, 9, 11), (1, 6, 7), (5, 1, 1)]
    for seed, shape in enumerate(shapes):
        for labels, grain in ((4, 2), (300, 1)):
            img = volume(shape, labels, grain, np.uint32, seed, background=0.1)
            mine = as_dict(ct.contacts(img, conn, spacing))
            counts, areas, graph = cc3d_dicts(img, conn, spacing)
            extra = cc3d_excess(img, conn)
            want = {k: int(v) - extra.get(k, 0) for k, v in counts.items()}
            assert {k: c for k, (c, _) in mine.items()} == want
            assert set(mine) == set(areas) == graph
            keys = sorted(mine)
            np.testing.assert_allclose(
                [mine[k][1] for k in keys], [areas[k] for k in keys], rtol=2e-6, atol=0
            )


def test_signed_and_wide_labels():
    """Negative labels pair and sort by their signed values (int64 pairs, as cc3d's keys);
    uint64 labels past 2^63 and uint32 ones up to 2^32 - 1 keep every bit."""
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        img = volume((6, 7, 8), 9, 1, dtype, 1, background=0.2)
        img = np.where(img % 2 == 1, -img, img).astype(dtype)
        img[0, 0, 0] = np.iinfo(dtype).min
        got = ct.contacts(img, 26)
        check_result(got, dtype)
        counts = cc3d.contacts(np.pad(img, 1), connectivity=26, surface_area=False)
        assert {k: c for k, (c, _) in as_dict(got).items()} == {
            k: int(v) for k, v in counts.items()
        }
    for dtype, base in ((np.uint64, 2**63), (np.uint64, 2**40), (np.uint32, 2**32 - 12)):
        small = volume((5, 6, 7), 11, 1, np.uint64, 2, background=0.2)
        img = np.where(small > 0, small + np.uint64(base), 0).astype(dtype)
        got = ct.contacts(img, 18, SPACING)
        check_result(got, dtype)
        same(got, reference(img, 18, SPACING))


def test_uint64_counts():
    """The table of uint64 counts and one packed key word (a core too large for uint32
    counts) counts as the narrow one does."""
    img = volume((10, 12, 14), 500, 1, np.uint32, 3)
    narrow = ct.contacts(img, 26, SPACING)
    old = ct._COUNT32
    try:
        ct._COUNT32 = 0
        wide = ct.contacts(img, 26, SPACING)
    finally:
        ct._COUNT32 = old
    for x, y in zip(narrow, wide, strict=True):
        np.testing.assert_array_equal(x, y)


def test_many_pairs():
    """More pairs than the table's first size: it doubles (several times) mid-scan."""
    img = volume((24, 30, 36), 200_000, 1, np.uint32, 4, background=0.05)
    got = ct.contacts(img, 26)
    assert len(got[0]) > 100_000
    same(got, reference(img, 26))


def cut(n: int, rng) -> list[int]:
    """Random chunk boundaries 0 = b0 < b1 < ... = n (chunks of 1 voxel and more)."""
    k = int(rng.integers(0, min(n, 4)))
    inner = sorted(rng.choice(np.arange(1, n), size=k, replace=False).tolist()) if n > 1 else []
    return [0, *inner, n]


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize(("nd", "conn"), CONNECTIVITIES)
def test_chunks_add_up(nd, conn, wrap):
    """Cut into arbitrary chunks, each framed with its neighbours' voxels (zeros at the
    volume's edge, or the far side's for periodic boundaries), the chunks' merged results are
    the whole volume's."""
    rng = np.random.default_rng(conn + 10 * wrap)
    shapes = [(13, 19), (1, 12), (5, 1)] if nd == 2 else [(9, 10, 11), (1, 6, 9), (7, 1, 2)]
    for shape in shapes:
        for labels, grain in ((5, 2), (900, 1)):
            img = volume(shape, labels, grain, np.uint16, int(rng.integers(1 << 30)))
            whole = ct.contacts(img, conn, SPACING[:nd], wrap=wrap)
            padded = np.pad(img, 1, mode="wrap" if wrap else "constant")
            bounds = [cut(n, rng) for n in shape]
            parts = []
            for idx in itertools.product(*[range(len(b) - 1) for b in bounds]):
                lo = [b[i] for b, i in zip(bounds, idx, strict=True)]
                hi = [b[i + 1] for b, i in zip(bounds, idx, strict=True)]
                framed = padded[tuple(slice(a, b + 2) for a, b in zip(lo, hi, strict=True))]
                parts.append(ct.contacts_framed(framed, conn, SPACING[:nd]))
            merged = ct.merge(parts)
            np.testing.assert_array_equal(merged[0], whole[0])
            np.testing.assert_array_equal(merged[1], whole[1])
            np.testing.assert_allclose(merged[2], whole[2], rtol=1e-12)


@pytest.mark.parametrize(("nd", "conn"), CONNECTIVITIES)
def test_periodic(nd, conn):
    """cc3d's contacts have no periodic boundaries: ``wrap`` is checked against the middle
    copy of the image tiled 3 times along every axis (sizes 1 and 2 included, where a voxel
    pair counts once per offset that joins it)."""
    shapes = [(11, 14), (1, 7), (2, 5)] if nd == 2 else [(6, 7, 8), (1, 5, 6), (2, 2, 7)]
    for seed, shape in enumerate(shapes):
        for labels, grain in ((4, 2), (700, 1)):
            img = volume(shape, labels, grain, np.uint32, seed)
            got = ct.contacts(img, conn, SPACING[:nd], wrap=True)
            check_result(got, np.uint32)
            same(got, reference(img, conn, SPACING[:nd], wrap=True))


def test_frame_is_pad():
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (3, 1), (2, 3, 1), (4, 5, 6)]:
        img = rng.integers(0, 9, shape).astype(np.uint16)
        for wrap in (False, True):
            want = np.pad(img, 1, mode="wrap" if wrap else "constant")
            np.testing.assert_array_equal(ct.frame(img, wrap), want)


def test_layouts_and_bool():
    """Memory order and strides do not matter; a bool image has one label and no pairs."""
    img = volume((8, 9, 10), 50, 1, np.uint32, 5)
    want = as_dict(ct.contacts(img, 26))
    assert as_dict(ct.contacts(np.asfortranarray(img), 26)) == want
    assert as_dict(ct.contacts(img[::-1, :, ::-1].copy()[::-1, :, ::-1], 26)) == want
    assert as_dict(ct.contacts(img.astype(">u4"), 26)) == want
    pairs, counts, areas = ct.contacts(img > 0, 26)
    assert pairs.shape == (0, 2) and pairs.dtype == np.uint64 and counts.size == areas.size == 0


def test_offsets_and_merge():
    for nd, conn in CONNECTIVITIES:
        offs, cls = ct.forward_offsets(nd, conn)
        full = {tuple(o) for o in offs} | {tuple(-o) for o in offs}
        assert len(full) == conn == 2 * len(offs)
        assert all((c == nd) == (np.count_nonzero(o) > 1) for o, c in zip(offs, cls, strict=True))
    empty = ct.merge([])
    assert empty[0].shape == (0, 2) and empty[1].size == 0
    img = volume((6, 7, 8), 30, 1, np.uint8, 6)
    one = ct.contacts(img, 6, SPACING)
    twice = ct.merge([one, ct.contacts(np.zeros((3, 3, 3), np.uint8), 6), one])
    np.testing.assert_array_equal(twice[0], one[0])
    np.testing.assert_array_equal(twice[1], 2 * one[1])
    np.testing.assert_allclose(twice[2], 2 * one[2])
    assert ct.contacts(np.zeros((0, 4), np.uint8), 4)[0].shape == (0, 2)
    assert ct.contacts_framed(np.zeros((2, 5, 5), np.uint8), 6)[1].size == 0


def test_errors():
    img = np.zeros((4, 4, 4), np.uint32)
    with pytest.raises(ValueError, match="connectivity"):
        ct.contacts(img, 8)
    with pytest.raises(ValueError, match="connectivity"):
        ct.contacts(img[0], 6)
    with pytest.raises(ValueError, match="connectivity"):
        ct.contacts(img[0, 0], 2)
    with pytest.raises(ValueError, match="integer"):
        ct.contacts(img.astype(np.float32), 6)
    with pytest.raises(ValueError, match="at least 2"):
        ct.contacts_framed(np.zeros((1, 4, 4), np.uint32), 6)
