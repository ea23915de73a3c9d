"""Self-overlap of a strided tensor, decided exactly under a work bound.

Two distinct indices ``i != j`` share an offset exactly when there is a non-zero
integer vector ``d = i - j`` with ``|d_k| <= size_k - 1`` and ``sum(d_k * s_k) == 0``.
That bounded linear Diophantine problem is NP-hard in general, so
:func:`overlap_status` answers ``True`` (overlap), ``False`` (offsets distinct) or
``None`` (not decided within the work bound), in this order:

1. Proofs that cost a handful of integer operations per dimension: size-1
   dimensions never matter; a zero stride on a dimension of size > 1 is an
   overlap; if, with strides sorted ascending, every stride exceeds the extent
   of the dimensions below it, the offsets are nested and distinct (the common
   case).
2. Witnesses and reductions, still polynomial: two dimensions that overlap on
   their own (``s_j / g <= size_i - 1`` and ``s_i / g <= size_j - 1`` with
   ``g = gcd(s_i, s_j)``); more elements than offsets in a group of dimensions
   (pigeonhole, after dividing by the group's gcd).  A dimension whose ``d_k``
   is forced to 0, because its stride exceeds the extent of all the others or
   because the gcd of the other strides rules out every ``|d_k| <= size_k - 1``,
   is dropped and the steps repeat.  Two dimensions left are solved in closed
   form with the extended Euclidean algorithm.
3. A bounded exact search: meet in the middle (the sums ``d . s`` of each half
   of the dimensions, sorted and matched) when each half has at most
   :data:`MAX_HALF_VECTORS` vectors and the search below would not obviously
   be cheaper, else a depth-first search over ``d`` pruned
   by reachable range and gcd (the two dimensions with the largest sizes solved
   in closed form at each leaf), stopped after :data:`MAX_SEARCH_NODES` nodes.

Every step is exact; only the last can run out of work, and then the answer is
``None``.  Steps 1 and 2 cost microseconds, step 3 at most about 0.03 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from math import gcd, prod

import numpy as np

#: Meet in the middle runs when each half of the dimensions spans at most this
#: many vectors ``d``: enough for 8 dimensions of size 12 (23**4 = 279,841 per
#: half), about 25 ms of numpy work.
MAX_HALF_VECTORS = 300_000
#: The depth-first search gives up after this many nodes (about 25 ms).
MAX_SEARCH_NODES = 3000

_Dims = list[tuple[int, int]]  # (stride, size - 1), stride > 0, size - 1 > 0


class _OutOfWork(Exception):
    pass


def _ext_gcd(a: int, b: int) -> tuple[int, int, int]:
    """Return (g, x, y) with a*x + b*y == g == gcd(a, b)."""
    x0, y0, x1, y1 = 1, 0, 0, 1
    while b:
        q, a, b = a // b, b, a % b
        x0, x1 = x1, x0 - q * x1
        y0, y1 = y1, y0 - q * y1
    return a, x0, y0


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _two_dim(s0: int, m0: int, s1: int, m1: int, r: int, need_nonzero: bool) -> bool:
    """Is there (d0, d1), |d0| <= m0, |d1| <= m1, with d0*s0 + d1*s1 == -r (non-zero if asked)?"""
    g, x, y = _ext_gcd(s0, s1)
    target = -r
    if target % g:
        return False
    k = target // g
    # General solution: d0 = x*k + t*(s1/g), d1 = y*k - t*(s0/g).
    a0, b0 = x * k, s1 // g
    a1, b1 = y * k, s0 // g
    lo = max(_ceil_div(-m0 - a0, b0), _ceil_div(a1 - m1, b1))
    hi = min((m0 - a0) // b0, (a1 + m1) // b1)
    if lo > hi:
        return False
    if not need_nonzero:
        return True
    # Only the zero vector is forbidden; it is the solution t with d0 == 0 (when r == 0).
    if hi > lo:
        return True
    d0 = a0 + lo * b0
    d1 = a1 - lo * b1
    return d0 != 0 or d1 != 0


def _nested(dims: _Dims) -> bool:
    """Sorted ascending, does every stride exceed the extent of the dimensions below it?"""
    extent = 0
    for s, m in dims:
        if s <= extent:
            return False
        extent += m * s
    return True


def _witness(dims: _Dims) -> bool:
    """A cheap proof of overlap: a pair that overlaps alone, or a pigeonhole group."""
    for (si, mi), (sj, mj) in combinations(dims, 2):
        g = gcd(si, sj)
        if sj // g <= mi and si // g <= mj:
            return True
    for r in range(3, len(dims) + 1):
        for group in combinations(dims, r):
            g = 0
            for s, _ in group:
                g = gcd(g, s)
            if prod(m + 1 for _, m in group) > sum(m * s for s, m in group) // g + 1:
                return True
    return False


def _forced_zero(dims: _Dims) -> int | None:
    """Index of a dimension whose ``d_k`` is 0 in every solution, if there is one."""
    total = sum(m * s for s, m in dims)
    for k, (s, m) in enumerate(dims):
        if s > total - m * s:
            return k
        g = 0
        for j, (t, _) in enumerate(dims):
            if j != k:
                g = gcd(g, t)
        if g // gcd(g, s) > m:
            return k
    return None


def _half_sums(dims: _Dims) -> np.ndarray:
    """``d . s`` for every ``d`` with ``|d_k| <= m_k``, as int64 (fits: checked by the caller)."""
    sums = np.zeros(1, dtype=np.int64)
    for s, m in dims:
        sums = (sums[:, None] + np.arange(-m, m + 1, dtype=np.int64) * np.int64(s)).reshape(-1)
    return sums


def _halves(dims: _Dims) -> tuple[_Dims, _Dims, int]:
    """Split the dimensions in two with balanced vector counts; return both and the larger count."""
    halves: tuple[_Dims, _Dims] = ([], [])
    counts = [1, 1]
    for s, m in sorted(dims, key=lambda sm: -sm[1]):
        side = 0 if counts[0] <= counts[1] else 1
        halves[side].append((s, m))
        counts[side] *= 2 * m + 1
    return halves[0], halves[1], max(counts)


def _meet_in_the_middle(first: _Dims, second: _Dims) -> bool:
    """Exact; the caller keeps both halves within MAX_HALF_VECTORS vectors."""
    a, b = _half_sums(first), _half_sums(second)
    # A solution (dA, dB) != 0: dA . sA == -dB . sB.  Either one half solves alone
    # (its sum 0 reached by a non-zero vector: 0 appears more than once), or the common
    # value is non-zero and, negating d if need be, positive in the first half.
    if np.count_nonzero(a == 0) > 1 or np.count_nonzero(b == 0) > 1:
        return True
    pa = np.sort(a[a > 0])
    pb = np.sort(b[b > 0])  # sorted, the look-ups below walk pa in order
    at = np.minimum(np.searchsorted(pa, pb), pa.size - 1)
    return bool(np.any(pa[at] == pb))


def _search(dims: _Dims) -> bool:
    """Depth-first search over ``d``; raises _OutOfWork.

    The two dimensions with the most values of ``d_k`` are solved in closed form
    at the bottom; the others are enumerated from the largest stride down.
    """
    by_values = sorted(dims, key=lambda sm: sm[1])
    dims = by_values[-2:] + sorted(by_values[:-2])
    strides_ = [s for s, _ in dims]
    bounds = [m for _, m in dims]
    # reach[i]: largest |sum_{j<i} d_j s_j|; gcds[i]: gcd of strides below i.
    reach = [0] * len(dims)
    gcds = [0] * len(dims)
    for i in range(1, len(dims)):
        reach[i] = reach[i - 1] + bounds[i - 1] * strides_[i - 1]
        gcds[i] = gcd(gcds[i - 1], strides_[i - 1])
    budget = [MAX_SEARCH_NODES]

    def search(i: int, r: int, nonzero: bool) -> bool:
        # Choose d_i (and recursively d_{i-1}..d_0) so that r + sum d_j s_j == 0.
        budget[0] -= 1
        if budget[0] < 0:
            raise _OutOfWork
        if i == 1:
            return _two_dim(strides_[0], bounds[0], strides_[1], bounds[1], r, not nonzero)
        s, m, R, G = strides_[i], bounds[i], reach[i], gcds[i]
        lo = max(-m, _ceil_div(-R - r, s))
        hi = min(m, (R - r) // s)
        if not nonzero:
            lo = max(lo, 0)  # the first non-zero component may be taken positive
        if lo > hi:
            return False
        # r + d*s must be divisible by G: d == d_star (mod G / gcd(G, s)).
        g = gcd(G, s)
        if r % g:
            return False
        step = G // g
        if step > 1:
            _, inv, _ = _ext_gcd((s // g) % step, step)
            d_star = (-(r // g) * inv) % step
            first = lo + ((d_star - lo) % step)
        else:
            first = lo
        for d in range(first, hi + 1, step):
            if search(i - 1, r + d * s, nonzero or d != 0):
                return True
        return False

    return search(len(dims) - 1, 0, False)


def overlap_status(sizes: Sequence[int], strides: Sequence[int]) -> bool | None:
    """Do two distinct indices share an element offset?  ``None``: not decided within the bound.

    ``True`` and ``False`` are exact.  Runs in well under 0.1 s for any 8
    dimensions with sizes and strides below 2**32.
    """
    dims = sorted((s, n - 1) for n, s in zip(sizes, strides) if n > 1)
    if not dims:
        return False
    if dims[0][0] == 0:
        return True
    while True:
        if _nested(dims):
            return False
        if _witness(dims):
            return True
        k = _forced_zero(dims)
        if k is None:
            break
        del dims[k]
    # Not nested, so at least two dimensions are left.
    if len(dims) == 2:
        (s0, m0), (s1, m1) = dims
        return _two_dim(s0, m0, s1, m1, 0, True)
    # Meet in the middle when it fits, unless the search's leaves are far fewer
    # (a numpy element costs about 1/100 of a search step): a few dimensions
    # with few values around two big ones.  Else the search, within its budget.
    first, second, vectors = _halves(dims)
    leaves = prod(2 * m + 1 for m in sorted(m for _, m in dims)[:-2])
    if vectors <= MAX_HALF_VECTORS and vectors <= 100 * leaves and sum(m * s for s, m in dims) < 2**62:
        return _meet_in_the_middle(first, second)
    try:
        return _search(dims)
    except _OutOfWork:
        return None


def has_overlap(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Overlap, or not proven distinct within the bound (see :func:`overlap_status`)."""
    return overlap_status(sizes, strides) is not False


def is_packed(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Do the offsets fill ``0 .. count - 1``, each once?  Decided by sorting the strides.

    They do exactly when the strides of the dimensions of size > 1, sorted
    ascending, run 1, n0, n0*n1, ... (each the previous times its size): the
    smallest must be 1 to reach offset 1, and each next one must equal the
    extent below it, or an offset is reached twice (smaller) or never (larger).
    """
    expected = 1
    for s, n in sorted((s, n) for n, s in zip(sizes, strides) if n > 1):
        if s != expected:
            return False
        expected *= n
    return True
