"""Two builds of dmlstride timed side by side in one process, on the same buffers.

A change's effect on copies that run from cache (up to some 16 MiB a side) is often
smaller than what separates two processes of one build: where a process's pages fall
decides which of its lines share L2 sets, and the same build reads up to 15% apart
from one process to the next.  This script loads a second build beside the one under
test, as a copy of its package under another name, times both on the same buffers in
an order shuffled every repeat (as the harness's main table does), after checking that
they write the same bytes, and prints the ratio of their medians for each case.

    python benchmarks/compare_builds.py ../base              # a checkout built in place
    python benchmarks/compare_builds.py ../base --family perm --seed 5 --count 20 --mb 1,16
    python benchmarks/compare_builds.py ../base --case float16:3022x2028:10:gather
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
import math
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

import run as R  # finds dmlstride (installed, or the package beside this folder) first

import unnamed as U  # noqa: E402
from timing import calls_per_sample, interleaved  # noqa: E402

ds = R.ds
BASE_NAME = "dmlstride_base"
EXIT_USAGE = 2


class Case:
    """One gather or scatter of a layout, set up for both builds on one set of buffers."""

    def __init__(self, dtype: str, sizes: tuple[int, ...], order: tuple[int, ...], op: str,
                 base: ModuleType, seed: int) -> None:
        self.name = f"{op}/{dtype}-{'x'.join(map(str, sizes))}-order{''.join(map(str, order))}"
        builds = {"base": base, "this": ds}
        descs = {k: m.BufferTensorDesc.from_layout(dtype, sizes, order) for k, m in builds.items()}
        self.bytes = math.prod(sizes) * np.dtype(dtype).itemsize
        rng = np.random.default_rng(seed)
        self.buffer = np.zeros(descs["this"].total_tensor_size_in_bytes, np.uint8)
        self.array = rng.integers(0, 256, size=self.bytes, dtype=np.uint8).view(dtype).reshape(sizes)
        self.fns: dict[str, Callable[[], Any]] = {}
        if op == "gather":
            ds.scatter(self.array, descs["this"], self.buffer)
            self.target = out = np.empty_like(self.array)
            for k, m in builds.items():
                self.fns[k] = lambda m=m, d=descs[k]: m.gather(self.buffer, d, out=out)
        else:
            self.target = self.buffer
            for k, m in builds.items():
                self.fns[k] = lambda m=m, d=descs[k]: m.scatter(self.array, d, self.buffer)

    def same_bytes(self) -> bool:
        """Whether both builds write the same bytes (each into a cleared target)."""
        written = {}
        for key, fn in self.fns.items():
            self.target.fill(0)
            fn()
            written[key] = self.target.tobytes()
        return written["base"] == written["this"]


def load_base(path: Path | None, workdir: Path) -> ModuleType:
    """The package at ``path`` (a checkout or its package folder; None: this build's own),
    copied into ``workdir`` as BASE_NAME and imported."""
    package = Path(ds.__file__).resolve().parent if path is None else path.resolve()
    if (package / "dmlstride" / "__init__.py").is_file():
        package = package / "dmlstride"
    if not (package / "__init__.py").is_file():
        raise ValueError(f"{path}: no dmlstride package there (a checkout, or its dmlstride folder)")
    if not any(package.glob("_engine.*.so")) and not any(package.glob("_engine.*.pyd")):
        raise ValueError(f"{package}: no compiled engine; build it in place first "
                         "(python setup.py build_ext --inplace)")
    shutil.copytree(package, workdir / BASE_NAME, ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(workdir))
    return importlib.import_module(BASE_NAME)


def parse_case(text: str) -> tuple[str, tuple[int, ...], tuple[int, ...], str]:
    """``DTYPE:SIZES:ORDER:OP`` (``float16:3022x2028:10:gather``) as its four parts."""
    try:
        dtype, sizes, order, op = text.split(":")
        dims = tuple(int(x) for x in sizes.split("x"))
        perm = tuple(int(c) for c in order)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected DTYPE:SIZES:ORDER:OP, "
                                         "as float16:3022x2028:10:gather") from None
    if sorted(perm) != list(range(len(dims))) or op not in ("gather", "scatter"):
        raise argparse.ArgumentTypeError(f"{text!r}: ORDER must list each of the {len(dims)} dimensions "
                                         "once, OP be gather or scatter")
    return dtype, dims, perm, op


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", nargs="?", type=Path, help="checkout (built in place) or package folder of the base build")
    p.add_argument("--control", action="store_true", help="compare this build with a copy of itself")
    p.add_argument("--case", action="append", type=parse_case, default=[], metavar="DTYPE:SIZES:ORDER:OP",
                   help="a case to time; repeatable (default: cases drawn as unnamed.py draws them)")
    p.add_argument("--family", choices=U.FAMILIES, default="issue", help="kind of shapes to draw (default issue)")
    p.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    p.add_argument("--count", type=int, default=12, help="number of cases drawn (default 12)")
    p.add_argument("--mb", default="1,16", metavar="LO,HI",
                   help="packed size of each drawn case in megabytes (default 1,16: from cache)")
    p.add_argument("--repeats", type=int, default=7, help="timing repeats per case (default 7)")
    p.add_argument("--threads", type=int, metavar="N", help="threads for both builds (default: dmlstride's)")
    args = p.parse_args(argv)
    if (args.base is None) == (not args.control):
        p.error("give the base build's checkout, or --control (not both)")
    try:
        args.lo_mb, args.hi_mb = (float(x) for x in args.mb.split(","))
    except ValueError:
        p.error(f"--mb is {args.mb!r}; expected two numbers, LO,HI")
    if not 0 < args.lo_mb <= args.hi_mb:
        p.error(f"--mb is {args.mb!r}; expected 0 < LO <= HI")
    for name in ("count", "repeats", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name} is {value}; expected at least 1")
    return args


def drawn(args: argparse.Namespace) -> list[tuple[str, tuple[int, ...], tuple[int, ...], str]]:
    """The named cases, or ``--count`` drawn ones, gathers and scatters in turn."""
    if args.case:
        return list(args.case)
    rng = random.Random(args.seed)
    return [(*U.draw(rng, args.family, args.lo_mb, args.hi_mb), ("gather", "scatter")[i % 2])
            for i in range(args.count)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        specs = drawn(args)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory() as tmp:
        try:
            base = load_base(None if args.control else args.base, Path(tmp))
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return EXIT_USAGE
        threads = args.threads or ds.get_num_threads()
        ds.set_num_threads(threads)
        base.set_num_threads(threads)
        if base._engine._planner.__name__ != f"{BASE_NAME}._planner":
            print("note: the base build plans with this build's planner (its engine imports dmlstride._planner);"
                  " only the kernels are compared", file=sys.stderr)
        label = "this build against a copy of itself" if args.control else f"this build against {args.base}"
        print(f"{label}: {len(specs)} cases, {threads} threads, {args.repeats} repeats;"
              " ratio = base time / this build's time", file=sys.stderr)
        ratios: list[float] = []
        print(f"{'case':46s} {'MB':>6s} {'base GB/s':>9s} {'this GB/s':>9s} {'ratio':>6s}")
        for i, (dtype, sizes, order, op) in enumerate(specs):
            case = Case(dtype, sizes, order, op, base, seed=i)
            if not case.same_bytes():
                print(f"{case.name}: the two builds wrote different bytes", file=sys.stderr)
                return R.EXIT_MISMATCH
            number = calls_per_sample(case.fns["this"], 10_000_000)
            samples = interleaved(case.fns, {k: number for k in case.fns}, args.repeats,
                                  before=lambda k, c=case: c.fns[k]())
            t = {k: statistics.median(v) for k, v in samples.items()}
            ratios.append(t["base"] / t["this"])
            print(f"{case.name:46s} {case.bytes / 1e6:6.1f} {case.bytes / t['base']:9.2f} "
                  f"{case.bytes / t['this']:9.2f} {ratios[-1]:6.2f}", flush=True)
    geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
    faster = sum(r > 1 for r in ratios)
    print(f"{len(ratios)} case{'s' if len(ratios) != 1 else ''}: geometric mean {geo:.3f}, "
          f"{min(ratios):.2f}-{max(ratios):.2f}, this build faster in {faster}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
