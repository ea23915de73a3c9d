"""Smoke test of the benchmark harness: it runs, checks correctness and writes its reports.

Only correctness and the harness's own bookkeeping are asserted; timings on a
shared machine are not.  The harness runs in a subprocess that imports the same
dmlstride as this test (an in-place build or an installed wheel), so that its
optional peers (PyTorch) and the environment it sets for them stay out of this
process.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import dmlstride

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
RUN = BENCH / "run.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    package_parent = str(Path(dmlstride.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, str(BENCH), env.get("PYTHONPATH")) if p)
    return env


def _run(*args: str, script: Path = RUN) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], env=_env(), capture_output=True, text=True,
                          timeout=300)


def _python(code: str) -> subprocess.CompletedProcess:
    # Run in the benchmarks folder: from the repository root, "-c" would find the source
    # folder dmlstride/ before the package under test.
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=BENCH, env=_env(),
                          capture_output=True, text=True, timeout=300)


def test_quick_run_checks_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    proc = _run("--quick", "--case", "tiny", "--case", "gather/packed-f32-dst+16", "--case", "int4",
                "--repeats", "4", "--json", str(out), "--markdown", str(md))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for header in ("dmlstride GB/s (IQR)", "numpy GB/s (IQR)", "limit GB/s (IQR)", "of limit", "vs numpy"):
        assert header in proc.stdout, header
    assert "gather/tiny-1x1x3x5-f32" in proc.stderr  # the progress line
    assert "np.ndarray(buffer=...).copy()" in proc.stdout  # the per-call table
    assert "page-aligned GB/s" in proc.stdout  # the buffer-placement table
    # quick sizes judge nothing: no verdicts, no target table, one closing line on what was checked
    words = proc.stdout.split()
    assert "PASS" not in words and "FAIL" not in words
    assert "targets (" not in proc.stdout and "missed targets" not in proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"quick run, 4 cases in [0-9.]+ s: every implementation's bytes compared with "
                        r"dmlstride's, 4 identical, 0 failed; timings at quick sizes are not judged "
                        r"against speed targets", last), last

    report = json.loads(out.read_text())
    assert {"meta", "cases", "targets", "correct", "targets_met"} <= report.keys()
    assert report["correct"] is True
    assert report["meta"]["quick"] is True
    assert report["meta"]["threads"] == dmlstride.get_num_threads()
    assert report["targets"] == [] and report["targets_met"] is None
    cases = {c["name"]: c for c in report["cases"]}
    assert set(cases) == {"gather/tiny-1x1x3x5-f32", "gather/packed-f32-dst+16", "gather/int4-nhwc-nchw",
                          "copy/int4-nhwc-nchw"}
    for name, case in cases.items():
        assert case["identical"] is True, name
        assert case["bytes_moved"] > 0
        if name.startswith("gather/tiny"):
            assert {"dmlstride", "numpy_as_strided", "numpy_ndarray"} <= case["per_call_ns"].keys()
            continue
        assert {"dmlstride", "numpy", "limit"} <= case["gbps"].keys()
        limit = case["gbps"]["dmlstride"] / case["gbps"]["limit"]
        assert abs(case["fraction_of_limit"] - limit) < 1e-9 * limit
    misaligned = cases["gather/packed-f32-dst+16"]
    assert misaligned["dst_skew"] == 16 and misaligned["src_skew"] == 0
    assert "dmlstride_aligned" in misaligned["median_ns"]
    text = md.read_text()
    assert "| case |" in text and not re.search(r"\b(PASS|FAIL)\b", text)
    assert text.startswith("Measured with `python benchmarks/run.py --quick")


def test_full_run_judges_its_targets(tmp_path: Path) -> None:
    """Without --quick the targets are evaluated and reported; --check-targets turns a miss into exit 3."""
    out = tmp_path / "bench.json"
    proc = _run("--case", "tiny", "--repeats", "2", "--json", str(out), "--check-targets")
    report = json.loads(out.read_text())
    assert report["meta"]["quick"] is False
    targets = report["targets"]
    assert [t["target"] for t in targets] == [
        "tiny gather: >= 5x faster than as_strided(...).copy()",
        "tiny gather: >= 2x faster than np.ndarray(buffer=...).copy()",
    ]
    for t in targets:
        assert t["passed"] is (t["measured"] >= t["required"])
    assert report["targets_met"] is all(t["passed"] for t in targets)
    assert proc.returncode == (0 if report["targets_met"] else 3), proc.stdout + proc.stderr
    verdicts = [line.split()[0] for line in proc.stdout.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert verdicts == ["PASS" if t["passed"] else "FAIL" for t in targets]
    missed = sum(not t["passed"] for t in targets)
    assert proc.stdout.strip().splitlines()[-1].endswith(f"; {missed} of 2 speed targets missed")


def test_quick_run_refuses_to_check_targets() -> None:
    proc = _run("--quick", "--case", "tiny", "--check-targets")
    assert proc.returncode == 2
    assert "--check-targets needs a full run" in proc.stderr


def test_list_unknown_case_and_skipped_peer(tmp_path: Path) -> None:
    proc = _run("--list", "--quick")
    assert proc.returncode == 0, proc.stderr
    names = proc.stdout.split()
    assert "gather/tiny-1x1x3x5-f32" in names and len(names) == len(set(names))
    # every strided case is gathered and scattered, odd shapes and misplaced buffers included
    for stem in ("nhwc-nchw-f32-c24-301x301", "scrambled6d-packed-f32", "packed-f32-dst+16"):
        assert f"gather/{stem}" in names, stem
    assert "scatter/packed-f32-dst+16" in names and "scatter/packed-scrambled6d-f32" in names
    assert "gather/colmajor-rowmajor-f32-both+16" in names

    proc = _run("--quick", "--case", "no-such-case")
    assert proc.returncode == 2
    assert "no case matches" in proc.stderr

    out = tmp_path / "bench.json"
    proc = _run("--quick", "--case", "gather/int4", "--repeats", "1", "--skip-peer", "numpy", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert "numpy" not in case["gbps"] and "limit" in case["gbps"]


def test_main_table_writes_into_memory_allocated_once() -> None:
    """After a first call, no implementation of the main table allocates its output again."""
    proc = _python("""
        import tracemalloc
        import cases as C

        rows = {r.name: r for r in C.build_rows(quick=True)}
        for name in ("gather/nhwc-nchw-f32-c64", "scatter/nchw-nhwc-f32-c64", "copy/nhwc-nchw-f32-c64",
                     "gather/broadcast-c-f32", "copy/packed-f32-dst+16"):
            row = rows[name]
            case = C.make_case(row)
            impls = {"dmlstride": C.dmlstride_impl(case, case.new_dst())}
            for peer in C.PEERS:
                fn = peer.impl(case, case.new_dst()) if peer.available else None
                if fn is not None:
                    impls[peer.key] = fn
            impls["limit"] = C.limit_impl(case, C.ThreadedCopy(2))
            for key, fn in impls.items():
                fn()
                tracemalloc.start()
                fn()
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                assert peak < row.bytes_moved // 8, (name, key, peak, row.bytes_moved)
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_threaded_memcpy_limit_copies_every_byte() -> None:
    """The limit column's threaded np.copyto covers the whole buffer for any size and thread count."""
    proc = _python("""
        import numpy as np
        import cases as C

        rng = np.random.default_rng(3)
        for threads in (1, 2, 3, 7):
            copier = C.ThreadedCopy(threads)
            for n in (1, 63, 64, 1000, 1_000_003):
                src = np.frombuffer(rng.bytes(n), np.uint8)
                dst = np.zeros(n, np.uint8)
                copier.plan(dst, src)()
                assert np.array_equal(dst, src), (threads, n)
            copier.close()
        buf = C.placed_bytes(100, skew=16)
        assert buf.ctypes.data % 4096 == 16 and buf.size == 100
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_interleaved_timing_shuffles_the_order_every_repeat() -> None:
    """Every contestant gives one sample per repeat, and none always follows the same neighbour."""
    proc = _python("""
        import timing

        calls = []
        fns = {k: (lambda k=k: calls.append(k)) for k in "ABCD"}
        samples = timing.interleaved(fns, {k: 1 for k in fns}, 12)
        assert all(len(v) == 12 for v in samples.values())
        rounds = [calls[i:i + 4] for i in range(0, len(calls), 4)]
        assert all(sorted(r) == list("ABCD") for r in rounds)
        after = {k: {r[r.index(k) - 1] for r in rounds if r.index(k) > 0} for k in "ABCD"}
        assert all(len(v) >= 2 for v in after.values()), after
        again = []
        fns = {k: (lambda k=k: again.append(k)) for k in "ABCD"}
        timing.interleaved(fns, {k: 1 for k in fns}, 12)
        assert again == calls  # a fixed seed: the same order on every run
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


UNNAMED = BENCH / "unnamed.py"


def _unnamed(*args: str) -> subprocess.CompletedProcess:
    return _run(*args, script=UNNAMED)


def _listed(*args: str) -> list[tuple[str, float]]:
    proc = _unnamed("--list", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = []
    for line in proc.stdout.splitlines():
        name, mb, unit = line.split()
        assert unit == "MB"
        out.append((name, float(mb)))
    return out


def test_unnamed_draws_repeatable_shapes_within_bounds() -> None:
    for family in ("issue", "perm"):
        first = _listed("--family", family, "--seed", "5", "--count", "10", "--mb", "8,20")
        assert first == _listed("--family", family, "--seed", "5", "--count", "10", "--mb", "8,20")
        assert first != _listed("--family", family, "--seed", "6", "--count", "10", "--mb", "8,20")
        assert len(first) == 10
        # gathers and scatters in turn; the listed size is rounded to 0.1 MB
        assert [n.split("/")[0] for n, _ in first] == ["gather", "scatter"] * 5
        assert all(7.95 <= mb <= 20.05 for _, mb in first), first
        for name, mb in first:
            dtype, sizes, order = name.split("/")[1].split("-")
            dims = [int(x) for x in sizes.split("x")]
            perm = [int(c) for c in order.removeprefix("order")]
            assert sorted(perm) == list(range(len(dims))) and perm != sorted(perm)
            nbytes = math.prod(dims) * np.dtype(dtype).itemsize
            assert abs(nbytes / 1e6 - mb) <= 0.05


def test_unnamed_inner_family_draws_each_kind_in_turn_within_bounds() -> None:
    first = _listed("--family", "inner", "--seed", "5", "--count", "12", "--mb", "8,20")
    assert first == _listed("--family", "inner", "--seed", "5", "--count", "12", "--mb", "8,20")
    assert first != _listed("--family", "inner", "--seed", "6", "--count", "12", "--mb", "8,20")
    kinds = [re.match(r"(gather|scatter|copy)/([a-z]+)", n).group(2) for n, _ in first]
    assert kinds == ["pitched", "slice", "packed", "broadcast", "offset", "offset"] * 2, kinds
    assert all(7.95 <= mb <= 20.05 for _, mb in first), first
    for name, _ in first:
        op, rest = name.split("/")
        if rest.startswith("broadcast"):
            assert op in ("gather", "copy")  # a broadcast is never a destination
        if rest.startswith("offset"):
            src, dst = (int(x) for x in re.match(r"offset(\d+)\+(\d+)-", rest).groups())
            assert (src, dst) != (0, 0) and src < 4096 and dst < 4096


def test_unnamed_inner_family_small_run_states_its_rules() -> None:
    proc = _unnamed("--family", "inner", "--count", "6", "--mb", "0.2,0.4", "--repeats", "2", "--seed", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^6 cases: geometric mean [0-9.]+ of the limit", proc.stdout, re.M), proc.stdout
    # the four kinds the contiguous target judges, apart (pitched, slice, packed, broadcast)
    assert re.search(r"^4 padded, sliced, packed and broadcast copies: geometric mean [0-9.]+, lowest [0-9.]+ "
                     r"\((gather|scatter|copy)/(pitched|slice|packed|broadcast)", proc.stdout, re.M), proc.stdout
    assert re.search(r"^at other offsets: geometric mean [0-9.]+x the page-aligned time, highest [0-9.]+x "
                     r"\((gather|scatter|copy)/offset", proc.stdout, re.M), proc.stdout
    assert "padded, sliced, packed and broadcast copies each >= 0.95 of it" in proc.stdout
    assert "other offsets <= 1.2x page-aligned" in proc.stdout and "not judged" in proc.stdout
    assert "correctness check failed" not in proc.stderr


def test_unnamed_small_run_checks_and_summarises() -> None:
    proc = _unnamed("--count", "2", "--mb", "0.2,0.4", "--repeats", "2", "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "of limit" in proc.stdout and "limit GB/s (IQR)" in proc.stdout
    assert re.search(r"^2 cases: geometric mean [0-9.]+ of the limit, lowest [0-9.]+ \((gather|scatter)/",
                     proc.stdout, re.M), proc.stdout
    assert "not judged" in proc.stdout  # sizes that run from cache get no verdict
    # both cases are small: all in the first size band, none in the second
    assert re.search(r"^by size: 2 of at most 16 MiB a side: geometric mean [0-9.]+, lowest [0-9.]+; "
                     r"none over 16 MiB$", proc.stdout, re.M), proc.stdout
    assert "correctness check failed" not in proc.stderr


def test_unnamed_reports_cases_that_fit_the_cache_apart() -> None:
    proc = _python(textwrap.dedent("""
        from types import SimpleNamespace as NS
        import unnamed
        def case(mib, of_limit):
            return NS(row=NS(bytes_moved=int(mib * (1 << 20))), of_limit=of_limit)
        print(unnamed.size_bands([case(9, 0.5), case(16, 0.2), case(16.5, 0.9), case(60, 0.4)]))
        print(unnamed.size_bands([case(40, 0.81)]))
    """))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    both, one = proc.stdout.splitlines()
    # 16 MiB a side is the last size in the first band; sqrt(0.5 * 0.2) = 0.32, sqrt(0.9 * 0.4) = 0.60
    assert both == ("by size: 2 of at most 16 MiB a side: geometric mean 0.32, lowest 0.20; "
                    "2 over 16 MiB: geometric mean 0.60, lowest 0.40")
    assert one == "by size: none of at most 16 MiB a side; 1 over 16 MiB: geometric mean 0.81, lowest 0.81"


def test_unnamed_refuses_bad_options() -> None:
    for args in (("--mb", "5"), ("--mb", "9,3"), ("--mb", "0,3"), ("--count", "0"),
                 ("--check-targets", "--mb", "1,4")):
        proc = _unnamed(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "error:" in proc.stderr, args


COMPARE = BENCH / "compare_builds.py"


def _compare(*args: str) -> subprocess.CompletedProcess:
    return _run(*args, script=COMPARE)


def test_compare_builds_times_this_build_against_a_copy_of_itself() -> None:
    proc = _compare("--control", "--count", "2", "--mb", "0.2,0.4", "--repeats", "2", "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(("gather/", "scatter/"))]
    assert [r[0].split("/")[0] for r in rows] == ["gather", "scatter"]
    for name, mb, base_gbs, this_gbs, first, second, ratio in rows:
        assert 0.19 <= float(mb) <= 0.41 and float(base_gbs) > 0 and float(this_gbs) > 0
        # the two passes' ratios and their geometric mean (each printed to 0.01)
        assert math.isclose(float(ratio), math.sqrt(float(first) * float(second)), abs_tol=0.015)
        assert math.isclose(float(ratio), float(this_gbs) / float(base_gbs), rel_tol=0.02, abs_tol=0.01)
    assert re.search(r"^2 cases: geometric mean [0-9.]+, [0-9.]+-[0-9.]+, this build faster in [0-2]; "
                     r"the build imported as dmlstride ran [0-9.]+x the copy$", proc.stdout, re.M), proc.stdout
    # the copy plans with its own planner, not with the other build's
    assert "planner" not in proc.stderr


def test_compare_builds_checks_both_builds_write_the_same_bytes(tmp_path: Path) -> None:
    # A base checkout whose gather writes one byte wrong, its scatter as this build's.
    base = tmp_path / "base"
    shutil.copytree(Path(dmlstride.__file__).resolve().parent, base / "dmlstride",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(base / "dmlstride" / "__init__.py", "a") as f:
        f.write(textwrap.dedent("""
            _gather = gather
            def gather(*args, **kwargs):
                out = _gather(*args, **kwargs)
                out.reshape(-1).view("uint8")[5] ^= 1
                return out
        """))
    proc = _compare(str(base), "--case", "float32:3x40x50:201:gather", "--repeats", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gather/float32-3x40x50-order201: the two builds wrote different bytes" in proc.stderr
    proc = _compare(str(base), "--case", "float32:3x40x50:201:scatter", "--repeats", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^1 case: geometric mean ", proc.stdout, re.M), proc.stdout


def test_compare_builds_places_the_destination_past_a_page() -> None:
    # --dst-skew: each case's destination (a gather's out=, a scatter's buffer) that many
    # bytes past a 4 KiB page, here 4 bytes, off the alignment of merged float32 pairs.
    proc = _python("""
        import compare_builds as CB
        import dmlstride as ds

        builds = {"this": ds, "base": ds}
        for skew in (0, 4, 4095):
            for op in ("gather", "scatter"):
                case = CB.Case(("float32", (24, 520, 2), (1, 0, 2), op), builds, seed=1, dst_skew=skew)
                assert case.target.ctypes.data % 4096 == skew and case.target.nbytes == 24 * 520 * 2 * 4
                assert op == "scatter" or not case.target.any()   # (a gather's out=, before any call)
                assert case.same_bytes() and case.target.any()
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
    proc = _compare("--control", "--case", "float32:24x520x2:102:gather", "--dst-skew", "4", "--repeats", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^1 case: geometric mean ", proc.stdout, re.M), proc.stdout


def test_compare_builds_refuses_what_it_cannot_compare(tmp_path: Path) -> None:
    (tmp_path / "dmlstride").mkdir()
    (tmp_path / "dmlstride" / "__init__.py").write_text("")
    for args, message in (
            ((str(tmp_path),), "no compiled engine"),
            ((str(tmp_path / "elsewhere"),), "no dmlstride package there"),
            ((), "give the base build's checkout, or --control"),
            (("--control", "--case", "float32:3x4:2:gather"), "ORDER must list each of the 2 dimensions"),
            (("--control", "--case", "float32:3x4"), "expected DTYPE:SIZES:ORDER:OP"),
            (("--control", "--mb", "4,2"), "expected 0 < LO <= HI"),
            (("--control", "--dst-skew", "4096"), "--dst-skew must be 0-4095 bytes")):
        proc = _compare(*args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stdout + proc.stderr)
