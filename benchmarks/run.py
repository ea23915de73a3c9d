"""Benchmark dmlstride's gather, scatter and copy_tensor like for like against numpy, PyTorch and memcpy.

Usage::

    python benchmarks/run.py                    # every case at full size (several minutes)
    python benchmarks/run.py --quick            # small sizes, few repeats: a correctness smoke run
                                                # (timings only: no speed targets are judged)
    python benchmarks/run.py --case gather/ --case tiny --threads 1
    python benchmarks/run.py --markdown r.md --json r.json --plot r.png --check-targets

Main table: every implementation writes into memory allocated once per case
(``gather(out=)``, ``scatter``, ``copy_tensor``; numpy ``np.copyto`` into a
preallocated array; PyTorch ``copy_`` into a preallocated tensor), and the
limit is a memcpy of the same bytes at dmlstride's thread count, measured
without dmlstride (``np.copyto`` of equal contiguous chunks on a persistent
pool of Python threads).  For each case every implementation runs once and the
bytes they produce are compared; then they are timed interleaved (every
implementation once per repeat, in an order shuffled every repeat) and the median of
the repeats is quoted with its spread.  A second table times allocating
gathers with dmlstride's output cache on and off against numpy's ``.copy()``.

Exit status: 0, or 1 if any implementation disagreed with another (or raised);
with ``--check-targets`` also 3 if a speed target was missed.  Speed targets
are otherwise reported, not asserted, and only by a full run: at ``--quick``
sizes they mean nothing, so a quick run reports its timings and the
correctness check alone.
"""

from __future__ import annotations

import argparse
import fnmatch
import gc
import json
import math
import os
import platform
import statistics
import sys
import textwrap
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

try:
    import dmlstride as ds
except ImportError:  # not installed: use the package beside this folder (an in-place build)
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    import dmlstride as ds

from timing import calls_per_sample as _calls_per_sample  # noqa: E402
from timing import interleaved as _interleaved  # noqa: E402
from timing import summarise as _summarise  # noqa: E402

import cases as C  # this script's folder is first on sys.path; sets OMP_WAIT_POLICY before torch

TINY_CALLS = 2000  # calls per timing sample for the per-call overhead case
MEMORY_SLACK = 1 << 20  # a gather may use this much beyond its output ("a constant")
EXIT_MISMATCH = 1
EXIT_TARGETS = 3
FLAG = "!"  # marks a figure above the memcpy limit
# glibc's memcpy switches to streaming (non-temporal) stores only above a threshold derived from
# the cache sizes, which can exceed a 64 MiB copy's per-thread chunk; --streaming-memcpy lowers it.
STREAMING_TUNABLE = "glibc.cpu.x86_non_temporal_threshold=0x1000000"  # 16 MiB

# The targets, each checked by evaluate_targets.
CONVERSION_GEOMEAN = 0.8
CONVERSION_EACH = 0.6
CONTIGUOUS_EACH = 0.95
PEER_EACH = 1.0
ALIGNMENT_AT_MOST = 1.2
TINY_AS_STRIDED = 5.0
TINY_NDARRAY = 2.0

OP_COLOURS = {"gather": "tab:blue", "scatter": "tab:orange", "copy": "tab:green"}
ALLOC_COLUMNS = [  # (key, header) of the allocating table
    ("out", "gather(out=) GB/s"),
    ("cache_on", "gather, cache on GB/s"),
    ("cache_off", "gather, cache off GB/s"),
    ("numpy_copy", "numpy .copy() GB/s"),
]


@dataclass
class Settings:
    repeats: int
    min_sample_ns: int
    threads: int
    peers: list[C.Peer]
    cache_limit: int  # dmlstride's output cache limit at start-up (the "on" setting)
    measure_memory: bool = True  # an allocating gather's peak memory, per gather row


@dataclass
class Result:
    row: C.Row
    ns: dict[str, float] = field(default_factory=dict)  # main table: median nanoseconds per call
    spread: dict[str, float] = field(default_factory=dict)  # interquartile range / median
    number: dict[str, int] = field(default_factory=dict)  # calls per sample
    mismatched: list[str] = field(default_factory=list)
    error: str | None = None
    threads: dict[int, float] = field(default_factory=dict)  # thread count -> GB/s
    memory: dict[str, Any] | None = None
    alloc_ns: dict[str, float] = field(default_factory=dict)  # allocating table
    alloc_spread: dict[str, float] = field(default_factory=dict)
    tiny: dict[str, tuple[str, float, float]] = field(default_factory=dict)  # key -> label, ns, spread

    @property
    def correct(self) -> bool:
        return self.error is None and not self.mismatched

    @property
    def timed(self) -> bool:
        return self.correct and C.DMLSTRIDE in self.ns

    def gbps(self, key: str, ns: dict[str, float] | None = None) -> float | None:
        t = (self.ns if ns is None else ns).get(key)
        return None if t is None else self.row.bytes_moved / t

    def vs(self, key: str) -> float | None:
        """dmlstride's speed over ``key``'s (above 1: dmlstride is faster)."""
        if key not in self.ns or C.DMLSTRIDE not in self.ns:
            return None
        return self.ns[key] / self.ns[C.DMLSTRIDE]

    @property
    def of_limit(self) -> float:
        return self.ns[C.LIMIT] / self.ns[C.DMLSTRIDE]

    @property
    def misaligned_cost(self) -> float:
        """Time with this row's buffer placement over the time with page-aligned buffers."""
        return self.ns[C.DMLSTRIDE] / self.ns[C.DMLSTRIDE_ALIGNED]


# -- timing ------------------------------------------------------------------------------------------


def _flat_bytes(x: Any) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        x = x.numpy()  # a torch tensor
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


# -- one case ----------------------------------------------------------------------------------------


def run_row(row: C.Row, settings: Settings, copier: C.ThreadedCopy) -> Result:
    """Check that every implementation produces the same bytes, then time them."""
    res = Result(row)
    try:
        if row.group == "tiny":
            _run_tiny(res, settings)
            return res
        case = C.make_case(row)
        impls = _main_impls(res, case, settings, copier)
    except Exception as exc:  # a failing implementation is a finding, not a crash
        res.error = f"{type(exc).__name__}: {exc}"
        return res
    if res.mismatched:
        return res

    res.number = {k: _calls_per_sample(fn, settings.min_sample_ns) for k, fn in impls.items()}
    res.ns, res.spread = _summarise(_interleaved(impls, res.number, settings.repeats))
    dml = impls[C.DMLSTRIDE]
    del impls

    if row.allocating:
        try:
            _run_allocating(res, case, dml, settings)
        except Exception as exc:
            res.error = f"{type(exc).__name__}: {exc}"
            return res
    if row.scaling and settings.threads > 1:
        res.threads = _thread_scaling(dml, res.number[C.DMLSTRIDE], row.bytes_moved, settings)
    if row.op == "gather" and settings.measure_memory:
        res.memory = _measure_memory(C.allocating_impls(case)["new"])
    return res


def _main_impls(res: Result, case: C.Case, settings: Settings,
                copier: C.ThreadedCopy) -> dict[str, Callable[[], Any]]:
    """The main table's implementations, each run once and its destination compared with dmlstride's."""
    row = res.row
    dsts = {C.DMLSTRIDE: case.new_dst()}
    impls = {C.DMLSTRIDE: C.dmlstride_impl(case, dsts[C.DMLSTRIDE])}
    for peer in settings.peers:
        dst = case.new_dst()
        fn = peer.impl(case, dst)
        if fn is not None:
            dsts[peer.key], impls[peer.key] = dst, fn
    if row.src_skew or row.dst_skew:
        aligned = C.make_case(row.aligned())
        dsts[C.DMLSTRIDE_ALIGNED] = aligned.new_dst()
        impls[C.DMLSTRIDE_ALIGNED] = C.dmlstride_impl(aligned, dsts[C.DMLSTRIDE_ALIGNED])
    for fn in impls.values():
        fn()
    ref = dsts.pop(C.DMLSTRIDE).raw
    res.mismatched = [k for k, d in dsts.items() if not np.array_equal(d.raw, ref)]
    impls[C.LIMIT] = C.limit_impl(case, copier)
    return impls


def _run_tiny(res: Result, settings: Settings) -> None:
    case = C.make_case(res.row)
    impls = C.tiny_impls(case)
    outputs = {k: _flat_bytes(fn()) for k, (_, fn) in impls.items()}
    ref = outputs.pop(C.DMLSTRIDE)
    res.mismatched = [k for k, v in outputs.items() if not np.array_equal(v, ref)]
    if res.mismatched:
        return
    fns = {k: fn for k, (_, fn) in impls.items()}
    res.number = {k: TINY_CALLS for k in fns}
    ns, spread = _summarise(_interleaved(fns, res.number, settings.repeats))
    res.tiny = {k: (impls[k][0], ns[k], spread[k]) for k in fns}


def _run_allocating(res: Result, case: C.Case, preallocated: Callable[[], Any], settings: Settings) -> None:
    """Allocating gathers, cache on and off, against preallocated and numpy's ``.copy()``."""
    alloc = C.allocating_impls(case)
    new, numpy_copy = alloc["new"], alloc["numpy_copy"]
    if not np.array_equal(_flat_bytes(new()), _flat_bytes(numpy_copy())):
        res.mismatched.append("numpy .copy() (allocating)")
        return
    fns: dict[str, Callable[[], Any]] = {"out": preallocated, "cache_off": new, "numpy_copy": numpy_copy}
    if settings.cache_limit:
        fns["cache_on"] = new

    def before(key: str) -> None:
        if key == "cache_on":
            ds.set_output_cache(settings.cache_limit)
            new()  # an untimed call leaves a block in the cache, as in steady use
        else:
            ds.set_output_cache(0)

    try:
        ds.set_output_cache(settings.cache_limit)
        number = {k: _calls_per_sample(fn, settings.min_sample_ns) for k, fn in fns.items()}
        res.alloc_ns, res.alloc_spread = _summarise(_interleaved(fns, number, settings.repeats, before))
    finally:
        ds.set_output_cache(settings.cache_limit)


def _thread_scaling(fn: Callable[[], Any], number: int, nbytes: int, settings: Settings) -> dict[int, float]:
    counts = (1, settings.threads)
    try:
        samples = _interleaved({n: fn for n in counts}, {n: number for n in counts}, settings.repeats,
                               before=ds.set_num_threads)
    finally:
        ds.set_num_threads(settings.threads)
    return {n: nbytes / statistics.median(v) for n, v in samples.items()}


def _vm_kib(field_name: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise OSError(f"{field_name} not in /proc/self/status")


def _rss_growth(fn: Callable[[], np.ndarray]) -> int | None:
    """Growth of the peak resident set over one call (Linux only; None elsewhere)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # reset VmHWM to the current RSS
        before = _vm_kib("VmHWM")
    except OSError:
        return None
    out = fn()
    growth = (_vm_kib("VmHWM") - before) * 1024
    del out
    return growth


def _measure_memory(gather: Callable[[], np.ndarray]) -> dict[str, Any]:
    """Peak traced allocation of one allocating gather, against its output's size."""
    gc.collect()
    tracemalloc.start()
    try:
        out = gather()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    nbytes = out.nbytes
    del out
    return {
        "output_bytes": nbytes,
        "tracemalloc_peak_bytes": peak,
        "peak_over_output": peak / nbytes,
        "rss_growth_bytes": _rss_growth(gather),
    }
# -- targets -----------------------------------------------------------------------------------------

RULE_CONV_GEOMEAN = f"layout conversions: geometric mean >= {CONVERSION_GEOMEAN} of the limit"
RULE_CONV_EACH = f"layout conversions: each >= {CONVERSION_EACH} of the limit"
RULE_CONTIGUOUS = f"contiguous, pitched and broadcast: each >= {CONTIGUOUS_EACH} of the limit"
RULE_ALIGNMENT = f"any alignment: <= {ALIGNMENT_AT_MOST}x the aligned time"
RULE_TINY_AS_STRIDED = f"tiny gather: >= {TINY_AS_STRIDED:g}x faster than as_strided(...).copy()"
RULE_TINY_NDARRAY = f"tiny gather: >= {TINY_NDARRAY:g}x faster than np.ndarray(buffer=...).copy()"
RULE_MEMORY = "gather peak memory <= output + 1 MiB (worst case)"


def rule_peer(label: str) -> str:
    return f"every case >= {PEER_EACH}x {label}"


@dataclass
class Target:
    rule: str
    case: str
    measured: float
    required: float
    unit: str  # "x" (a ratio), "limit" (a fraction of the memcpy limit) or "B"
    at_most: bool = False  # the measured figure must not exceed the required one

    @property
    def passed(self) -> bool:
        return self.measured <= self.required if self.at_most else self.measured >= self.required

    @property
    def attained(self) -> float:
        """Fraction of the target reached (1.0 or more passes)."""
        return self.required / self.measured if self.at_most else self.measured / self.required

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.rule, "case": self.case, "measured": self.measured,
                "required": self.required, "unit": self.unit, "at_most": self.at_most,
                "passed": self.passed, "attained": self.attained}


def evaluate_targets(results: list[Result], peers: list[C.Peer]) -> list[Target]:
    timed = [r for r in results if r.timed]
    out: list[Target] = []
    conv = [r for r in timed if r.row.conversion]
    if conv:
        out.append(Target(RULE_CONV_GEOMEAN, f"{len(conv)} cases", C.geometric_mean([r.of_limit for r in conv]),
                          CONVERSION_GEOMEAN, "limit"))
        out += [Target(RULE_CONV_EACH, r.row.name, r.of_limit, CONVERSION_EACH, "limit") for r in conv]
    out += [Target(RULE_CONTIGUOUS, r.row.name, r.of_limit, CONTIGUOUS_EACH, "limit")
            for r in timed if r.row.group in ("inner", "broadcast")]
    for peer in peers:
        out += [Target(rule_peer(peer.label), r.row.name, r.vs(peer.key), PEER_EACH, "x")
                for r in timed if peer.key in r.ns]
    out += [Target(RULE_ALIGNMENT, r.row.name, r.misaligned_cost, ALIGNMENT_AT_MOST, "x", at_most=True)
            for r in timed if C.DMLSTRIDE_ALIGNED in r.ns]
    for r in results:
        if r.correct and r.tiny:
            dml = r.tiny[C.DMLSTRIDE][1]
            out.append(Target(RULE_TINY_AS_STRIDED, r.row.name, r.tiny["numpy_as_strided"][1] / dml,
                              TINY_AS_STRIDED, "x"))
            out.append(Target(RULE_TINY_NDARRAY, r.row.name, r.tiny["numpy_ndarray"][1] / dml, TINY_NDARRAY, "x"))
    mem = [r for r in timed if r.memory]
    if mem:
        worst = max(mem, key=lambda r: r.memory["tracemalloc_peak_bytes"] - r.memory["output_bytes"])
        m = worst.memory
        out.append(Target(RULE_MEMORY, worst.row.name, m["tracemalloc_peak_bytes"],
                          m["output_bytes"] + MEMORY_SLACK, "B", at_most=True))
    return out


# -- reporting ---------------------------------------------------------------------------------------


def _num(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _pct(x: float | None) -> str:
    return "" if x is None or math.isnan(x) else f" ({x:.0%})"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _limit(x: float) -> str:
    return f"{x:.2f}" + (f" {FLAG}" if x > 1.0 else "")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _peers_shown(results: list[Result], peers: list[C.Peer]) -> list[C.Peer]:
    have = set().union(*(r.ns for r in results)) if results else set()
    return [p for p in peers if p.key in have]


def table_rows(results: list[Result], peers: list[C.Peer]) -> tuple[list[str], list[list[str]]]:
    """The like-for-like table: GB/s (interquartile range over repeats), fraction of the limit, speed-ups."""
    shown = _peers_shown(results, peers)
    header = (["case", "bytes", "dmlstride GB/s (IQR)"] + [f"{p.label} GB/s (IQR)" for p in shown]
              + ["limit GB/s (IQR)", "of limit"] + [f"vs {p.label}" for p in shown])
    body = []
    for r in results:
        if r.row.group == "tiny":
            continue  # timed per call, in its own table
        cells = [r.row.name, _size(r.row.bytes_moved)]
        if not r.correct:
            body.append(cells + ["ERROR" if r.error else "MISMATCH"] + [""] * (len(header) - 3))
            continue

        def gb(key: str) -> str:
            if key not in r.ns:
                return "-"
            star = "*" if key == "numpy" and r.row.group == "int4" else ""
            return _num(r.gbps(key)) + star + _pct(r.spread.get(key))

        cells += [gb(C.DMLSTRIDE)] + [gb(p.key) for p in shown] + [gb(C.LIMIT), _limit(r.of_limit)]
        cells += [_ratio(r.vs(p.key)) for p in shown]
        body.append(cells)
    return header, body


def _text_table(header: list[str], body: list[list[str]], left: int = 1) -> str:
    """Columns padded to width; the first ``left`` columns flush left, the rest right."""
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    lines = []
    for i, cells in enumerate([header] + body):
        parts = [c.ljust(w) if j < left else c.rjust(w) for j, (c, w) in enumerate(zip(cells, widths))]
        lines.append("  ".join(parts).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _md_table(header: list[str], body: list[list[str]], left: int = 1) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] * left + ["---:"] * (len(header) - left)) + "|"]
    lines += ["| " + " | ".join(c.replace("*", r"\*") for c in cells) + " |" for cells in body]
    return "\n".join(lines)


def _fmt_target(v: float, unit: str) -> str:
    if unit == "B":
        return _size(int(v))
    return f"{v:.2f}x" if unit == "x" else f"{v:.2f}"


def _target_rows(targets: list[Target]) -> tuple[list[str], list[list[str]]]:
    """One line per rule: how many cases it judged, how many passed, and the worst case."""
    header = ["result", "target", "cases met", "worst case", "measured", "required"]
    rules: dict[str, list[Target]] = {}
    for t in targets:
        rules.setdefault(t.rule, []).append(t)
    body = []
    for rule, ts in rules.items():
        worst = min(ts, key=lambda t: t.attained)
        body.append(["PASS" if all(t.passed for t in ts) else "FAIL", rule,
                     f"{sum(t.passed for t in ts)} of {len(ts)}", worst.case, _fmt_target(worst.measured, worst.unit),
                     ("<= " if worst.at_most else ">= ") + _fmt_target(worst.required, worst.unit)])
    return header, body


def _headline(results: list[Result], peers: list[C.Peer]) -> list[list[str]]:
    """The figures that sum the run up: (what, cases, figure, worst case)."""
    timed = [r for r in results if r.timed]
    rows: list[list[str]] = []

    def limit_line(label: str, rs: list[Result]) -> None:
        if rs:
            worst = min(rs, key=lambda r: r.of_limit)
            rows.append([label, str(len(rs)), f"{C.geometric_mean([r.of_limit for r in rs]):.2f} of the limit",
                         f"{worst.row.name}: {worst.of_limit:.2f}"])

    conv = [r for r in timed if r.row.conversion]
    limit_line("layout conversions", conv)
    limit_line("of which odd shapes", [r for r in conv if r.row.group == "odd"])
    limit_line("contiguous, pitched and broadcast", [r for r in timed if r.row.group in ("inner", "broadcast")])
    for p in peers:
        for label, rs in (("layout conversions", conv), ("every case", timed)):
            rs = [r for r in rs if p.key in r.ns]
            if rs:
                worst = min(rs, key=lambda r: r.vs(p.key))
                rows.append([f"{label} vs {p.label}", str(len(rs)),
                             f"{C.geometric_mean([r.vs(p.key) for r in rs]):.2f}x (geometric mean)",
                             f"{worst.row.name}: {worst.vs(p.key):.2f}x"])
    al = [r for r in timed if C.DMLSTRIDE_ALIGNED in r.ns]
    if al:
        worst = max(al, key=lambda r: r.misaligned_cost)
        rows.append(["misaligned over aligned time", str(len(al)),
                     f"{C.geometric_mean([r.misaligned_cost for r in al]):.2f}x (geometric mean)",
                     f"{worst.row.name}: {worst.misaligned_cost:.2f}x"])
    over = [r for r in timed if r.of_limit > 1.0]
    if over:
        rows.append([f"above the limit ({FLAG})", str(len(over)), "",
                     ", ".join(f"{r.row.name}: {r.of_limit:.2f}" for r in over)])
    return rows


def _sections(results: list[Result], targets: list[Target], peers: list[C.Peer], settings: Settings,
              md: bool) -> list[tuple[str, str]]:
    """(title, body) of every report section, as text or markdown."""
    render = _md_table if md else _text_table
    out: list[tuple[str, str]] = []
    shown = _peers_shown(results, peers)

    head = _headline(results, shown)
    if head:
        out.append(("summary", render(["figure", "cases", "value", "worst case"], head)))

    notes = [f"Every column writes into memory allocated once. limit: memcpy of the same bytes "
             f"(np.copyto of {settings.threads} equal chunks on {settings.threads} threads), the most a copy "
             f"can reach; of limit = dmlstride's speed over it, {FLAG} marks a figure above 1.0, a red flag "
             f"to explain (a broadcast source reads fewer bytes than memcpy does; streaming stores skip the "
             f"read for ownership that a memcpy with ordinary stores pays: see --streaming-memcpy; otherwise "
             f"suspect the measurement). IQR: the interquartile range of the repeats over their median. "
             f"vs X: dmlstride's speed over X's."]
    if any(r.row.group == "int4" and "numpy" in r.ns for r in results):
        notes.append("* INT4 has no numpy view: that column is a vectorised numpy unpack "
                     "(and repack for copy) instead.")
    out.append(("like for like", render(*table_rows(results, peers)) + "\n\n" + "\n\n".join(notes)))

    if targets:
        out.append(("targets (speed targets are reported; --check-targets makes a miss fail the run)",
                    render(*_target_rows(targets), left=4)))

    al = [r for r in results if r.timed and C.DMLSTRIDE_ALIGNED in r.ns]
    if al:
        body = [[r.row.name, _num(r.gbps(C.DMLSTRIDE)) + _pct(r.spread[C.DMLSTRIDE]),
                 _num(r.gbps(C.DMLSTRIDE_ALIGNED)) + _pct(r.spread[C.DMLSTRIDE_ALIGNED]),
                 f"{r.misaligned_cost:.2f}x"] for r in al]
        out.append(("buffer placement (dst+k: the destination k bytes past the source modulo 4096; src+k: "
                    "the source k bytes past; both+k: both k bytes past a page boundary, as glibc places a "
                    "large numpy array; each timed against page-aligned buffers in the same loop)",
                    render(["case", "placed GB/s (IQR)", "page-aligned GB/s (IQR)", "time over aligned"], body)))

    for r in results:
        if r.tiny:
            dml = r.tiny[C.DMLSTRIDE][1]
            body = [[label, f"{ns / 1000:.3f}{_pct(sp)}", f"{ns / dml:.2f}x"] for label, ns, sp in r.tiny.values()]
            out.append((f"per-call time, {r.row.name} (prebuilt descriptor, {TINY_CALLS} calls per sample)",
                        render(["implementation", "us per call (IQR)", "time over dmlstride.gather"], body)))

    alloc = [r for r in results if r.correct and r.alloc_ns]
    if alloc:
        cols = [(k, h) for k, h in ALLOC_COLUMNS if any(k in r.alloc_ns for r in alloc)]
        body = []
        for r in alloc:
            cells = [r.row.name, _size(r.row.bytes_moved)]
            cells += [_num(r.gbps(k, r.alloc_ns)) + _pct(r.alloc_spread.get(k)) if k in r.alloc_ns else "-"
                      for k, _ in cols]
            on, off = r.alloc_ns.get("cache_on"), r.alloc_ns["cache_off"]
            cells.append("-" if on is None else f"{off / on:.2f}x")
            cells.append(f"{r.alloc_ns['numpy_copy'] / (on or off):.2f}x")
            body.append(cells)
        limit = settings.cache_limit
        out.append((f"allocating gathers: a new array per call (output cache on = its limit of "
                    f"{limit >> 20} MiB, off = 0; numpy's new arrays fault their pages in)",
                    render(["case", "bytes"] + [h for _, h in cols] + ["cache on vs off", "vs numpy .copy()"],
                           body)))

    scaled = [r for r in results if r.threads]
    if scaled:
        n = settings.threads
        body = [[r.row.name, _num(r.threads[1]), _num(r.threads[n]), f"{r.threads[n] / r.threads[1]:.2f}x"]
                for r in scaled]
        out.append((f"thread scaling (dmlstride, 1 vs {n} threads, interleaved)",
                    render(["case", "1 thread GB/s", f"{n} threads GB/s", f"{n} vs 1"], body)))

    mem = [r for r in results if r.memory]
    if mem:
        body = []
        for r in mem:
            m = r.memory
            rss = m["rss_growth_bytes"]
            body.append([r.row.name, _size(m["output_bytes"]), _size(m["tracemalloc_peak_bytes"]),
                         f"{m['peak_over_output']:.3f}",
                         "-" if rss is None else f"{rss / m['output_bytes']:.2f}"])
        out.append(("memory of one allocating gather (tracemalloc peak; RSS growth is a cross-check "
                    "that also sees untracked allocations, and reads low when freed pages are reused)",
                    render(["case", "output", "peak", "peak / output", "RSS growth / output"], body)))
    return out


def report_text(results: list[Result], targets: list[Target], peers: list[C.Peer], settings: Settings,
                meta: dict[str, Any]) -> str:
    lines = [f"dmlstride benchmark: {meta['summary']}", ""]
    for title, body in _sections(results, targets, peers, settings, md=False):
        lines += [title, body, ""]
    missed = [t for t in targets if not t.passed]
    if missed:
        lines.append("missed targets")
        lines += [f"  {t.case}: {_fmt_target(t.measured, t.unit)}, {t.rule}" for t in missed]
        lines.append("")
    return "\n".join(lines)


def report_markdown(results: list[Result], targets: list[Target], peers: list[C.Peer], settings: Settings,
                    meta: dict[str, Any]) -> str:
    lines = [f"Measured with `{meta['command']}`: {meta['summary']}.", ""]
    for title, body in _sections(results, targets, peers, settings, md=True):
        lines += [f"**{title[0].upper()}{title[1:]}**", "", body, ""]
    return "\n".join(lines)


def report_json(results: list[Result], targets: list[Target], meta: dict[str, Any]) -> dict[str, Any]:
    def clean(d: dict[str, float]) -> dict[str, float | None]:
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in d.items()}

    rows = []
    for r in results:
        row = r.row
        rows.append({
            "name": row.name, "op": row.op, "group": row.group, "data_type": row.desc.data_type.name,
            "sizes": list(row.sizes), "bytes_moved": row.bytes_moved,
            "src_skew": row.src_skew, "dst_skew": row.dst_skew,
            "identical": r.correct, "mismatched": r.mismatched, "error": r.error,
            "median_ns": r.ns, "spread": clean(r.spread), "calls_per_sample": r.number,
            "gbps": {k: r.gbps(k) for k in r.ns},
            "fraction_of_limit": r.of_limit if r.timed else None,
            "speedup": {k: r.vs(k) for k in r.ns if k not in (C.DMLSTRIDE, C.LIMIT)} if r.timed else None,
            "allocating_median_ns": r.alloc_ns or None, "allocating_spread": clean(r.alloc_spread) or None,
            "per_call_ns": {k: ns for k, (_, ns, _) in r.tiny.items()} or None,
            "thread_scaling_gbps": {str(k): v for k, v in r.threads.items()} or None,
            "memory": r.memory,
        })
    return {
        "meta": meta,
        "cases": rows,
        "targets": [t.as_dict() for t in targets],
        "correct": all(r.correct for r in results),
        # None when no target was judged (a quick run)
        "targets_met": all(t.passed for t in targets) if targets else None,
    }


def closing_line(results: list[Result], targets: list[Target], meta: dict[str, Any], *, quick: bool) -> str:
    """One line saying what the run checked: correctness always, speed targets in a full run."""
    failed = sum(not r.correct for r in results)
    cases = f"{len(results)} case" + ("" if len(results) == 1 else "s")
    checked = (f"{cases} in {meta['seconds']} s: every implementation's bytes compared with "
               f"dmlstride's, {len(results) - failed} identical, {failed} failed")
    if quick:
        return f"quick run, {checked}; timings at quick sizes are not judged against speed targets"
    missed = sum(not t.passed for t in targets)
    return f"{checked}; {missed} of {len(targets)} speed target{'' if len(targets) == 1 else 's'} missed"


def plot(results: list[Result], peers: list[C.Peer], path: str, meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in results if r.timed]
    if not shown:
        return
    peers = _peers_shown(shown, peers)
    y = np.arange(len(shown))
    colours = [OP_COLOURS[r.row.op] for r in shown]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 1.8 + 0.2 * len(shown)), sharey=True)
    fractions = [r.of_limit for r in shown]
    left.barh(y, fractions, color=colours)
    for x, ls in ((CONVERSION_EACH, ":"), (CONVERSION_GEOMEAN, "--"), (CONTIGUOUS_EACH, "-."), (1.0, "-")):
        left.axvline(x, color="black" if x == 1.0 else "grey", lw=1, ls=ls)
    left.set_xlabel(f"fraction of the {meta['threads']}-thread memcpy limit "
                    f"(lines: {CONVERSION_EACH}, {CONVERSION_GEOMEAN}, {CONTIGUOUS_EACH}, 1.0)")
    for yi, v in zip(y, fractions):
        left.text(v, yi, f" {v:.2f}", va="center", fontsize=6)
    left.set_xlim(0, max(1.15, max(fractions) * 1.15))

    markers = [("o", "black"), ("s", "tab:red"), ("^", "tab:purple"), ("D", "tab:brown"), ("v", "tab:olive")]
    ratios = [x for p in peers for r in shown for x in [r.vs(p.key)] if x is not None]
    for p, (m, colour) in zip(peers, markers):
        pts = [(r.vs(p.key), yi) for r, yi in zip(shown, y) if p.key in r.ns]
        right.scatter([v for v, _ in pts], [yi for _, yi in pts], marker=m, s=14, color=colour, label=p.label)
    right.set_xscale("log")
    lo, hi = min(ratios + [1.0]) / 1.5, max(ratios + [2.0]) * 1.5
    right.set_xlim(lo, hi)
    ticks = sorted({m * 10.0**e for e in range(-3, 4) for m in (1, 2, 5) if lo <= m * 10.0**e <= hi})
    right.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    right.minorticks_off()
    right.axvline(1.0, color="black", lw=1)
    right.set_xlabel("dmlstride's speed over each peer's (log scale; right of the line: dmlstride faster)")
    right.legend(loc="lower right", fontsize=8)
    right.grid(axis="y", lw=0.3, alpha=0.5)
    left.set_yticks(y, [r.row.name for r in shown], fontsize=7)
    left.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in OP_COLOURS.values()]
    fig.legend(handles, list(OP_COLOURS), loc="lower center", ncol=len(OP_COLOURS), fontsize=8, frameon=False)
    fig.suptitle(textwrap.fill(f"dmlstride like for like: {meta['summary']}", 180), fontsize=8)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- main --------------------------------------------------------------------------------------------


def _select(rows: list[C.Row], patterns: list[str] | None) -> list[C.Row]:
    if not patterns:
        return rows

    def match(name: str, pat: str) -> bool:
        return fnmatch.fnmatchcase(name, pat) if any(ch in pat for ch in "*?[") else pat in name

    return [r for r in rows if any(match(r.name, p) for p in patterns)]


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _meta(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    torch_version = getattr(C.torch, "__version__", None)
    peers = ", ".join(p.label for p in settings.peers)
    omp = os.environ.get("OMP_WAIT_POLICY")
    omp_note = (f"OMP_WAIT_POLICY={omp} ({'set by the harness' if C.OMP_WAIT_POLICY_SET_HERE else 'as given'}"
                f", so PyTorch's idle OpenMP workers {'sleep' if omp.upper() == 'PASSIVE' else 'may spin'})")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    summary = (f"{'quick' if args.quick else 'full'} run, {settings.threads} threads for dmlstride, "
               f"{'PyTorch and ' if torch_version and any(p.key == 'torch' for p in settings.peers) else ''}"
               f"the memcpy limit, {cpus} CPUs, median of {settings.repeats} interleaved repeats, "
               + ("glibc memcpy with streaming stores from 16 MiB, " if _streaming() else "")
               + f"peers: {peers or 'none'}"
               + (f", {omp_note}" if torch_version else "")
               + (f", load average {load:.1f} at the start" if load is not None else "")
               + f"; {_cpu_model() or platform.machine()}, Python {platform.python_version()}, "
               f"numpy {np.__version__}, dmlstride {ds.__version__}"
               + (f", torch {torch_version}" if torch_version else ""))
    return {
        "summary": summary,
        "command": " ".join(["python benchmarks/run.py"] + sys.argv[1:]),
        "quick": args.quick,
        "threads": settings.threads,
        "cpus": cpus,
        "repeats": settings.repeats,
        "peers": [p.key for p in settings.peers],
        "omp_wait_policy": omp if torch_version else None,
        "output_cache_bytes": settings.cache_limit,
        "streaming_memcpy": _streaming(),
        "load_average_start": load,
        "cpu": _cpu_model(),
        "machine": platform.machine(),
        "system": platform.system(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "dmlstride": ds.__version__,
        "torch": torch_version,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small sizes and few repeats (under a minute): timings and the correctness check, "
                        "no speed targets")
    p.add_argument("--json", metavar="PATH", help="write machine-readable results here")
    p.add_argument("--markdown", metavar="PATH", help="write the report as markdown here")
    p.add_argument("--plot", metavar="PATH", help="draw a PNG chart here (needs matplotlib)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="thread count for dmlstride, PyTorch and the memcpy limit (default: dmlstride's)")
    p.add_argument("--case", action="append", metavar="PATTERN",
                   help="run only cases whose name contains PATTERN (or matches it, with * ? [ ]); "
                        "repeatable")
    p.add_argument("--repeats", type=int, metavar="N", help="timing repeats per case (default 9, quick 5)")
    p.add_argument("--skip-peer", action="append", metavar="NAME", default=[],
                   choices=[peer.key for peer in C.PEERS], help="leave a peer's column out; repeatable")
    p.add_argument("--streaming-memcpy", action="store_true",
                   help="make glibc's memcpy use streaming stores from 16 MiB, for the limit and every "
                        f"implementation alike (re-runs the process with GLIBC_TUNABLES={STREAMING_TUNABLE})")
    p.add_argument("--check-targets", action="store_true", help=f"exit {EXIT_TARGETS} if a speed target is missed")
    p.add_argument("--list", action="store_true", help="list the case names and exit")
    args = p.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        p.error(f"--threads is {args.threads}; expected at least 1")
    if args.quick and args.check_targets:
        p.error("--check-targets needs a full run: speed targets are not judged at --quick sizes")
    if args.repeats is not None and args.repeats < 1:
        p.error(f"--repeats is {args.repeats}; expected at least 1")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error("--plot needs matplotlib, which is not installed; "
                    "install the bench extra (pip install 'dmlstride[bench]') or matplotlib")
    return args


def _streaming() -> bool:
    return STREAMING_TUNABLE in os.environ.get("GLIBC_TUNABLES", "").split(":")


def run_rows(rows: list[C.Row], settings: Settings, name_width: int = 36) -> list[Result]:
    """:func:`run_row` for each row, with a progress line each on stderr."""
    copier = C.ThreadedCopy(settings.threads)
    results = []
    try:
        for i, row in enumerate(rows, 1):
            print(f"[{i:2}/{len(rows)}] {row.name:<{name_width}}", end="", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            res = run_row(row, settings, copier)
            results.append(res)
            print(f" {_progress(res, settings.peers)}  ({time.perf_counter() - t0:.1f} s)",
                  file=sys.stderr, flush=True)
    finally:
        copier.close()
    return results


def thread_budget(threads: int | None, skip_peer: list[str]) -> tuple[int, list[C.Peer]]:
    """Set dmlstride's thread count (``None``: keep its default) and give every available
    peer not in ``skip_peer`` the same; return the count and those peers."""
    if threads is not None:
        ds.set_num_threads(threads)
    threads = ds.get_num_threads()
    peers = [p for p in C.PEERS if p.available and p.key not in skip_peer]
    for peer in peers:
        if peer.threads is not None:
            peer.threads(threads)  # the same thread budget as dmlstride
    return threads, peers


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.streaming_memcpy and not _streaming() and argv is None:
        # glibc reads its tunables at start-up: run again with the variable set
        tunables = ":".join(t for t in (os.environ.get("GLIBC_TUNABLES"), STREAMING_TUNABLE) if t)
        env = {**os.environ, "GLIBC_TUNABLES": tunables}
        if C.OMP_WAIT_POLICY_SET_HERE:
            del env["OMP_WAIT_POLICY"]  # the new process sets it again, and says so
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    rows = _select(C.build_rows(quick=args.quick), args.case)
    if args.list:
        print("\n".join(r.name for r in rows))
        return 0
    if not rows:
        print(f"no case matches {args.case}; see --list", file=sys.stderr)
        return 2
    threads, peers = thread_budget(args.threads, args.skip_peer)
    settings = Settings(
        repeats=args.repeats or (5 if args.quick else 9),
        min_sample_ns=2_000_000 if args.quick else 10_000_000,
        threads=threads,
        peers=peers,
        cache_limit=ds.output_cache_info()[1],
    )
    meta = _meta(args, settings)
    print(f"dmlstride benchmark: {len(rows)} cases; {meta['summary']}", file=sys.stderr)
    print(f"dmlstride imported from {Path(ds.__file__).parent}", file=sys.stderr)

    started = time.perf_counter()
    results = run_rows(rows, settings)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    meta["load_average_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    targets = [] if args.quick else evaluate_targets(results, peers)
    print(report_text(results, targets, peers, settings, meta))
    if args.markdown:
        Path(args.markdown).write_text(report_markdown(results, targets, peers, settings, meta))
    if args.json:
        Path(args.json).write_text(json.dumps(report_json(results, targets, meta), indent=2) + "\n")
    if args.plot:
        plot(results, peers, args.plot, meta)

    failed = [r.row.name for r in results if not r.correct]
    missed = [t for t in targets if not t.passed]
    print(closing_line(results, targets, meta, quick=args.quick))
    if failed:
        print("correctness check failed: " + ", ".join(failed), file=sys.stderr)
        return EXIT_MISMATCH
    if args.check_targets and missed:
        return EXIT_TARGETS
    return 0


def _progress(res: Result, peers: list[C.Peer]) -> str:
    if res.error:
        return f"ERROR {res.error}"
    if res.mismatched:
        return f"MISMATCH: {', '.join(res.mismatched)} differ from dmlstride"
    if res.tiny:
        dml = res.tiny[C.DMLSTRIDE][1]
        return f"{dml / 1000:.3f} us per call"
    parts = [f"{_num(res.gbps(C.DMLSTRIDE)):>6} GB/s", f"{res.of_limit:5.2f} of limit"]
    parts += [f"{res.vs(p.key):6.2f}x {p.label}" for p in peers if p.key in res.ns]
    if C.DMLSTRIDE_ALIGNED in res.ns:
        parts.append(f"{res.misaligned_cost:.2f}x aligned time")
    return "  ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
