"""Command-line options shared by ``unnamed.py`` and ``compare_builds.py``.

It imports no dmlstride, so that a script can read its options before it chooses
which build to import first.
"""

from __future__ import annotations

import argparse

FAMILIES = ("issue", "perm")


def add_draw_options(p: argparse.ArgumentParser, default_mb: str, mb_note: str = "",
                     families: tuple[str, ...] = FAMILIES) -> None:
    """The options that say which cases to draw: --family (one of ``families``), --seed, --count, --mb."""
    p.add_argument("--family", choices=families, default="issue", help="kind of shapes to draw (default issue)")
    p.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    p.add_argument("--count", type=int, default=12, help="number of cases (default 12)")
    p.add_argument("--mb", default=default_mb, metavar="LO,HI",
                   help=f"packed size of each case in megabytes (default {default_mb}{mb_note})")


def check_draw_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Parse --mb into ``args.lo_mb`` and ``args.hi_mb``, and refuse a --count,
    --repeats or --threads under 1, through ``p.error``."""
    try:
        args.lo_mb, args.hi_mb = (float(x) for x in args.mb.split(","))
    except ValueError:
        p.error(f"--mb is {args.mb!r}; expected two numbers, LO,HI")
    if not 0 < args.lo_mb <= args.hi_mb:
        p.error(f"--mb is {args.mb!r}; expected 0 < LO <= HI")
    for name in ("count", "repeats", "threads"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            p.error(f"--{name} is {value}; expected at least 1")
