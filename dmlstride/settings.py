"""Run-time settings: the kernels' thread count and the gather output cache.

Both start from environment variables, read once when the package is
imported (``DMLSTRIDE_NUM_THREADS``, ``DMLSTRIDE_OUTPUT_CACHE``); the
functions here change them afterwards.  Nothing else happens at import.
"""

from __future__ import annotations

import os
import sys

from . import _engine
from ._checks import as_int
from ._limits import DEFAULT_OUTPUT_CACHE, MAX_THREADS

__all__ = ["set_num_threads", "get_num_threads", "set_output_cache", "output_cache_info"]


def set_num_threads(n: int) -> None:
    """Set the number of threads the kernels may use (at least 1).

    Builds without threads always use 1.  The default comes from the
    ``DMLSTRIDE_NUM_THREADS`` environment variable (ASCII decimal digits only;
    above 1024 it counts as 1024, anything else is ignored), else the CPUs available.
    """
    n = as_int(n, "n")
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"number of threads is {n}; expected at least 1 and at most {MAX_THREADS}")
    _engine.set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads the kernels use."""
    return int(_engine.get_num_threads())


def set_output_cache(max_bytes: int) -> int:
    """Keep at most ``max_bytes`` of freed gather outputs for reuse; return the old limit.

    A new array's memory is mapped and zeroed by the operating system one
    page at a time on first write, which for a large gather costs about as
    much as the copy.  So the arrays :func:`gather` allocates remember where
    they came from: when one of at least 1 MiB is freed, its memory is kept
    (up to 8 blocks and ``max_bytes`` in all) and the next gather of a similar
    size (at most a quarter smaller) reuses it.  The arrays are ordinary
    numpy arrays that own their data.  Setting the limit frees every cached
    block; 0 turns the cache off.  The default is 256 MiB, or the
    ``DMLSTRIDE_OUTPUT_CACHE`` environment variable (bytes; ASCII decimal
    digits only, above ``sys.maxsize`` it counts as ``sys.maxsize``, anything
    else is ignored).

    Examples
    --------
    >>> old = set_output_cache(0)        # free the cached blocks, cache nothing
    >>> output_cache_info()
    (0, 0)
    >>> set_output_cache(old)
    0
    """
    n = as_int(max_bytes, "max_bytes")
    if not 0 <= n <= sys.maxsize:
        raise ValueError(f"output cache limit is {n} bytes; expected 0 to {sys.maxsize}")
    return int(_engine.set_output_cache(n))


def output_cache_info() -> tuple[int, int]:
    """``(bytes held in cached blocks, limit in bytes)`` of the gather output cache.

    See :func:`set_output_cache`.
    """
    held, limit = _engine.output_cache_info()
    return int(held), int(limit)


_ASCII_DIGITS = frozenset("0123456789")


def _env_int(name: str, cap: int) -> int | None:
    """The environment variable ``name`` as a count, at most ``cap``; None when unusable.

    Only ASCII decimal digits count, with optional ASCII whitespace around
    them: no sign, no underscores, no other scripts' digits.  Values above
    ``cap`` (of any length) read as ``cap``.
    """
    text = os.environ.get(name, "").strip(" \t\n\r\f\v")
    if not text or not _ASCII_DIGITS.issuperset(text):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(cap)):  # int() of it could pass Python's digit limit
        return cap
    return min(int(digits), cap)


def _default_output_cache() -> int:
    """DMLSTRIDE_OUTPUT_CACHE (above sys.maxsize: sys.maxsize), else DEFAULT_OUTPUT_CACHE."""
    n = _env_int("DMLSTRIDE_OUTPUT_CACHE", sys.maxsize)
    return DEFAULT_OUTPUT_CACHE if n is None else n


def _default_threads() -> int:
    """DMLSTRIDE_NUM_THREADS (above MAX_THREADS: MAX_THREADS), else the CPUs available."""
    n = _env_int("DMLSTRIDE_NUM_THREADS", MAX_THREADS)
    if n is not None and n >= 1:
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_engine.set_num_threads(_default_threads())
_engine.set_output_cache(_default_output_cache())
