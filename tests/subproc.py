"""Run a fresh interpreter that imports the dmlstride under test.

For behaviour fixed at import time (environment variables) and for crashes
that must not take the test run down with them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import dmlstride as ds


def run_python(args: list[str], cwd: Any, **env: str) -> subprocess.CompletedProcess:
    """Run ``python *args`` in ``cwd`` (an unrelated directory) with extra environment ``env``."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(ds.__file__)))
    full = {**os.environ, **env}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, full.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=120)
