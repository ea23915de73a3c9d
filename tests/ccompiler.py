"""The system C compiler, for tests that build C: the kernel driver and a preloaded library."""

from __future__ import annotations

import os
import shutil

import pytest


def c_compiler() -> str:
    """``$CC``, else ``cc``, ``gcc`` or ``clang`` on PATH; skips the calling test when there is none."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    return cc
