"""Command line: ``python -m dmlstride describe ...`` and ``python -m dmlstride size ...``.

``describe`` prints a descriptor, its sizes, strides, sizes in bytes,
classification and :meth:`BufferTensorDesc.explain` picture; ``size`` prints
only the minimum implied size in bytes (``DMLCalcBufferTensorSize``, computed
exactly), so it can be used in scripts.  Bad arguments print one line,
``dmlstride: error: <message>``, on stderr and give exit status 2.  When the
reader of the output goes away (``dmlstride describe ... | head -1``) the
program stops quietly with exit status 1, as Python's documentation recommends
for a closed pipe.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import __version__
from .descriptor import BufferTensorDesc
from .errors import DescriptorError
from .sizes import _CANONICAL_LETTERS, calc_buffer_tensor_size, layout_order

__all__ = ["main"]

PROG = "dmlstride"


class UsageError(Exception):
    """A command-line argument is wrong; the message is one line."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, reported by :func:`main`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(" ".join(message.split()))


def _int_list(text: str) -> list[int]:
    """``"1,1,3,5"`` -> ``[1, 1, 3, 5]``; range checks are left to the library."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers (example: 1,1,3,5)"
        )
    try:
        return [int(p, 10) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers (example: 1,1,3,5)"
        ) from None


def _int(text: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _broadcast_flags(text: str, rank: int) -> list[bool]:
    """``--broadcast``: one 0/1 flag per dimension, or the letters of the broadcast dimensions."""
    parts = [p.strip() for p in text.split(",")]
    if parts and all(p in ("0", "1") for p in parts):
        if len(parts) != rank:
            raise DescriptorError(
                f"--broadcast {text!r} has {len(parts)} flag{'' if len(parts) == 1 else 's'}; "
                f"expected {rank}, one per dimension"
            )
        return [p == "1" for p in parts]
    letters = _CANONICAL_LETTERS.get(rank)
    wanted = "".join(parts).upper()
    if letters is None or not wanted or any(ch not in letters for ch in wanted):
        names = f"letters of {letters}" if letters else "no letters at this rank"
        raise DescriptorError(
            f"--broadcast {text!r} is neither {rank} comma-separated 0/1 flags nor dimension "
            f"letters of a rank-{rank} tensor ({names})"
        )
    return [ch in wanted for ch in letters]


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dtype",
        required=True,
        help="data type: a DirectML name (float32, float16, uint8, int4, ...) or numpy dtype name",
    )
    p.add_argument(
        "--sizes",
        required=True,
        type=_int_list,
        help="comma-separated logical sizes in canonical order, e.g. 1,1,3,5 for N,C,H,W",
    )
    p.add_argument(
        "--strides",
        type=_int_list,
        help="comma-separated strides in elements, one per dimension (default: packed row-major)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Describe DirectML buffer tensors and compute their minimum implied sizes.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{describe,size}")

    describe = commands.add_parser(
        "describe",
        help="print a descriptor, its classification and its explain() picture",
        description="Print a buffer-tensor descriptor: repr, sizes, strides, effective strides,\n"
        "total and minimum size, classification, layout and the explain() picture.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  dmlstride describe --dtype float32 --sizes 1,1,3,5 --layout NHWC\n"
        "  dmlstride describe --dtype uint8 --sizes 2,3 --strides 5,1\n"
        "  dmlstride describe --dtype float16 --sizes 2,3,4,5 --layout NCHW --broadcast C\n"
        "  dmlstride describe --dtype uint8 --sizes 2,3,4,5,6,7 --layout 5,4,3,2,1,0",
    )
    _add_common(describe)
    describe.add_argument(
        "--layout",
        help="memory order from slowest to fastest: a permutation of the rank's dimension letters "
        "(HW, WH, DHW, WHD, NCHW, NHWC, NCDHW, NDHWC, ...), or for any rank 1-8 the axis indices "
        "in that order, comma-separated (5,4,3,2,1,0 is a 6-D tensor with axis 0 fastest); "
        "not with --strides",
    )
    describe.add_argument(
        "--broadcast",
        help="dimensions broadcast (stride 0) in the layout (packed row-major when --layout is "
        "not given): one 0/1 flag per dimension (0,1,0,0) or dimension letters (C, or N,C); "
        "not with --strides",
    )
    describe.add_argument(
        "--row-pitch",
        type=_int,
        metavar="BYTES",
        help="row pitch: pad each row to a multiple of this many bytes, rounding the H stride (a row "
        "is W, or W x C when channels are innermost); without H, or with H fastest, the "
        "second-fastest memory dimension; not with --strides",
    )
    describe.add_argument(
        "--total-size",
        type=_int,
        metavar="BYTES",
        help="TotalTensorSizeInBytes (default: the minimum implied size)",
    )
    describe.add_argument(
        "--alignment",
        type=_int,
        default=0,
        metavar="BYTES",
        help="GuaranteedBaseOffsetAlignment: 0 or a power of two (default 0)",
    )
    describe.add_argument(
        "--no-directml-limits",
        action="store_true",
        help="lift DirectML's limits on the element count, the element extent (last offset + 1) "
        "and the total size (2**32 - 1 elements); sizes and strides must still fit in 32 bits",
    )
    describe.add_argument(
        "--max-elements",
        type=_int,
        default=64,
        metavar="N",
        help="draw tensors of up to N elements (and 4 x N offsets) in full, summarise larger ones; "
        "1 to 4096 (default 64)",
    )
    describe.set_defaults(run=_describe)

    size = commands.add_parser(
        "size",
        help="print the minimum implied size in bytes (DMLCalcBufferTensorSize, exact)",
        description="Print the minimum implied size in bytes of a buffer tensor, computed exactly\n"
        "(DirectML's helper wraps around for large tensors; this never does).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  dmlstride size --dtype float32 --sizes 65537,65536 --strides 65536,1",
    )
    _add_common(size)
    size.set_defaults(run=_size)
    return parser


def _layout(text: str, rank: int) -> str | tuple[int, ...]:
    """``--layout``: dimension letters (``NHWC``), or axis indices from slowest to fastest (``3,2,1,0``)."""
    if not any(ch.isdigit() for ch in text):
        if rank not in _CANONICAL_LETTERS:
            example = ",".join(str(axis) for axis in range(rank))
            raise UsageError(
                f"--layout {text!r}: a rank-{rank} tensor has no dimension letters; give its axes "
                f"from slowest to fastest in memory as comma-separated indices, e.g. {example}"
            )
        return text
    try:
        order = _int_list(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"--layout {exc}") from None
    if len(order) != rank:
        raise UsageError(
            f"--layout {text!r} lists {len(order)} {'axis' if len(order) == 1 else 'axes'}; expected "
            f"{rank}, each axis 0..{rank - 1} once, from slowest to fastest in memory"
        )
    if sorted(order) != list(range(rank)):
        raise UsageError(
            f"--layout {text!r} is not an order of the axes 0..{rank - 1}; expected each axis "
            "exactly once, from slowest to fastest in memory"
        )
    return layout_order(tuple(order), rank)


def _descriptor(args: argparse.Namespace) -> BufferTensorDesc:
    sizes, strides = args.sizes, args.strides
    uses_layout = args.layout is not None or args.broadcast is not None or args.row_pitch is not None
    if strides is not None and uses_layout:
        given = [f"--{name}" for name in ("layout", "broadcast", "row-pitch")
                 if getattr(args, name.replace("-", "_")) is not None]
        raise UsageError(f"--strides cannot be combined with {', '.join(given)}; give one or the other")
    if uses_layout:
        rank = len(sizes)
        layout = tuple(range(rank)) if args.layout is None else _layout(args.layout, rank)
        broadcast = None if args.broadcast is None else _broadcast_flags(args.broadcast, len(sizes))
        shaped = BufferTensorDesc.from_layout(
            args.dtype, sizes, layout, broadcast=broadcast, row_pitch_alignment=args.row_pitch,
            directml_limits=not args.no_directml_limits,
        )
        strides = list(shaped.strides) if shaped.strides is not None else None
    return BufferTensorDesc(args.dtype, sizes, strides, args.total_size, args.alignment,
                            directml_limits=not args.no_directml_limits)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _alignment(value: int) -> str:
    return f"{value} bytes" if value else "0 (no guarantee)"


def _describe(args: argparse.Namespace) -> None:
    desc = _descriptor(args)
    picture = desc.explain(args.max_elements)
    strides = "none (packed, implicit)" if desc.strides is None else str(list(desc.strides))
    rows = [
        ("data type", f"{desc.data_type.name} ({desc.element_bits} bits per element)"),
        ("sizes", str(list(desc.sizes))),
        ("strides", strides),
        ("effective strides", str(list(desc.effective_strides))),
        ("element count", str(desc.element_count)),
        ("total size", f"{desc.total_tensor_size_in_bytes} bytes"),
        ("minimum size", f"{desc.minimum_size_in_bytes} bytes"),
        ("alignment", _alignment(desc.guaranteed_base_offset_alignment)),
        ("packed", _yes(desc.is_packed)),
        ("padded", _yes(desc.is_padded)),
        ("broadcast", _yes(desc.is_broadcast)),
        ("overlap", "not ruled out" if desc._overlap_status() is None else _yes(desc.has_overlap)),
        ("layout", desc.layout or "none"),
    ]
    width = max(len(name) for name, _ in rows) + 1
    print(repr(desc))
    for name, value in rows:
        print(f"{name + ':':<{width}} {value}")
    print()
    print(picture)


def _size(args: argparse.Namespace) -> None:
    print(calc_buffer_tensor_size(args.dtype, args.sizes, args.strides))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dmlstride`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` by default.

    Returns
    -------
    int
        0 on success (and for ``--help``/``--version``); 2 when an argument is
        wrong, after printing ``dmlstride: error: <message>`` on stderr; 1 when
        standard output is a pipe whose reader has gone (nothing is printed).

    Examples
    --------
    >>> main(["size", "--dtype", "float32", "--sizes", "65537,65536", "--strides", "65536,1"])
    17180131328
    0
    >>> main(["size", "--dtype", "float32", "--sizes", "0,3"])
    2
    """
    parser = _parser()
    try:
        try:
            try:
                args = parser.parse_args(argv)
            except SystemExit as stop:  # --help and --version print, then exit
                sys.stdout.flush()
                return stop.code if isinstance(stop.code, int) else 0
            args.run(args)
        except (UsageError, DescriptorError, TypeError, ValueError, OverflowError) as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            print(f"{PROG}: error: {message}", file=sys.stderr)
            return 2
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        _discard_stdout()
        return 1
    return 0


def _discard_stdout() -> None:
    """Point standard output at the null device, so that exiting does not write to the closed pipe.

    The recipe of Python's documentation for ``SIGPIPE`` (``signal`` module notes).
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file: nothing left to flush to a pipe
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
