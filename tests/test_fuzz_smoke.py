"""The fuzz harness (``tests/fuzz/fuzz_api.py``) inside the normal test run.

* A bounded fuzz run in a subprocess, so that a crash of the interpreter is
  reported rather than taking pytest down: a few seconds by default, about a
  minute when ``CI`` is set, or ``DMLSTRIDE_FUZZ_SECONDS`` seconds.
* Every saved input under ``tests/fuzz/regressions/`` replayed in-process.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dmlstride

FUZZ_DIR = Path(__file__).parent / "fuzz"
HARNESS = FUZZ_DIR / "fuzz_api.py"
REGRESSIONS = sorted(p for p in (FUZZ_DIR / "regressions").iterdir() if p.is_file() and not p.name.startswith("."))


def _seconds() -> float:
    given = os.environ.get("DMLSTRIDE_FUZZ_SECONDS", "").strip()
    if given:
        return float(given)
    return 60.0 if os.environ.get("CI") else 8.0


def _load_harness():
    spec = importlib.util.spec_from_file_location("dmlstride_fuzz_api", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bounded_fuzz_run():
    seconds = _seconds()
    env = dict(os.environ)
    # The subprocess imports the same dmlstride as this test run.
    package_parent = str(Path(dmlstride.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(HARNESS), "--seconds", str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds + 300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    found = re.search(r"executions: (\d+) in", output) or re.search(r"Done (\d+) runs in", output)
    assert found, output[-4000:]
    executions = int(found.group(1))
    assert executions >= 100, output[-4000:]
    print(f"fuzz: {executions} executions in {seconds:.0f} s")


def test_regression_inputs_exist():
    assert len(REGRESSIONS) >= 5


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_regression_input(path):
    harness = _load_harness()
    harness.one_input(path.read_bytes())
    assert harness.EXECUTIONS == 1


# What each saved input's name says it exercises: the name's first word, and the operation it picks.
_OP_OF_NAME = {"BufferTensorDesc": "op_descriptor", "copy_tensor": "op_copy", "gather": "op_gather",
               "scatter": "op_scatter", "view": "op_view", "convert": "op_convert", "dequantize": "op_quant",
               "quantize": "op_quant"}


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_regression_input_picks_the_operation_its_name_says(path):
    """Adding an operation shifts which one an input's first byte picks; keep every saved input on its own."""
    harness = _load_harness()
    word = path.stem.removeprefix("seed-").split("-")[0]
    if path.stem.startswith("seed-gather-convert"):
        word = "convert"
    want = word if word.startswith("op_") else _OP_OF_NAME[word]
    picked = harness.OPERATIONS[path.read_bytes()[0] % len(harness.OPERATIONS)].__name__
    assert picked == want, f"{path.name} picks {picked}; rewrite its first byte to pick {want}"
