"""Two builds of dmlstride timed side by side in one process, on the same buffers.

A change's effect on copies that run from cache (up to some 16 MiB a side) is often
smaller than what separates two processes of one build: where a process's pages fall
decides which of its lines share L2 sets, and the same build reads up to 15% apart
from one process to the next.  This script loads a second build beside the one under
test, as a copy of its package under another name, checks that both write the same
bytes, and times them on the same buffers in an order shuffled every repeat (as the
harness's main table does).

It does so in two processes: in one this build is imported as ``dmlstride`` and the
base as a copy, in the other the base as ``dmlstride`` and this build as the copy.
Each case's ratio is reported from both and as their geometric mean: within one
process the build imported as ``dmlstride`` ran 0-5% faster by geometric mean
against a copy of itself (four runs of 12-25 cases), which the two passes cancel.

    python benchmarks/compare_builds.py ../base              # a checkout built in place
    python benchmarks/compare_builds.py ../base --family perm --seed 5 --count 20 --mb 1,16
    python benchmarks/compare_builds.py ../base --case float16:3022x2028:10:gather
    python benchmarks/compare_builds.py ../base --case float32:64x512x512x2:0213:gather --dst-skew 4
    python benchmarks/compare_builds.py --control            # this build against a copy of itself

The base is a checkout whose ``dmlstride`` package holds its compiled engine
(``python setup.py build_ext --inplace``), or that package folder itself.  The
ratio is the base's time over this build's: above 1, this build is faster.  Cases
are drawn as ``unnamed.py`` draws them (``--family``, ``--seed``, ``--count``,
``--mb``), or named with ``--case DTYPE:SIZES:ORDER:OP`` (sizes joined by ``x``,
the memory order's digits slowest first, OP gather or scatter).

Run ``--control`` first: the spread of its ratios around 1 is the noise of the
machine at that hour, and a change that moves no further than that has not been
shown to do anything.  Compare clean builds rather than one build with a run-time
switch: a global read in a hot loop, or a branch beside it, changes the code around
it, and such a switch once made a copy 10% slower in cache in the position the
unchanged code held.  A base older than the relative import of the planner in
``_engine.pyx`` plans with this build's planner; the script says so.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

import options as O  # this script's folder is first on sys.path; imports no dmlstride

HERE = Path(__file__).resolve().parent
COPY_NAME = "dmlstride_copy"
EXIT_MISMATCH = 1   # as run.py's
EXIT_USAGE = 2
ORDERS = ("this-first", "base-first")
Spec = tuple[str, tuple[int, ...], tuple[int, ...], str]


def case_name(spec: Spec) -> str:
    dtype, sizes, order, op = spec
    return f"{op}/{dtype}-{'x'.join(map(str, sizes))}-order{''.join(map(str, order))}"


def case_arg(spec: Spec) -> str:
    dtype, sizes, order, op = spec
    return f"{dtype}:{'x'.join(map(str, sizes))}:{''.join(map(str, order))}:{op}"


def parse_case(text: str) -> Spec:
    """``DTYPE:SIZES:ORDER:OP`` (``float16:3022x2028:10:gather``) as its four parts."""
    try:
        dtype, sizes, order, op = text.split(":")
        dims = tuple(int(x) for x in sizes.split("x"))
        perm = tuple(int(c) for c in order)
        np.dtype(dtype)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"{text!r}: expected DTYPE:SIZES:ORDER:OP, "
                                         "as float16:3022x2028:10:gather") from None
    if sorted(perm) != list(range(len(dims))) or op not in ("gather", "scatter"):
        raise argparse.ArgumentTypeError(f"{text!r}: ORDER must list each of the {len(dims)} dimensions "
                                         "once, OP be gather or scatter")
    return dtype, dims, perm, op


def this_package() -> Path:
    """The folder of the dmlstride under test, found as run.py finds it (installed, else
    the package beside this folder), without importing it."""
    spec = importlib.util.find_spec("dmlstride")
    if spec is None or spec.origin is None:
        return HERE.parent / "dmlstride"
    return Path(spec.origin).resolve().parent


def base_package(path: Path | None) -> Path:
    """The package folder of the base (a checkout or its package folder; None: this
    build's own), checked to hold a compiled engine."""
    package = this_package() if path is None else path.resolve()
    if (package / "dmlstride" / "__init__.py").is_file():
        package = package / "dmlstride"
    if not (package / "__init__.py").is_file():
        raise ValueError(f"{path}: no dmlstride package there (a checkout, or its dmlstride folder)")
    if not any(package.glob("_engine.*.so")) and not any(package.glob("_engine.*.pyd")):
        raise ValueError(f"{package}: no compiled engine; build it in place first "
                         "(python setup.py build_ext --inplace)")
    return package


def load_copy(package: Path, workdir: Path) -> ModuleType:
    """``package`` copied into ``workdir`` as COPY_NAME, and imported."""
    shutil.copytree(package, workdir / COPY_NAME, ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(workdir))
    return importlib.import_module(COPY_NAME)


class Case:
    """One gather or scatter of a layout, set up for both builds on one set of buffers."""

    def __init__(self, spec: Spec, builds: dict[str, ModuleType], seed: int, dst_skew: int = 0) -> None:
        import cases as C  # imported by run.py once the build imported as dmlstride is chosen
        dtype, sizes, order, op = spec
        self.name = case_name(spec)
        descs = {k: m.BufferTensorDesc.from_layout(dtype, sizes, order) for k, m in builds.items()}
        self.bytes = math.prod(sizes) * np.dtype(dtype).itemsize
        rng = np.random.default_rng(seed)
        total = descs["this"].total_tensor_size_in_bytes
        self.buffer = C.placed_bytes(total, dst_skew if op == "scatter" else 0)
        self.buffer.fill(0)
        self.array = rng.integers(0, 256, size=self.bytes, dtype=np.uint8).view(dtype).reshape(sizes)
        self.fns: dict[str, Callable[[], Any]] = {}
        if op == "gather":
            builds["this"].scatter(self.array, descs["this"], self.buffer)
            self.target = out = C.placed_bytes(self.bytes, dst_skew).view(dtype).reshape(sizes)
            out.fill(0)
            for k, m in builds.items():
                self.fns[k] = lambda m=m, d=descs[k]: m.gather(self.buffer, d, out=out, check_alignment=False)
        else:
            self.target = self.buffer
            for k, m in builds.items():
                self.fns[k] = lambda m=m, d=descs[k]: m.scatter(self.array, d, self.buffer, check_alignment=False)

    def same_bytes(self) -> bool:
        """Whether both builds write the same bytes (each into a cleared target)."""
        written = {}
        for key, fn in self.fns.items():
            self.target.fill(0)
            fn()
            written[key] = self.target.tobytes()
        return written["base"] == written["this"]


def time_builds(args: argparse.Namespace) -> int:
    """One pass (a child process) on every case, one JSON line each on stdout.  The build
    imported first is imported as ``dmlstride`` (this-first: this build; base-first: a copy
    of the base so named); the other is a copy under COPY_NAME."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        this, base = this_package(), base_package(None if args.control else args.base)
        if args.order == "base-first":
            shutil.copytree(base, work / "first" / "dmlstride", ignore=shutil.ignore_patterns("__pycache__"))
            sys.path.insert(0, str(work / "first"))
        import run as R  # imports the build to be imported first, as dmlstride
        copy = load_copy(this if args.order == "base-first" else base, work)
        builds = {"this": copy, "base": R.ds} if args.order == "base-first" else {"this": R.ds, "base": copy}
        from timing import calls_per_sample, interleaved
        threads = args.threads or R.ds.get_num_threads()
        for m in builds.values():
            m.set_num_threads(threads)
        if copy._engine._planner.__name__ != f"{COPY_NAME}._planner":
            print(f"note: the {'base' if copy is builds['base'] else 'this'} build, imported second, plans with the"
                  " other's planner (its engine imports dmlstride._planner): only the kernels are compared",
                  file=sys.stderr)
        for i, spec in enumerate(args.case):
            case = Case(spec, builds, seed=i, dst_skew=args.dst_skew)
            if not case.same_bytes():
                print(f"{case.name}: the two builds wrote different bytes", file=sys.stderr)
                return EXIT_MISMATCH
            number = calls_per_sample(case.fns["this"], 10_000_000)
            samples = interleaved(case.fns, {k: number for k in case.fns}, args.repeats,
                                  before=lambda k, c=case: c.fns[k]())
            t = {k: statistics.median(v) for k, v in samples.items()}
            print(json.dumps({"case": case.name, "bytes": case.bytes, "base_ns": t["base"], "this_ns": t["this"]}),
                  flush=True)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", nargs="?", type=Path, help="checkout (built in place) or package folder of the base build")
    p.add_argument("--control", action="store_true", help="compare this build with a copy of itself")
    p.add_argument("--case", action="append", type=parse_case, default=[], metavar="DTYPE:SIZES:ORDER:OP",
                   help="a case to time; repeatable (default: cases drawn as unnamed.py draws them)")
    O.add_draw_options(p, "1,16", ": from cache")
    p.add_argument("--repeats", type=int, default=7, help="timing repeats per case and pass (default 7)")
    p.add_argument("--threads", type=int, metavar="N", help="threads for both builds (default: dmlstride's)")
    p.add_argument("--dst-skew", type=int, default=0, metavar="BYTES",
                   help="the destination this many bytes past a 4 KiB page (default 0)")
    p.add_argument("--order", choices=ORDERS, help=argparse.SUPPRESS)  # one pass, in a child process
    args = p.parse_args(argv)
    if (args.base is None) == (not args.control):
        p.error("give the base build's checkout, or --control (not both)")
    if not 0 <= args.dst_skew < 4096:
        p.error("--dst-skew must be 0-4095 bytes")
    O.check_draw_options(p, args)
    return args


def drawn(args: argparse.Namespace) -> list[Spec]:
    """The named cases, or ``--count`` drawn ones, gathers and scatters in turn."""
    if args.case:
        return list(args.case)
    import unnamed as U
    rng = random.Random(args.seed)
    return [(*U.draw(rng, args.family, args.lo_mb, args.hi_mb), ("gather", "scatter")[i % 2])
            for i in range(args.count)]


def one_pass(args: argparse.Namespace, order: str, specs: list[Spec]) -> tuple[int, dict[str, dict[str, Any]]]:
    """Run one pass in a child process, on the cases ``specs``: its exit code and
    its results by case name."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--control" if args.control else str(args.base),
           "--repeats", str(args.repeats), "--order", order]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    if args.dst_skew:
        cmd += ["--dst-skew", str(args.dst_skew)]
    for spec in specs:
        cmd += ["--case", case_arg(spec)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    return proc.returncode, {r["case"]: r for r in map(json.loads, proc.stdout.splitlines())}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.order is not None:
        return time_builds(args)
    try:
        base_package(None if args.control else args.base)
        specs = drawn(args)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    label = "this build against a copy of itself" if args.control else f"this build against {args.base}"
    print(f"{label}: {len(specs)} cases, two passes ({', '.join(ORDERS)}) of {args.repeats} repeats;"
          " ratio = base time / this build's time", file=sys.stderr)
    passes = {}
    for order in ORDERS:
        code, passes[order] = one_pass(args, order, specs)
        if code != 0:
            return code
    print(f"{'case':46s} {'MB':>6s} {'base GB/s':>9s} {'this GB/s':>9s} {'ratio 1':>7s} {'ratio 2':>7s} {'ratio':>6s}")
    ratios, firsts = [], []
    for spec in specs:
        r1, r2 = (passes[o][case_name(spec)] for o in ORDERS)
        q1, q2 = r1["base_ns"] / r1["this_ns"], r2["base_ns"] / r2["this_ns"]
        ratios.append(math.sqrt(q1 * q2))
        firsts.append(math.sqrt(q1 / q2))
        n = r1["bytes"]
        base_gbs = n / math.sqrt(r1["base_ns"] * r2["base_ns"])
        this_gbs = n / math.sqrt(r1["this_ns"] * r2["this_ns"])
        print(f"{case_name(spec):46s} {n / 1e6:6.1f} {base_gbs:9.2f} {this_gbs:9.2f} {q1:7.2f} {q2:7.2f} "
              f"{ratios[-1]:6.2f}", flush=True)
    geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
    first = math.exp(statistics.fmean(math.log(r) for r in firsts))
    print(f"{len(ratios)} case{'s' if len(ratios) != 1 else ''}: geometric mean {geo:.3f}, "
          f"{min(ratios):.2f}-{max(ratios):.2f}, this build faster in {sum(r > 1 for r in ratios)}; "
          f"the build imported as dmlstride ran {first:.3f}x the copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
