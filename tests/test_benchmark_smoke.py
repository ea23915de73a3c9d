"""Smoke test of the benchmark harness: it runs, checks correctness and writes its reports.

Only correctness is asserted; timings on a shared machine are not.  The harness
runs in a subprocess that imports the same dmlstride as this test (an in-place
build or an installed wheel).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dmlstride

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    package_parent = str(Path(dmlstride.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, str(RUN), *args], env=env, capture_output=True, text=True,
                          timeout=300)


def test_quick_run_checks_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    proc = _run("--quick", "--case", "tiny", "--case", "gather/packed", "--case", "int4",
                "--repeats", "2", "--json", str(out), "--markdown", str(md))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dmlstride GB/s" in proc.stdout and "vs best numpy" in proc.stdout
    assert "gather/tiny-1x1x3x5-f32" in proc.stderr  # the progress line
    # quick sizes judge nothing: no verdicts, no target table, one closing line on what was checked
    words = proc.stdout.split()
    assert "PASS" not in words and "FAIL" not in words
    assert "targets missed" not in proc.stdout and "\ntargets" not in proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"quick run, 4 cases in [0-9.]+ s: every implementation's bytes compared with "
                        r"dmlstride's, 4 identical, 0 failed; timings at quick sizes are not judged "
                        r"against speed targets", last), last

    report = json.loads(out.read_text())
    assert {"meta", "cases", "targets", "correct", "targets_met"} <= report.keys()
    assert report["correct"] is True
    assert report["meta"]["quick"] is True
    assert report["targets"] == [] and report["targets_met"] is None
    names = {c["name"] for c in report["cases"]}
    assert {"gather/tiny-1x1x3x5-f32", "gather/packed-f32", "gather/int4-nhwc-nchw",
            "copy/int4-nhwc-nchw"} <= names
    for case in report["cases"]:
        assert case["identical"] is True
        assert {"dmlstride", "memcpy"} <= case["gbps"].keys()
        assert case["bytes_moved"] > 0
    assert "| case |" in md.read_text() and "PASS" not in md.read_text()


def test_full_run_judges_its_targets(tmp_path: Path) -> None:
    """Without --quick the targets are evaluated and reported (not asserted: a shared machine is noisy)."""
    out = tmp_path / "bench.json"
    proc = _run("--case", "tiny", "--repeats", "2", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = [line.split()[0] for line in proc.stdout.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert len(verdicts) == 2  # the tiny case's two per-call targets
    report = json.loads(out.read_text())
    assert report["meta"]["quick"] is False
    assert [t["passed"] for t in report["targets"]] == [v == "PASS" for v in verdicts]
    assert all({"target", "measured", "required", "passed"} <= t.keys() for t in report["targets"])
    assert report["targets_met"] is (verdicts == ["PASS", "PASS"])
    missed = verdicts.count("FAIL")
    assert proc.stdout.strip().splitlines()[-1].endswith(f"; {missed} of 2 speed targets missed")


def test_quick_run_refuses_to_check_targets() -> None:
    proc = _run("--quick", "--case", "tiny", "--check-targets")
    assert proc.returncode == 2
    assert "--check-targets needs a full run" in proc.stderr


def test_list_and_unknown_case() -> None:
    proc = _run("--list", "--quick")
    assert proc.returncode == 0, proc.stderr
    names = proc.stdout.split()
    assert "gather/tiny-1x1x3x5-f32" in names and len(names) == len(set(names))

    proc = _run("--quick", "--case", "no-such-case")
    assert proc.returncode == 2
    assert "no case matches" in proc.stderr
