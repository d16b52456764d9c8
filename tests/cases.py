"""Case families shared by the kernel and pipeline tests (CPU and GPU).

Each family yields ``(name, image)`` with ``image`` a uint8 array of 0/1; tests compare every
labeling against ``scipy.ndimage.label`` with the matching structure.
"""

from __future__ import annotations

import numpy as np

from tilelabel.synth import random_volume


def spiral(n: int) -> np.ndarray:
    """A one-voxel-wide square spiral: a single long component that winds back on itself."""
    img = np.zeros((n, n), np.uint8)
    y = x = 0
    img[0, 0] = 1
    steps = [(0, 1), (1, 0), (0, -1), (-1, 0)]
    lengths = [n - 1, n - 1, n - 1]
    k = n - 3
    while k > 0:
        lengths += [k, k]
        k -= 2
    for i, length in enumerate(lengths):
        dy, dx = steps[i % 4]
        for _ in range(length):
            y, x = y + dy, x + dx
            img[y, x] = 1
    return img


def checkerboard(shape: tuple[int, ...], period: int = 1) -> np.ndarray:
    grids = np.indices(shape)
    return ((sum(g // period for g in grids) % 2) == 0).astype(np.uint8)


def corners(shape: tuple[int, ...]) -> np.ndarray:
    """Single voxels at every corner of the array."""
    img = np.zeros(shape, np.uint8)
    for c in np.ndindex(*(2,) * len(shape)):
        img[tuple(0 if b == 0 else s - 1 for b, s in zip(c, shape, strict=True))] = 1
    return img


def diagonal(shape: tuple[int, ...]) -> np.ndarray:
    """A one-voxel diagonal line: connected only through corners (edges in 2D)."""
    img = np.zeros(shape, np.uint8)
    k = min(shape)
    img[tuple(np.arange(k) for _ in shape)] = 1
    return img


def families(ndim: int, size: int = 37, seed: int = 0):
    """The standard case families for ``ndim`` at a modest size (odd on purpose)."""
    shape = (size,) * ndim
    yield "empty", np.zeros(shape, np.uint8)
    yield "full", np.ones(shape, np.uint8)
    yield "checker1", checkerboard(shape, 1)
    yield "checker2", checkerboard(shape, 2)
    yield "corners", corners(shape)
    yield "diagonal", diagonal(shape)
    if ndim == 2:
        yield "spiral", spiral(size)
    else:
        yield "spiral-stack", np.stack([spiral(size)] * 3 + [np.zeros((size, size), np.uint8)] * 2)
    for density in (0.05, 0.2, 0.5, 0.8):
        for granularity in (1, 2, 4):
            yield (
                f"random-d{density}-g{granularity}",
                random_volume(shape, density, granularity, seed=seed + granularity),
            )
    # thin and odd shapes
    thin = [(1,) * (ndim - 1) + (size,), (size,) + (1,) * (ndim - 1), (2,) * (ndim - 1) + (size,)]
    thin += [tuple(3 + 2 * i for i in range(ndim)), tuple(4 + 3 * i for i in range(ndim))[::-1]]
    for i, s in enumerate(thin):
        yield f"thin{i}-{'x'.join(map(str, s))}", random_volume(s, 0.5, 1, seed=seed + 100 + i)
    single = np.zeros(shape, np.uint8)
    single[size // 2, ...] = 0
    single[(size // 2,) * ndim] = 1
    yield "single-center", single


def periodic_label(img: np.ndarray, struct: np.ndarray, wrap) -> tuple[np.ndarray, int]:
    """The oracle of periodic boundaries, independent of tilelabel's: scipy's labels, joined
    wherever a structure offset from a voxel lands, modulo the shape, across a wrapped face
    (``np.roll``; no offset may leave the volume on an axis that does not wrap), by a tiny
    union-find, then numbered again by first voxel."""
    from scipy import ndimage

    labels, n = ndimage.label(img, struct)
    parent = list(range(n + 1))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    axes = tuple(range(img.ndim))
    for d in np.argwhere(struct) - 1:
        if not any(d[a] for a in wrap):
            continue  # scipy joined those
        there = np.roll(labels, tuple(-int(v) for v in d), axis=axes)  # labels[p + d]
        inside = np.ones(img.shape, bool)
        for a in axes:
            if d[a] and a not in wrap:
                inside[tuple((-1 if d[a] > 0 else 0) if b == a else slice(None) for b in axes)] = 0
        both = inside & (labels > 0) & (there > 0)
        for a, b in set(zip(labels[both].tolist(), there[both].tolist(), strict=True)):
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
    roots = np.array([find(i) for i in range(n + 1)])
    kept = np.unique(roots[1:])  # a root is its component's least label: its first voxel's
    final = np.zeros(n + 1, np.int64)
    final[kept] = np.arange(1, kept.size + 1)
    return final[roots][labels], int(kept.size)


def storage_layouts() -> list[tuple[str, int, dict]]:
    """``(name, zarr_format, zarr.create_array keywords)`` of the inputs users bring, 8³ chunks:
    zstd (zarr v3's default), blosc and lz4 (zarr v2's), zstd in v2, gzip, uncompressed, and 16³
    shards of zstd chunks."""
    import numcodecs
    from zarr.codecs import BloscCodec, GzipCodec

    chunks = {"chunks": (8, 8, 8)}
    return [
        ("v3-zstd", 3, chunks),
        ("v3-blosc-lz4", 3, {**chunks, "compressors": BloscCodec(cname="lz4")}),
        ("v2-blosc", 2, {**chunks, "compressors": numcodecs.Blosc()}),
        ("v2-lz4", 2, {**chunks, "compressors": numcodecs.LZ4()}),
        ("v2-zstd", 2, {**chunks, "compressors": numcodecs.Zstd()}),
        ("v3-gzip", 3, {**chunks, "compressors": GzipCodec()}),
        ("v3-none", 3, {**chunks, "compressors": None}),
        ("v3-sharded", 3, {**chunks, "shards": (16, 16, 16)}),
    ]


def check_layout_kept(src: str, dst: str) -> None:
    """The output at ``dst`` has the input's format, chunks, shards and compressors."""
    import zarr

    a, b = zarr.open_array(src), zarr.open_array(dst)
    assert (b.metadata.zarr_format, b.chunks, b.shards) == (
        a.metadata.zarr_format,
        a.chunks,
        a.shards,
    )
    assert [type(c) for c in b.compressors] == [type(c) for c in a.compressors]
