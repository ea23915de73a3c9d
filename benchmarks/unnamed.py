"""Layout conversions of shapes the harness does not name, drawn at random from a seed.

The harness's cases (``run.py``) are fixed, so a kernel tuned on them can look better
than it is.  This script draws fresh gathers and scatters of layout conversions and
times them exactly as the harness's main table does (preallocated outputs, numpy's
``np.copyto`` of ``as_strided`` views, PyTorch's ``copy_`` when importable, the
thread-matched memcpy limit; every result compared byte for byte with dmlstride's
before timing), then reports the geometric mean and the lowest fraction of the
limit and the lowest speed-up over each peer.

Three families of shapes (``--family``):

* ``issue``: NCHW <-> NHWC with odd H and W and 5-48 channels, column-major
  matrices of odd sizes, and 5-D and 6-D scrambled dimension orders;
* ``perm``: a random permutation of 2-6 random dimensions;
* ``inner``: the copies the other targets name rather than layout conversions:
  rows padded to a pitch of 16 bytes to a page (gathered, scattered or copied),
  a batch slice of a larger tensor, packed tensors, broadcasts along one axis,
  packed copies whose buffers sit at any element-aligned offset in a page, and
  layout conversions of the ``issue`` family so placed (each also timed with
  both buffers page-aligned, in the same loop).

Element types are drawn from uint8, int16, float16, float32, uint32 and float64;
each shape of ``issue`` and ``perm`` is gathered or scattered in turn, and its
packed side holds between the two ``--mb`` bounds (megabytes).  The same seed
draws the same shapes::

    python benchmarks/unnamed.py                       # 12 issue-like shapes, seed 1
    python benchmarks/unnamed.py --family perm --seed 7 --count 16 --mb 8,70
    python benchmarks/unnamed.py --family inner --seed 2 --count 18
    python benchmarks/unnamed.py --list --seed 3       # the shapes only

``--check-targets`` exits 3 when the targets for the drawn cases are missed, as the
harness's does: for layout conversions a geometric mean of at least 0.8 of the
limit and each at least 0.6; for padded, sliced, packed and broadcast copies each
at least 0.95; a copy at another offset at most 1.2x its time page-aligned; and
every case at least as fast as every peer.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

import run as R  # finds dmlstride (installed, or the package beside this folder) first

import cases as C  # noqa: E402  (sets OMP_WAIT_POLICY before PyTorch is imported)
import options as O  # noqa: E402
import dmlstride as ds  # noqa: E402

TYPES = ("uint8", "int16", "float16", "float32", "uint32", "float64")


def _random_dims(rng: random.Random, ndim: int, elems: float) -> tuple[int, ...]:
    """``ndim`` sizes of at least 2 whose product is near ``elems``."""
    weights = [rng.random() + 0.05 for _ in range(ndim)]
    total = sum(weights)
    return tuple(max(2, round(elems ** (w / total))) for w in weights)


def _permutation(rng: random.Random, ndim: int) -> tuple[int, ...]:
    order = list(range(ndim))
    while order == sorted(order):
        rng.shuffle(order)
    return tuple(order)


def draw(rng: random.Random, family: str, lo_mb: float, hi_mb: float) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """One (element type, sizes, memory order) of ``family``; its packed bytes lie in [lo_mb, hi_mb] MB."""
    dtype = rng.choice(TYPES)
    isz = ds.element_bytes(dtype)
    for _ in range(10_000):
        elems = rng.uniform(lo_mb, hi_mb) * 1e6 / isz
        kind = rng.randrange(4) if family == "issue" else -1
        if kind == 0:  # NCHW <-> NHWC, odd H and W, 5-48 channels
            c = rng.randint(5, 48)
            h = max(3, int(math.sqrt(elems / c / 2) * rng.uniform(0.6, 1.4))) | 1
            w = max(3, int(elems / c / 2 / h)) | 1
            sizes, order = (2, c, h, w), (0, 2, 3, 1)
        elif kind == 1:  # a column-major matrix
            rows = max(3, int(math.sqrt(elems) * rng.uniform(0.5, 1.5)))
            sizes, order = (rows, max(3, int(elems / rows))), (1, 0)
        else:  # 5-D or 6-D scrambled (issue), 2-6 dimensions (perm)
            ndim = (5, 6)[kind - 2] if family == "issue" else rng.randint(2, 6)
            sizes = _random_dims(rng, ndim, elems)
            order = _permutation(rng, ndim)
        if lo_mb * 1e6 <= math.prod(sizes) * isz <= hi_mb * 1e6:
            return dtype, sizes, order
    raise ValueError(f"no {family} shape of {lo_mb}-{hi_mb} MB found; widen --mb")


#: The kinds of copy the ``inner`` family draws, in turn.
INNER_KINDS = ("pitched", "slice", "packed", "broadcast", "offset", "offset-layout")

#: Row pitches the ``inner`` family pads to (bytes): a line or less up to a page.
PITCHES = (16, 64, 128, 256, 512, 4096)


def _offset(rng: random.Random, isz: int) -> int:
    """An element-aligned offset within a page, not 0."""
    return rng.randrange(1, C.PAGE // isz) * isz


def draw_inner(rng: random.Random, i: int, lo_mb: float, hi_mb: float) -> C.Row:
    """The ``inner`` family's row ``i`` (its kind INNER_KINDS[i % 6]), its packed side within the bounds."""
    kind = INNER_KINDS[i % len(INNER_KINDS)]
    for _ in range(10_000):
        dtype = rng.choice(TYPES)
        isz = ds.element_bytes(dtype)
        elems = rng.uniform(lo_mb, hi_mb) * 1e6 / isz
        if kind == "offset-layout":
            dtype, sizes, order = draw(rng, "issue", lo_mb, hi_mb)
            desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
            isz = ds.element_bytes(dtype)
            op = rng.choice(("gather", "scatter"))
            src_skew, dst_skew = _offset(rng, isz), rng.randrange(0, C.PAGE // isz) * isz
            name = (f"{op}/offset{src_skew}+{dst_skew}-{dtype}-{'x'.join(map(str, sizes))}"
                    f"-order{''.join(map(str, order))}")
            strided, packed = (desc, None) if op == "gather" else (None, desc)
            return C.Row(name, "align", op, strided, packed, src_skew=src_skew, dst_skew=dst_skew)
        if kind == "pitched":
            n, c = rng.randint(1, 3), rng.randint(1, 5)
            h = rng.randint(64, 3000)
            sizes = (n, c, h, max(3, int(elems / (n * c * h))) | 1)
        elif kind == "slice":
            sizes = _random_dims(rng, 4, 2 * elems)
            sizes = (max(4, sizes[0]),) + sizes[1:]
        else:
            sizes = _random_dims(rng, rng.randint(1, 4) if kind in ("packed", "offset") else 4, elems)
        packed_sizes = (sizes[0] // 2,) + sizes[1:] if kind == "slice" else sizes
        if not lo_mb * 1e6 <= math.prod(packed_sizes) * isz <= hi_mb * 1e6:
            continue
        tag = f"{dtype}-{'x'.join(map(str, sizes))}"
        packed = C._packed(dtype, packed_sizes)
        if kind == "pitched":
            pitch = rng.choice(PITCHES)
            desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NCHW", row_pitch_alignment=pitch)
            op = rng.choice(("gather", "scatter", "copy"))
            return C.Row(f"{op}/pitched{pitch}-{tag}", "inner", op, desc if op != "scatter" else None,
                         packed if op == "copy" else desc if op == "scatter" else None)
        if kind == "slice":
            whole = C._packed(dtype, sizes)
            part = ds.BufferTensorDesc(dtype, packed_sizes, strides=whole.effective_strides)
            step = whole.effective_strides[0] * isz
            starts = [b for b in range(sizes[0] - packed_sizes[0] + 1) if b * step % 16 == 0]
            b0 = rng.choice(starts)
            op = rng.choice(("gather", "scatter"))
            side = {"src_offset": b0 * step, "src_buffer_bytes": whole.total_tensor_size_in_bytes} if op == "gather" \
                else {"dst_offset": b0 * step, "dst_buffer_bytes": whole.total_tensor_size_in_bytes}
            return C.Row(f"{op}/slice{b0}-{tag}", "inner", op, part if op == "gather" else None,
                         part if op == "scatter" else None, **side)
        if kind == "broadcast":
            axis = rng.randrange(4)
            desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NCHW", broadcast=[a == axis for a in range(4)])
            op = rng.choice(("gather", "copy"))
            return C.Row(f"{op}/broadcast{axis}-{tag}", "broadcast", op, desc, packed if op == "copy" else None)
        op = rng.choice(("gather", "scatter", "copy"))
        src, dst = (packed if op != "scatter" else None), (packed if op != "gather" else None)
        if kind == "packed":
            return C.Row(f"{op}/packed-{tag}", "inner", op, src, dst)
        side = rng.choice(("src", "dst", "both"))
        skews = {"src_skew": _offset(rng, isz) if side != "dst" else 0,
                 "dst_skew": _offset(rng, isz) if side != "src" else 0}
        return C.Row(f"{op}/offset{skews['src_skew']}+{skews['dst_skew']}-{tag}", "align", op, src, dst, **skews)
    raise ValueError(f"no inner {kind} case of {lo_mb}-{hi_mb} MB found; widen --mb")


def build_rows(family: str, seed: int, count: int, lo_mb: float, hi_mb: float) -> list[C.Row]:
    """``count`` rows drawn from ``seed``: gathers and scatters in turn (``inner``: its kinds in turn)."""
    rng = random.Random(seed)
    if family == "inner":
        return [draw_inner(rng, i, lo_mb, hi_mb) for i in range(count)]
    rows = []
    for i in range(count):
        dtype, sizes, order = draw(rng, family, lo_mb, hi_mb)
        desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
        op = ("gather", "scatter")[i % 2]
        name = f"{op}/{dtype}-{'x'.join(map(str, sizes))}-order{''.join(map(str, order))}"
        strided, packed = (desc, None) if op == "gather" else (None, desc)
        rows.append(C.Row(name, "odd", op, strided, packed))
    return rows


#: Copies smaller than this (megabytes) run from cache, where the targets, set for
#: copies from memory, are not judged (as the harness's --quick sizes are not).
JUDGED_MB = 8


#: Cases of at most this many bytes a side are reported apart (summary): their source and
#: destination together fit a 32 MiB L3, from which the memcpy limit reads and writes them
#: up to three times as fast as from memory, and a transpose gains less than that.
IN_CACHE_BYTES = 16 << 20


def _band(label: str, results: list[R.Result]) -> str:
    """``label`` with the geometric mean and the lowest fraction of the limit of ``results``."""
    if not results:
        return f"none {label}"
    low = min(results, key=lambda r: r.of_limit)
    return (f"{len(results)} {label}: geometric mean {C.geometric_mean([r.of_limit for r in results]):.2f}, "
            f"lowest {low.of_limit:.2f}")


def size_bands(timed: list[R.Result]) -> str:
    """A line on the cases of at most IN_CACHE_BYTES a side and on the larger ones apart."""
    mib = IN_CACHE_BYTES >> 20
    small = [r for r in timed if r.row.bytes_moved <= IN_CACHE_BYTES]
    large = [r for r in timed if r.row.bytes_moved > IN_CACHE_BYTES]
    return f"by size: {_band(f'of at most {mib} MiB a side', small)}; {_band(f'over {mib} MiB', large)}"


def summary(results: list[R.Result], peers: list[C.Peer], judged: bool = True) -> tuple[list[str], bool]:
    """Lines on the geometric mean and the lowest figures, and whether the targets are met."""
    timed = [r for r in results if r.timed]
    if not timed:
        return ["no case was timed"], False
    low = min(timed, key=lambda r: r.of_limit)
    lines = [f"{len(timed)} cases: geometric mean {C.geometric_mean([r.of_limit for r in timed]):.2f} of the "
             f"limit, lowest {low.of_limit:.2f} ({low.row.name})"]
    lines.append(size_bands(timed))
    contiguous = [r for r in timed if r.row.group in ("inner", "broadcast")]
    if contiguous:
        lines.append(_band("padded, sliced, packed and broadcast copies", contiguous)
                     + f" ({min(contiguous, key=lambda r: r.of_limit).row.name})")
    for peer in peers:
        ratios = [(r.vs(peer.key), r) for r in timed if r.vs(peer.key) is not None]
        if ratios:
            worst, r = min(ratios, key=lambda t: t[0])
            lines.append(f"vs {peer.label}: geometric mean {C.geometric_mean([v for v, _ in ratios]):.2f}x, "
                         f"lowest {worst:.2f}x ({r.row.name})")
    aligned = [r for r in timed if C.DMLSTRIDE_ALIGNED in r.ns]
    if aligned:
        worst = max(aligned, key=lambda r: r.misaligned_cost)
        lines.append(f"at other offsets: geometric mean {C.geometric_mean([r.misaligned_cost for r in aligned]):.2f}x "
                     f"the page-aligned time, highest {worst.misaligned_cost:.2f}x ({worst.row.name})")
    # The harness's rules for each case's kind (conversions, contiguous copies, offsets, peers).
    met = all(t.passed for t in R.evaluate_targets(results, peers))
    verdict = ("met" if met else "missed") if judged else f"not judged (cases under {JUDGED_MB} MB run from cache)"
    rules = []
    if any(r.row.conversion for r in timed):
        rules.append(f"conversions: geometric mean >= {R.CONVERSION_GEOMEAN}, each >= {R.CONVERSION_EACH} of the limit")
    if any(r.row.group in ("inner", "broadcast") for r in timed):
        rules.append(f"padded, sliced, packed and broadcast copies each >= {R.CONTIGUOUS_EACH} of it")
    if aligned:
        rules.append(f"other offsets <= {R.ALIGNMENT_AT_MOST}x page-aligned")
    rules.append(f"each >= {R.PEER_EACH:g}x every peer")
    lines.append(f"targets ({'; '.join(rules)}): {verdict}")
    return lines, met


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    O.add_draw_options(p, "8,70", families=O.FAMILIES + ("inner",))
    p.add_argument("--repeats", type=int, default=7, help="timing repeats per case (default 7)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="thread count for dmlstride, PyTorch and the memcpy limit (default: dmlstride's)")
    p.add_argument("--skip-peer", action="append", metavar="NAME", default=[],
                   choices=[peer.key for peer in C.PEERS], help="leave a peer's column out; repeatable")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown")
    p.add_argument("--check-targets", action="store_true",
                   help=f"exit {R.EXIT_TARGETS} if the conversion targets are missed")
    p.add_argument("--list", action="store_true", help="list the drawn cases and exit")
    args = p.parse_args(argv)
    O.check_draw_options(p, args)
    if args.check_targets and args.lo_mb < JUDGED_MB:
        p.error(f"--check-targets needs cases of at least {JUDGED_MB} MB (--mb {JUDGED_MB},...): "
                "smaller ones run from cache")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        rows = build_rows(args.family, args.seed, args.count, args.lo_mb, args.hi_mb)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(f"{r.name}  {r.bytes_moved / 1e6:.1f} MB" for r in rows))
        return 0
    threads, peers = R.thread_budget(args.threads, args.skip_peer)
    settings = R.Settings(repeats=args.repeats, min_sample_ns=10_000_000, threads=threads, peers=peers,
                          cache_limit=ds.output_cache_info()[1], measure_memory=False)
    print(f"{len(rows)} {args.family} cases of {args.lo_mb:g}-{args.hi_mb:g} MB, seed {args.seed}, "
          f"{threads} threads, {args.repeats} repeats", file=sys.stderr)
    started = time.perf_counter()
    results = R.run_rows(rows, settings, name_width=44)
    header, body = R.table_rows(results, peers)
    print((R._md_table if args.markdown else R._text_table)(header, body))
    lines, met = summary(results, peers, judged=args.lo_mb >= JUDGED_MB)
    print("\n".join(lines))
    print(f"command: python benchmarks/unnamed.py {' '.join(sys.argv[1:] if argv is None else argv)}".rstrip()
          + f" ({time.perf_counter() - started:.0f} s)")
    failed = [r.row.name for r in results if not r.correct]
    if failed:
        print("correctness check failed: " + ", ".join(failed), file=sys.stderr)
        return R.EXIT_MISMATCH
    if args.check_targets and not met:
        return R.EXIT_TARGETS
    return 0


if __name__ == "__main__":
    sys.exit(main())
