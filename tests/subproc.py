"""Run a fresh interpreter that imports the dmlstride under test.

For behaviour fixed at import time (environment variables) and for crashes
that must not take the test run down with them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import dmlstride as ds


def run_python(args: list[str], cwd: Any, **env: str) -> subprocess.CompletedProcess:
    """Run ``python *args`` in ``cwd`` (an unrelated directory) with extra environment ``env``."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(ds.__file__)))
    full = {**os.environ, **env}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, full.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=120)


# Source for a script's prelude: poll ``condition`` until it holds or
# ``seconds`` pass, and return whether it holds.
WAIT_FOR = """
def wait_for(condition, seconds=20.0):
    import time
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.005)
    return condition()
"""


def run_script(prelude: str, body: str, tmp_path: Any, args: tuple = (), **env: str) -> str:
    """Run ``prelude`` and the dedented ``body`` as a script in a fresh interpreter.

    The script prints "ok" last; the run must exit 0 with "ok" as its last line
    of output.  Returns what it printed before that line ("" when nothing).
    """
    script = tmp_path / "case.py"
    script.write_text(prelude + textwrap.dedent(body) + "\nprint('ok')\n")
    result = run_python([str(script), *args], tmp_path, **env)
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}{result.stderr[-4000:]}"
    lines = result.stdout.rstrip("\n").split("\n")
    assert lines[-1] == "ok", result.stdout
    return "\n".join(lines[:-1])
