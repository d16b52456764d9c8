"""Union-find on a forest stored in the label array itself, shared by the CPU (numba) kernels.

Every entry of the forest is an index into the same flat array: a non-root points to its parent, a
root to itself. Parents always have a smaller index than their children (new trees are linked to
an earlier neighbour, and unions link the larger root below the smaller one), which is what lets
the flattening passes (``block.flatten``, ``pixel.uf_flatten``) resolve the whole forest in
one forward pass without a separate compression step.

The helpers are compiled without numba's reference counting (``_nrt=False``; they allocate
nothing): a helper that takes an array and branches otherwise pays atomic reference-count updates
on every call, which dominated the kernels.

Entries are read as int64 whatever the label dtype, so that comparisons never mix unsigned and
signed integers (numba would go through float64 for uint64 vs int64).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, _nrt=False)
def find(L, n):
    """Root of ``n``, compressing the path from ``n`` to it."""
    r = np.int64(L[n])
    if r == n:
        return n
    p = np.int64(L[r])
    if p == r:
        # The common case after path compression: n hangs directly below its root.
        return r
    while p != r:
        r = p
        p = np.int64(L[r])
    while True:
        q = np.int64(L[n])
        if q == r:
            break
        L[n] = r
        n = q
    return r


@numba.njit(cache=True, nogil=True, _nrt=False)
def merge(L, n, r):
    """Join the tree of ``n`` with the tree rooted at ``r`` (``r < 0``: none yet); new root."""
    if np.int64(L[n]) == r:
        # n already hangs below r, which is still a root: nothing to join.
        return r
    rn = find(L, n)
    if r < 0 or rn == r:
        return rn
    if rn < r:
        L[r] = rn
        return rn
    L[rn] = r
    return r


@numba.njit(cache=True, nogil=True, _nrt=False)
def union(L, a, b):
    """Join the trees of ``a`` and ``b`` under the smaller root; return that root."""
    ra = find(L, a)
    rb = find(L, b)
    if ra < rb:
        L[rb] = ra
        return ra
    if rb < ra:
        L[ra] = rb
    return rb
