"""Benchmark dmlstride's gather, scatter and copy_tensor against numpy and memcpy.

Usage::

    python benchmarks/run.py                    # every case at full size (a few minutes)
    python benchmarks/run.py --quick            # small sizes, few repeats: a correctness smoke run
                                                # (timings only: no speed targets are judged)
    python benchmarks/run.py --case gather/ --case tiny --threads 1
    python benchmarks/run.py --json r.json --markdown r.md --plot r.png
    python benchmarks/run.py --no-output-cache  # every gather output newly mapped

For each case every implementation runs once and the bytes they produce are
compared; then they are timed interleaved (dmlstride, numpy, numpy, memcpy,
[torch], dmlstride, ...) and the median of the repeats is quoted, so that the
ratios come from the same moments of a noisy machine.  GB/s is the packed
tensor's size in bytes divided by the median time.

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

import cases as C  # this script's folder is first on sys.path

TINY_CALLS = 2000  # calls per timing sample for the per-call overhead case
MEMORY_SLACK = 1 << 20  # a gather may use this much beyond its output ("a constant")
EXIT_MISMATCH = 1
EXIT_TARGETS = 3

# (key, header) of the timed columns, in table order.
COLUMNS = [
    (C.DMLSTRIDE, "dmlstride"),
    (C.NP_AS_STRIDED, "np as_strided"),
    (C.NP_NDARRAY, "np ndarray"),
    (C.MEMCPY, "memcpy"),
    (C.TORCH, "torch"),
]
OP_COLOURS = {"gather": "tab:blue", "scatter": "tab:orange", "copy": "tab:green"}


@dataclass
class Settings:
    repeats: int
    min_sample_ns: int
    preallocated: bool


@dataclass
class Result:
    row: C.Row
    ns: dict[str, float] = field(default_factory=dict)  # median nanoseconds per call
    spread: dict[str, float] = field(default_factory=dict)  # interquartile range / median
    number: dict[str, int] = field(default_factory=dict)  # calls per sample
    mismatched: list[str] = field(default_factory=list)
    error: str | None = None
    threads: dict[int, float] = field(default_factory=dict)  # thread count -> GB/s
    memory: dict[str, Any] | None = None

    @property
    def correct(self) -> bool:
        return self.error is None and not self.mismatched

    @property
    def timed(self) -> bool:
        return self.correct and C.DMLSTRIDE in self.ns

    def gbps(self, key: str) -> float | None:
        ns = self.ns.get(key)
        return None if ns is None else self.row.bytes_moved / ns

    @property
    def best_numpy(self) -> float:
        return max(self.gbps(k) for k in C.NUMPY_KEYS if k in self.ns)

    @property
    def speedup(self) -> float:
        return self.gbps(C.DMLSTRIDE) / self.best_numpy

    @property
    def of_memcpy(self) -> float:
        return self.gbps(C.DMLSTRIDE) / self.gbps(C.MEMCPY)


# -- timing ------------------------------------------------------------------------------------------


def _sample(fn: Callable[[], Any], number: int) -> float:
    """Nanoseconds per call, over ``number`` back-to-back calls."""
    start = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return (time.perf_counter_ns() - start) / number


def _calls_per_sample(fn: Callable[[], Any], min_sample_ns: int) -> int:
    once = _sample(fn, 1)
    return max(1, min(100_000, math.ceil(min_sample_ns / max(once, 1.0))))


def _interleaved(fns: dict[Any, Callable[[], Any]], number: dict[Any, int], repeats: int,
                 before: Callable[[Any], None] | None = None) -> dict[Any, list[float]]:
    """Time every callable once per repeat, in turn: A B C, A B C, ..."""
    samples: dict[Any, list[float]] = {k: [] for k in fns}
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for key, fn in fns.items():
                if before is not None:
                    before(key)
                samples[key].append(_sample(fn, number[key]))
    finally:
        gc.enable()
    return samples


def _spread(xs: list[float]) -> float:
    if len(xs) < 4:
        return float("nan")
    q1, _, q3 = statistics.quantiles(xs, n=4)
    return (q3 - q1) / statistics.median(xs)


def _flat_bytes(x: Any) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        x = x.numpy()  # a torch tensor
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


def run_row(row: C.Row, settings: Settings) -> Result:
    """Check that every implementation produces the same bytes, then time them."""
    res = Result(row)
    try:
        prep = C.prepare(row, preallocated=settings.preallocated)
        outputs = {}
        for key, fn in prep.impls.items():
            out = fn()
            if key != C.MEMCPY:
                outputs[key] = _flat_bytes(out)
        ref = outputs.pop(C.DMLSTRIDE)
        res.mismatched = [k for k, v in outputs.items() if not np.array_equal(v, ref)]
        del outputs, ref
    except Exception as exc:  # a failing implementation is a finding, not a crash
        res.error = f"{type(exc).__name__}: {exc}"
        return res
    if res.mismatched:
        return res

    impls = prep.impls
    if row.group == "tiny":
        res.number = {k: TINY_CALLS for k in impls}
    else:
        res.number = {k: _calls_per_sample(fn, settings.min_sample_ns) for k, fn in impls.items()}
    samples = _interleaved(impls, res.number, settings.repeats)
    res.ns = {k: statistics.median(v) for k, v in samples.items()}
    res.spread = {k: _spread(v) for k, v in samples.items()}

    if row.scaling:
        res.threads = _thread_scaling(impls[C.DMLSTRIDE], res.number[C.DMLSTRIDE], settings.repeats,
                                      row.bytes_moved)
    if prep.new_gather is not None and row.group != "tiny":
        res.memory = _measure_memory(prep.new_gather)
    return res


def _thread_scaling(fn: Callable[[], Any], number: int, repeats: int, nbytes: int) -> dict[int, float]:
    saved = ds.get_num_threads()
    counts = (1, 2)
    try:
        samples = _interleaved({n: fn for n in counts}, {n: number for n in counts}, repeats,
                               before=ds.set_num_threads)
    finally:
        ds.set_num_threads(saved)
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


@dataclass
class Target:
    target: str
    case: str
    measured: float
    required: float
    unit: str  # "x", "GB/s" or "B"
    at_most: bool = False  # the measured figure must not exceed the required one

    @property
    def passed(self) -> bool:
        return self.measured <= self.required if self.at_most else self.measured >= self.required

    @property
    def attained(self) -> float:
        """Fraction of the target reached (1.0 or more passes)."""
        return self.required / self.measured if self.at_most else self.measured / self.required

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "case": self.case, "measured": self.measured,
                "required": self.required, "unit": self.unit, "at_most": self.at_most,
                "passed": self.passed, "attained": self.attained}


def evaluate_targets(results: list[Result]) -> list[Target]:
    timed = [r for r in results if r.timed]
    out: list[Target] = []
    for r in timed:
        if r.row.group == "tiny":
            continue  # judged per call below
        out.append(Target(">= 1.0x best numpy", r.row.name, r.speedup, 1.0, "x"))
        floor = min(4 * r.best_numpy, 0.8 * r.gbps(C.MEMCPY))
        out.append(Target(">= min(4x numpy, 0.8x memcpy)", r.row.name, r.gbps(C.DMLSTRIDE), floor, "GB/s"))
    layout = [r.speedup for r in timed if r.row.group == "layout"]
    if layout:
        out.append(Target("layout conversions: geomean >= 5x numpy", f"{len(layout)} cases",
                          C.geometric_mean(layout), 5.0, "x"))
    for r in timed:
        if r.row.group == "inner":
            out.append(Target("inner-contiguous: >= 0.9x memcpy", r.row.name, r.of_memcpy, 0.9, "x"))
    for r in timed:
        if r.row.group == "tiny":
            dml = r.ns[C.DMLSTRIDE]
            out.append(Target("tiny: >= 5x faster than as_strided().copy()", r.row.name,
                              r.ns[C.NP_AS_STRIDED] / dml, 5.0, "x"))
            out.append(Target("tiny: >= 1.5x faster than np.ndarray().copy()", r.row.name,
                              r.ns[C.NP_NDARRAY] / dml, 1.5, "x"))
    mem = [r for r in timed if r.memory]
    if mem:
        worst = max(mem, key=lambda r: r.memory["tracemalloc_peak_bytes"] - r.memory["output_bytes"])
        m = worst.memory
        out.append(Target("gather peak memory <= output + 1 MiB (worst case)", worst.row.name,
                          m["tracemalloc_peak_bytes"], m["output_bytes"] + MEMORY_SLACK, "B", at_most=True))
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


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _columns(results: list[Result]) -> list[tuple[str, str]]:
    have = set().union(*(r.ns for r in results)) if results else set()
    return [(k, h) for k, h in COLUMNS if k != C.TORCH or k in have]


def table_rows(results: list[Result]) -> tuple[list[str], list[list[str]]]:
    cols = _columns(results)
    header = ["case", "bytes moved"] + [f"{h} GB/s" for _, h in cols] + ["vs best numpy", "of memcpy"]
    body = []
    for r in results:
        cells = [r.row.name, _size(r.row.bytes_moved)]
        if not r.correct:
            status = "ERROR" if r.error else "MISMATCH"
            body.append(cells + [status] + [""] * (len(header) - 3))
            continue
        for key, _ in cols:
            if key == C.NP_AS_STRIDED and C.NP_REFERENCE in r.ns:
                cells.append(_num(r.gbps(C.NP_REFERENCE)) + "*")
            else:
                cells.append(_num(r.gbps(key)))
        cells += [f"{r.speedup:.2f}x", f"{r.of_memcpy:.2f}"]
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


def _target_rows(targets: list[Target]) -> tuple[list[str], list[list[str]]]:
    def fmt(v: float, unit: str) -> str:
        if unit == "B":
            return _size(int(v))
        return f"{v:.2f}x" if unit == "x" else f"{_num(v)} GB/s"

    header = ["result", "target", "case", "measured", "required", "attained"]
    body = []
    for t in targets:
        body.append(["PASS" if t.passed else "FAIL", t.target, t.case, fmt(t.measured, t.unit),
                     ("<= " if t.at_most else ">= ") + fmt(t.required, t.unit), f"{t.attained:.0%}"])
    return header, body


def _sections(results: list[Result], targets: list[Target], md: bool) -> list[tuple[str, str]]:
    """(title, body) of every report section, as text or markdown."""
    render = _md_table if md else _text_table
    out = [("results", render(*table_rows(results)))]
    notes = []
    if any(C.NP_REFERENCE in r.ns for r in results):
        notes.append("* INT4 has no numpy view: that column is a vectorised numpy unpack "
                     "(and repack for copy) instead.")
    if notes:
        out[-1] = ("results", out[-1][1] + "\n\n" + "\n".join(notes))

    tiny = [r for r in results if r.timed and r.row.group == "tiny"]
    if tiny:
        r = tiny[0]
        labels = [(C.DMLSTRIDE, "dmlstride.gather(buf, desc)"),
                  (C.NP_AS_STRIDED, "as_strided(...).copy()"),
                  (C.NP_NDARRAY, "np.ndarray(buffer=...).copy()"),
                  (C.TORCH, "torch.as_strided(...).contiguous()")]
        body = [[label, f"{r.ns[k] / 1000:.2f}", f"{r.ns[k] / r.ns[C.DMLSTRIDE]:.2f}x"]
                for k, label in labels if k in r.ns]
        out.append((f"per-call time, {r.row.name} (prebuilt descriptor, {TINY_CALLS} calls per sample)",
                    render(["implementation", "us per call", "dmlstride faster by"], body)))

    scaled = [r for r in results if r.threads]
    if scaled:
        body = [[r.row.name, _num(r.threads[1]), _num(r.threads[2]), f"{r.threads[2] / r.threads[1]:.2f}x"]
                for r in scaled]
        out.append(("thread scaling (dmlstride, 1 vs 2 threads, interleaved)",
                    render(["case", "1 thread GB/s", "2 threads GB/s", "2 vs 1"], body)))

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
                    "that also sees untracked allocations, and can read low when freed pages are reused)",
                    render(["case", "output", "peak", "peak / output", "RSS growth / output"], body)))

    layout = [r for r in results if r.timed and r.row.group == "layout"]
    if layout:
        # A copy cannot beat memcpy of the same bytes, so memcpy / best numpy
        # bounds the speed-up any implementation could show on each case.
        speedups = [r.speedup for r in layout]
        ceilings = [r.gbps(C.MEMCPY) / r.best_numpy for r in layout]
        body = [[r.row.name, f"{s:.2f}x", f"{c:.2f}x", f"{r.of_memcpy:.2f}"]
                for r, s, c in zip(layout, speedups, ceilings)]
        body.append([f"geometric mean ({len(layout)} cases)", f"{C.geometric_mean(speedups):.2f}x",
                     f"{C.geometric_mean(ceilings):.2f}x",
                     f"{C.geometric_mean([r.of_memcpy for r in layout]):.2f}"])
        out.append(("layout conversions against their ceiling (memcpy / best numpy: "
                    "the speed-up of a copy as fast as memcpy)",
                    render(["case", "vs best numpy", "ceiling", "of memcpy"], body)))

    if targets:
        out.append(("targets (ratios from this run; speed targets are reported, not asserted)",
                    render(*_target_rows(targets), left=3)))
    return out


def report_text(results: list[Result], targets: list[Target], meta: dict[str, Any]) -> str:
    lines = [f"dmlstride benchmark: {meta['summary']}", ""]
    for title, body in _sections(results, targets, md=False):
        lines += [title, body, ""]
    return "\n".join(lines)


def report_markdown(results: list[Result], targets: list[Target], meta: dict[str, Any]) -> str:
    lines = [f"Measured with `{meta['command']}`: {meta['summary']}.", ""]
    for title, body in _sections(results, targets, md=True):
        lines += [f"**{title[0].upper()}{title[1:]}**", "", body, ""]
    return "\n".join(lines)


def report_json(results: list[Result], targets: list[Target], meta: dict[str, Any]) -> dict[str, Any]:
    def nan_to_none(x: float) -> float | None:
        return None if isinstance(x, float) and math.isnan(x) else x

    rows = []
    for r in results:
        row = r.row
        rows.append({
            "name": row.name, "op": row.op, "group": row.group, "data_type": row.desc.data_type.name,
            "sizes": list(row.sizes), "bytes_moved": row.bytes_moved,
            "identical": r.correct, "mismatched": r.mismatched, "error": r.error,
            "median_ns": r.ns, "spread": {k: nan_to_none(v) for k, v in r.spread.items()},
            "calls_per_sample": r.number,
            "gbps": {k: r.gbps(k) for k in r.ns},
            "speedup_vs_best_numpy": r.speedup if r.timed else None,
            "fraction_of_memcpy": r.of_memcpy if r.timed else None,
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


def plot(results: list[Result], path: str, meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in results if r.timed]
    if not shown:
        return
    y = np.arange(len(shown))
    colours = [OP_COLOURS[r.row.op] for r in shown]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 1.6 + 0.27 * len(shown)), sharey=True)
    speedups = [r.speedup for r in shown]
    left.barh(y, speedups, color=colours)
    left.set_xscale("log")
    lo, hi = min(speedups + [1.0]) / 1.5, max(speedups + [5.0]) * 2
    left.set_xlim(lo, hi)
    steps = (1, 2, 5) if hi / lo < 300 else (1,)  # 1-2-5 ticks, or decades on a wide range
    ticks = sorted({m * 10.0**e for e in range(-3, 4) for m in steps if lo <= m * 10.0**e <= hi} | {5.0})
    left.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    left.minorticks_off()
    left.axvline(1.0, color="black", lw=1)
    left.axvline(5.0, color="grey", lw=1, ls=":")
    left.set_xlabel("speed-up over the best numpy baseline (log scale; dotted: 5x)")
    for yi, v in zip(y, speedups):
        left.text(v, yi, f" {_num(v)}x", va="center", fontsize=7)
    fractions = [r.of_memcpy for r in shown]
    right.barh(y, fractions, color=colours)
    for x, ls in ((0.8, ":"), (0.9, "--"), (1.0, "-")):
        right.axvline(x, color="black" if x == 1.0 else "grey", lw=1, ls=ls)
    right.set_xlabel("fraction of memcpy of the same bytes (lines: 0.8, 0.9, 1.0)")
    for yi, v in zip(y, fractions):
        right.text(v, yi, f" {v:.2f}", va="center", fontsize=7)
    right.set_xlim(0, max(1.15, max(fractions) * 1.15))
    left.set_yticks(y, [r.row.name for r in shown], fontsize=8)
    left.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in OP_COLOURS.values()]
    fig.legend(handles, list(OP_COLOURS), loc="lower center", ncol=len(OP_COLOURS), fontsize=8, frameon=False)
    run, _, versions = meta["summary"].partition("; ")
    fig.suptitle(f"dmlstride vs numpy: {run}\n{versions}", fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main --------------------------------------------------------------------------------------------


def _select(rows: list[C.Row], patterns: list[str] | None) -> list[C.Row]:
    if not patterns:
        return rows

    def match(name: str, pat: str) -> bool:
        return fnmatch.fnmatchcase(name, pat) if any(ch in pat for ch in "*?[") else pat in name

    return [r for r in rows if any(match(r.name, p) for p in patterns)]


def _output_mode(settings: Settings) -> str:
    if settings.preallocated:
        return "preallocated"
    limit = ds.output_cache_info()[1]
    if not limit:
        return "allocated per call (output cache off)"
    return (f"allocated per call (dmlstride's output cache of {limit >> 20} MiB reuses freed outputs; "
            "numpy's and memcpy's new arrays fault their pages in)")


def _meta(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    torch_version = getattr(C.torch, "__version__", None)
    mode = "quick" if args.quick else "full"
    summary = (f"{mode} run, {ds.get_num_threads()} kernel threads, {cpus} CPUs, "
               f"median of {settings.repeats} interleaved repeats, "
               f"gather output {_output_mode(settings)}; "
               f"Python {platform.python_version()}, numpy {np.__version__}, dmlstride {ds.__version__}"
               + (f", torch {torch_version}" if torch_version else ""))
    return {
        "summary": summary,
        "command": " ".join(["python benchmarks/run.py"] + sys.argv[1:]),
        "quick": args.quick,
        "threads": ds.get_num_threads(),
        "cpus": cpus,
        "repeats": settings.repeats,
        "preallocated": settings.preallocated,
        "output_cache_bytes": ds.output_cache_info()[1],
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
    p.add_argument("--plot", metavar="PATH", help="draw a PNG bar chart here (needs matplotlib)")
    p.add_argument("--threads", type=int, metavar="N", help="kernel thread count (default: dmlstride's)")
    p.add_argument("--case", action="append", metavar="PATTERN",
                   help="run only cases whose name contains PATTERN (or matches it, with * ? [ ]); "
                        "repeatable")
    p.add_argument("--repeats", type=int, metavar="N", help="timing repeats per case (default 15, quick 5)")
    p.add_argument("--preallocated", action="store_true",
                   help="gathers write into an output allocated once (out=, np.copyto) instead of a new array")
    p.add_argument("--no-output-cache", action="store_true",
                   help="turn dmlstride's gather output cache off (every output is newly mapped memory)")
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = _select(C.build_rows(quick=args.quick), args.case)
    if args.list:
        print("\n".join(r.name for r in rows))
        return 0
    if not rows:
        print(f"no case matches {args.case}; see --list", file=sys.stderr)
        return 2
    if args.threads is not None:
        ds.set_num_threads(args.threads)
    if args.no_output_cache:
        ds.set_output_cache(0)
    if C.torch is not None:
        C.torch.set_num_threads(ds.get_num_threads())  # same thread budget for the torch column
    settings = Settings(
        repeats=args.repeats or (5 if args.quick else 15),
        min_sample_ns=2_000_000 if args.quick else 10_000_000,
        preallocated=args.preallocated,
    )
    meta = _meta(args, settings)
    print(f"dmlstride benchmark: {len(rows)} cases; {meta['summary']}", file=sys.stderr)
    print(f"dmlstride imported from {Path(ds.__file__).parent}", file=sys.stderr)

    results = []
    started = time.perf_counter()
    for i, row in enumerate(rows, 1):
        print(f"[{i:2}/{len(rows)}] {row.name:<32}", end="", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        res = run_row(row, settings)
        results.append(res)
        if res.error:
            status = f"ERROR {res.error}"
        elif res.mismatched:
            status = f"MISMATCH: {', '.join(res.mismatched)} differ from dmlstride"
        else:
            status = (f"{_num(res.gbps(C.DMLSTRIDE)):>6} GB/s  {res.speedup:6.2f}x numpy  "
                      f"{res.of_memcpy:5.2f} of memcpy")
        print(f" {status}  ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    meta["seconds"] = round(time.perf_counter() - started, 1)

    targets = [] if args.quick else evaluate_targets(results)
    print(report_text(results, targets, meta))
    if args.markdown:
        Path(args.markdown).write_text(report_markdown(results, targets, meta))
    if args.json:
        Path(args.json).write_text(json.dumps(report_json(results, targets, meta), indent=2) + "\n")
    if args.plot:
        plot(results, args.plot, meta)

    failed = [r.row.name for r in results if not r.correct]
    missed = [t for t in targets if not t.passed]
    print(closing_line(results, targets, meta, quick=args.quick))
    if failed:
        print("correctness check failed: " + ", ".join(failed), file=sys.stderr)
        return EXIT_MISMATCH
    if args.check_targets and missed:
        return EXIT_TARGETS
    return 0


if __name__ == "__main__":
    sys.exit(main())
