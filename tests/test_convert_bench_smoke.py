"""Smoke test of benchmarks/convert_bench.py: it runs its cases at small sizes and checks them.

Every contestant's result is compared with numpy's inside the script before
timing (the peers' columns appear only when they are importable); only that
and the report's shape are asserted here, never timings.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import dmlstride

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "convert_bench.py"


def test_quick_run_checks_every_case():
    env = dict(os.environ)
    package_parent = str(Path(dmlstride.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--threads", "1"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for case in ("image: uint8 NHWC", "int4: 256x256 INT4, blocks of 32 -> float16",
                 "int4: 256x256 INT4, blocks of 32 -> float32", "half: float32 NHWC"):
        assert case in out, out
    assert len(re.findall(r"^  numpy +[\d.]+ ms", out, re.M)) == 4, out
    assert len(re.findall(r"^  dmlstride +[\d.]+ ms", out, re.M)) == 4, out
    assert "vs dmlstride" in out
