"""Exact self-overlap test for a strided tensor.

Two distinct indices ``i != j`` share an offset exactly when there is a non-zero
integer vector ``d = i - j`` with ``|d_k| <= size_k - 1`` and ``sum(d_k * s_k) == 0``.
This module decides that bounded linear Diophantine problem exactly:

* size-1 dimensions never matter, a zero stride on a dimension of size > 1 is an
  overlap at once;
* if, with strides sorted ascending, every stride exceeds the extent of the
  dimensions below it, offsets are nested and distinct (the common case);
* otherwise a depth-first search assigns ``d_k`` from the largest stride down,
  pruned by the reachable range and the gcd of the remaining strides, and the
  last two dimensions are solved in closed form with the extended Euclidean
  algorithm.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd


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


def has_overlap(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Exact: do two distinct indices of this tensor share an element offset?"""
    dims = sorted((s, n - 1) for n, s in zip(sizes, strides) if n > 1)
    if not dims:
        return False
    if dims[0][0] == 0:
        return True
    extent = 0
    for s, m in dims:
        if s <= extent:
            break
        extent += m * s
    else:
        return False
    if len(dims) == 1:
        return False

    strides_ = [s for s, _ in dims]
    bounds = [m for _, m in dims]
    # reach[i]: largest |sum_{j<i} d_j s_j|; gcds[i]: gcd of strides below i.
    reach = [0] * len(dims)
    gcds = [0] * len(dims)
    for i in range(1, len(dims)):
        reach[i] = reach[i - 1] + bounds[i - 1] * strides_[i - 1]
        gcds[i] = gcd(gcds[i - 1], strides_[i - 1])

    def search(i: int, r: int, nonzero: bool) -> bool:
        # Choose d_i (and recursively d_{i-1}..d_0) so that r + sum d_j s_j == 0.
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
