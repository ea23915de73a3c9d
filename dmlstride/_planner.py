"""The copy planner: how a (source layout, destination layout) pair is copied.

Private module.  :func:`plan_copy` decides; ``dmlstride._engine.Plan`` checks
the decision against the C limits, stores it in the structs of
``src/plan.h`` and runs it.  Every decision can be tested here on its own:

* size-1 dimensions are dropped;
* dimensions are ordered by destination stride (outermost first), ties broken
  by source stride, so writes stream;
* neighbours contiguous in both operands are merged;
* the innermost dimension is classified: contiguous in both (``memcpy``), a
  zero source stride (``fill``), a transposition (another dimension is the
  source's fastest: ``tile``, or ``interleave`` for 2-7 planes, 2-8 of
  one-byte values, into interleaved channels), or plain ``strided``;
* a transposition whose source-contiguous run (group K) and destination-
  contiguous run (group J) span several dimensions is copied in J x K
  blocks (``block``);
* 4-bit types packed in some memory order go through byte staging blocks
  (``staged``: unpack, a byte plan, pack; nibbles on one side or on both);
  other 4-bit layouts take the element-wise ``nibble`` path.

Work is a flat range of tasks (outer index x segment of the innermost
dimension, x piece of k for a transpose cut in uneven pieces) that threads
split into disjoint destination slabs.

All strides here are in bytes (in nibbles on a 4-bit side).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ._limits import MAX_DIMENSION_COUNT as MAX_DIMS
from ._machine import cpu_signature, l3_cache_bytes

#: The L3 cache as the system reports it (bytes; 0 where it cannot tell).
L3_BYTES = l3_cache_bytes()
#: Machines whose L3 is at most this many bytes (an AMD EPYC's 32 MiB a core
#: complex, a desktop part's) read and write a mid-size copy (a few MiB)
#: from the L3 far faster than from memory, and some transposes stay in
#: cache longer there (SMALL_L3): see TILE_STREAM_WIDE_SIXTEENTHS,
#: TILE_STREAM_EIGHTHS_BYTE_FAR and BLOCK_TALL_TILE_MIN_WIDTH.  A larger L3 (a server's, shared over a mesh
#: by many cores: 260 MiB as an Intel Xeon virtual machine reports it) gave
#: each core less of it than streaming to memory did.  Where the size is
#: unknown, the bounds of a large L3.
SMALL_L3_MAX_BYTES = 64 << 20
SMALL_L3 = 0 < L3_BYTES <= SMALL_L3_MAX_BYTES
#: The bounds that hang on it, by name: (with a small L3, with a large one).
#: A small L3 is shared with whatever else runs on its cores: on an AMD EPYC
#: (Zen 4) virtual machine whose 32 MiB L3 other jobs used, a memcpy of 8 MiB
#: (one thread) ran at half its speed from the L3 and one of 12 MiB at
#: memory speed, and one- and two-byte tiles of 8-16 MiB planned to stay in
#: cache (their two sides together up to the whole L3) read 7-10 GB/s.  Those
#: stream from 8 MiB now, as with a large L3 (TILE_STREAM_EIGHTHS_IN_CACHE,
#: TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE; TILE_STREAM_EIGHTHS_BYTE_FAR from 8
#: MiB rather than 4): in one process on the same buffers, the two plans
#: alternating (2 threads, 9 rounds), 8 NCHW to NHWC uint8 scatters of small
#: planes (7 x 7 to 11 x 11) and 320-1280 channels, 9-12 MiB, ran 1.88x
#: faster by geometric mean (1.17-2.25x), 12 unnamed NHWC to NCHW uint8
#: gathers of 40-200 channels 1.11x (0.85-1.57x), 9 uint8 2-D transposes and
#: NCHW to NHWC scatters with planes far apart 1.16x (0.82-1.43x), 8 two-byte
#: ones 1.11x (0.93-1.26x), and fresh unnamed draws of 8-16 MB whose plans
#: it changes 1.12x (11 of one- and two-byte values, 0.80-2.20x) and 1.22x
#: (18 uint8, 0.77-1.79x, 16 faster).  (Those bounds had been 12-16 MiB,
#: measured faster on a quieter L3.)  Four- and eight-byte tiles streamed
#: from 8 MiB measured 1.04x (23, 0.66-1.50x) and keep 12 MiB, those from
#: source rows far apart now too (TILE_STREAM_WIDE_FAR_SIXTEENTHS), and
#: blocks stream whole from 8 MiB (BLOCK_WHOLE_EIGHTHS).
L3_BOUNDS = {
    "TILE_STREAM_WIDE_SIXTEENTHS": (6, 1),
    "TILE_STREAM_WIDE_FAR_SIXTEENTHS": (6, 1),
    "TILE_L2_WIDE_MIN_TOTAL": (12 << 20, 2 << 20),
    "TILE_STREAM_EIGHTHS_BYTE_FAR": (2, 1),
    "TILE_CACHED_BYTE_FAR_BYTES": (8 << 20, 8 << 20),
    "TILE_L2_FAR_BYTE_MIN_TOTAL": (8 << 20, 4 << 20),
    "TILE_STREAM_EIGHTHS_IN_CACHE": (2, 2),
    "TILE_CACHED_NARROW_BYTES": (8 << 20, 8 << 20),
    "TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE": (2, 2),
    "TILE_CACHED_CLOSE_BYTES": (8 << 20, 8 << 20),
    "BLOCK_WHOLE_EIGHTHS": (2, 3),
    "BLOCK_WHOLE_SHORT_ROW_BYTES": (0, 256),
    "BLOCK_TALL_TILE_MIN_WIDTH": (2, 4),
    "BLOCK_TALL_TILE_MAX_J_BYTES": (512, 64),
    "WHOLE_AHEAD_MAX_BYTES": (5 << 16, 64 << 10),
    "BLOCK_TALL_ALIASED_ROWS": (64, 4),
    "L2_PHASE_LINES": (1, 2),
    "BAND_ASKS_L2": (0, 1),
    "BROADCAST_PLAIN_ROW_BYTES": (4096, 0),
    "FILL_STREAMS": (0, 1),
    "TILE_STREAM_EIGHTHS_SHORT_ROWS": (3, 2),
    "TILE_STREAM_EIGHTHS_SHORT_BYTE_ROWS": (2, 2),
    "BLOCK_WHOLE_ONE_RUN_MIN": (0, 4096),
    "SHORT_ROW_FAR_READ_BYTES": (128, 0),
    "COPY_STREAM_ROWS_EIGHTHS": (6, 10),
    "TILE_STREAM_WIDE_ALIASED_SIXTEENTHS": (4, 1),
    "TILE_STREAM_NARROW_ALIASED_SIXTEENTHS": (4, 16),
}


def l3_bound(name: str, small_l3: bool = SMALL_L3) -> int:
    """The value of the bound ``name`` (L3_BOUNDS) on a machine with a small
    L3 or a large one."""
    return L3_BOUNDS[name][0 if small_l3 else 1]


#: MODE block: at most this many elements in each of the J and K groups (the
#: room for their offset tables) ...
BLOCK_GROUP = 2048
#: ... and first at most this many: larger groups only where these leave no
#: block (see plan_block), where a dimension that does not split (43, 113)
#: would leave a small 2-D tile per task.  12 such permutations of 4.7-21 MB
#: (int16, uint32, float32) went from 0.40 to 0.53 of the memcpy limit
#: (geometric mean; a (113, 88, 12, 60) int16 gather 0.15 -> 0.56; two of
#: the 12 slower, within the spread).  Taking larger groups everywhere also
#: changed blocks that already fitted, some of them slower.
BLOCK_GROUP_FIRST = 1024
#: ... and in a block (J x K, sized for L2) ...
BLOCK_ELEMS = 1 << 16
#: ... four times as many of one-byte values (block_elems), so that a short K
#: leaves J room for its next dimension: in one process on the same buffers,
#: the plans alternating (2 threads), 5-D and 6-D uint8 and int8 permutations
#: of 3-20 MB ran 1.06x faster by geometric mean (24 gathers and scatters,
#: 0.90-1.70x; a (35, 20, 33, 26, 16) gather in order (3, 2, 4, 1, 0) 1.21x,
#: its scatter 1.36x).  Two-byte values with twice as many ran 0.57-0.80x on
#: 5 of 16 (those of 16-24 MB) and keep BLOCK_ELEMS, but for the blocks
#: BLOCK_GROW_WIDTHS lets grow.
BLOCK_ELEMS_ONE_BYTE = 1 << 18


def block_elems(width: int) -> int:
    """The most elements a block (J x K) of ``width``-byte values holds."""
    return BLOCK_ELEMS_ONE_BYTE if width == 1 else BLOCK_ELEMS


#: Blocks of values of these widths in copies of at least this many bytes
#: take room for twice block_elems values where neither group is then
#: shorter and the path through L2 stays the same (plan_block): one side's
#: runs longer, the other's as long, in copies from memory.  In one process
#: on the same buffers, the plans alternating (2 threads, 5 rounds, the old
#: plan against itself as a control: 0.98-0.99x), two-byte permutations of
#: 16-70 MB whose plans this changes ran 1.16x faster by geometric mean (27,
#: 20 of them fresh: 0.92-1.71x) and 1.17x on a fresh 16 (0.90-1.82x).  A
#: plain cap of twice the values, taken whether or not a group got shorter,
#: ran 0.99x on one set (16; a J of 640 cut to 320 beside a K of 180 to 360,
#: 0.84x).  Under 16 MiB, in cache, 0.99x (16, 0.70-1.53x); four- and
#: eight-byte values 1.04x (16, 0.78-1.24x, near the limit already); one-byte
#: blocks, already four times as large, changed in 3 plans of 3000 draws.
BLOCK_GROW_WIDTHS: tuple[int, ...] = (2,)
BLOCK_GROW_MIN_TOTAL = 1 << 24
#: MODE block through L2: bytes in each of the two buffers (the C side's
#: DMLS_SCRATCH_BLOCK_BYTES); each keeps room at its end for a table of
#: BLOCK_L2_ROWS row offsets (the source buffer's rows, for the block
#: kernel), the most values of j a chunk takes.
BLOCK_L2_BYTES = 5 << 16
BLOCK_L2_ROWS = 1024
#: ... of which rows may take this many (the rest is that room).
BLOCK_L2_ROOM = BLOCK_L2_BYTES - 8 * BLOCK_L2_ROWS
#: ... and the run lengths (bytes) that make it pay: source rows at least
#: this long are copied to L2 first (when the destination's are not tiny) ...
BLOCK_L2_SOURCE_RUN = 256
BLOCK_L2_MIN_DEST_RUN = 128
#: ... and destination rows at least this long (or whole lines) are written
#: from L2 too.
BLOCK_L2_DEST_RUN = 256
#: ... and a block longer than L2 holds, copied through it in chunks, is
#: taken when its runs cost less than this fraction of the short block's.
#: At 0.35 (a 6-D case at 0.25 had measured 10-25% faster, a 5-D one at
#: 0.41 5-10% slower), most permutations whose big block's runs cost
#: 0.35-1.0 of the short block's kept the short one.  In one process on the
#: same buffers, alternating (2 threads), 19 unnamed 5-D and 6-D ones of
#: 20-65 MB that 1.0 plans otherwise ran 1.16x faster by geometric mean
#: (0.95-1.70x; the harness's 5-D uint32 gather 1.22x, 0.40 -> 0.49 of the
#: memcpy limit), 13 of 2-16 MB 1.08x (0.95-1.36x).
BLOCK_L2_BIG_GAIN = 1.0
#: Through L2, a side longer than this many bytes is cut into chunks of it.
BLOCK_L2_RUN = 1024
#: Transposes through L2: destination runs (segments) of at least this many
#: bytes (a 3001 x 5003 float32 transpose: 0.61 -> 0.75 of the limit with
#: 1280-byte runs instead of 256).
L2_TILE_RUN = 1024
#: A tile's L2 chunks take its source rows whole up to this many bytes only
#: where its destination rows are longer (the C side's DMLS_TILE_L2_WHOLE_ROW,
#: see plan.h): longer ones give way to destination runs of BLOCK_L2_RUN.
TILE_L2_WHOLE_ROW = 256
#: ... and source rows of at least this many bytes: shorter ones (an NHWC to
#: NCHW gather of up to 15 float32 or 31 int16 channels) take the cached tile.
L2_TILE_MIN_SOURCE_ROW = 64
#: Transposes of at least this many bytes (one side) come from memory, not
#: cache (the C side's DMLS_CACHED_TRANSPOSE_BYTES, where the tile kernel
#: stages their source rows and prefetches into L2) ...
TRANSPOSE_FROM_MEMORY = 8 << 20
#: ... and such a transpose whose destination rows are off line boundaries
#: and which takes neither the L2 buffers nor the short-row paths copies
#: segments of this many values rather than 64: a tile row then writes 256
#: bytes or more of each destination row, with one partly written line at
#: either end, where 64 one- or two-byte values left one in every line or
#: two (memory_tile_segments).
#: Timed in one process on the same buffers with the two plans alternating,
#: 16 2-D uint8, int16 and uint16 transposes of 10-29 MB went from 0.51 to
#: 0.57 of the memcpy limit (128 values: 0.54), and in a second run 20 of
#: 9-29 MB from 0.41 to 0.44 (0.88-1.23x each, 15 of them faster); a third,
#: with segments that give way to enough tasks where k does not divide (2-D
#: transposes of a prime number of rows), 20 of 8-29 MB 0.36 -> 0.38 (15
#: faster, the slowest 0.83x); in cache (5-6 MB) it measured 0.7-1.0x, so
#: smaller copies keep 64.  Four- and eight-byte values, two sets of 7 2-D
#: float32, float64, int32 and uint32 transposes of 12-25 MB: 0.70 -> 0.78
#: and 0.74 -> 0.82 (float32 0.96-1.33x each, float64 0.90-1.24x; 128
#: values: 0.75 and 0.81).
MEMORY_TILE_SEGMENT = 256
#: 1- and 2-byte transposes of at least TALL_TILE_MIN bytes (the C side's
#: DMLS_SOURCE_AHEAD_BYTES) that neither stream nor go through L2, with source
#: rows of more than 128 bytes and destination rows a multiple of 2 KiB apart,
#: copy segments of TALL_TILE_SEGMENT values: the C side's tall tile
#: (DMLS_TRANSPOSE_TALL) reads that many source rows at a time and writes
#: 256 or 512 bytes of each destination row (tall_tile_segments).  2-D
#: transposes of 4-12 MiB with such rows (float16 2048 x 2048, uint8 4096 x
#: 2048) ran 1.2-2.4x faster, measured with the tile (see transpose-sse2.c).
TALL_TILE_MIN = 4 << 20
TALL_TILE_SEGMENT = 256
#: A streaming transpose of two-byte values into destination rows a multiple
#: of 512 bytes apart, from source rows more than 1 KiB apart, copies segments
#: of at least WIDE_BAND_BYTES of each destination row: the C side's wide
#: bands (dmls_nt_wide) write up to that much of each row at a time
#: (wide_band_segments).  Segments of 64 values gave them two lines a row:
#: int16 4096 x 4000 and uint16 3000 x 4096 ran 1.16-1.20x faster than one
#: line a row, four lines 1.53-1.67x.
WIDE_BAND_BYTES = 256
#: MODE tile with at most this many channels takes the small-channel path
#: (the C side's DMLS_SMALL_TILE).
SMALL_TILE = 8
#: Staged 4-bit copies: elements per staging block.
STAGE_ELEMS = 1 << 16
#: Staged 4-bit copies: blocks smaller than this take the element-wise path.
STAGE_MIN_ELEMS = 64
#: Target number of elements per segment of the innermost dimension.
SEGMENT_ELEMS = 1 << 16
#: A transpose of two-byte values that streams (not through L2) writes up to
#: this many bytes of each destination row a task, as many as leave
#: MIN_TILE_TASKS tasks: its segments had been SEGMENT_ELEMS values in all,
#: so that a source row of 150 channels (an NHWC to NCHW gather) left 384
#: values, 768 bytes, of each of its destination rows a task.  In one
#: process on the same buffers, the planner constant toggled with plan caches
#: dropped, alternating in a shuffled order (2 threads, 7 rounds, the old
#: plan against itself as a control), 14 unnamed int16 and float16 NHWC to
#: NCHW gathers and transposes of 10-60 MB whose plans this changes ran
#: 1.18x faster by geometric mean (0.83-1.93x; 131 int16 channels 1.93x, 150
#: 1.35-1.60x in three runs, 216 float16 1.37-1.39x), and a fresh 18 of
#: 9-60 MB 1.27x (0.90-2.18x; the three under 0.97x segments of 1536-1984
#: values made 2048, the control 0.77-1.14x); one-byte values
#: measured 0.74-1.20x (420 and 249 uint8 channels 0.76x and 0.78x), and keep
#: theirs.  Source rows further apart than STREAM_TILE_MAX_SOURCE_ROW
#: bytes (2-D transposes, which took MEMORY_TILE_SEGMENT values on
#: measurement) keep theirs too.
STREAM_TILE_ROW_BYTES = 4096
STREAM_TILE_MAX_SOURCE_ROW = 1024

#: The streaming-store threshold (32 MiB, the L3 size): contiguous copies and
#: fills of at least this many bytes use streaming (non-temporal) stores,
#: copies also from a share of it read and written (copy_streams), transposes
#: from a share of it written (transpose_stream_min); changed by
#: ``_engine._set_stream_min_total``.
stream_min_total = 1 << 25
#: Blocked transposes of at least this many bytes may take both groups as
#: long as the tables allow (a "big" block, see plan_block), where
#: dimensions that do not split (11, 17, 19) would leave one side's runs
#: short: 5-D and 6-D permutations of 2-10 MB went from 0.43 to 0.50 of the
#: memcpy limit (geometric mean of 10; uint8, int16, float32, uint32,
#: float64).  From 1 MiB, a 1.4 MB float64 one ran at 0.7x.
BLOCK_BIG_MIN_TOTAL = 1 << 21
#: A blocked transpose of fewer blocks than this (a permutation that leaves
#: no outer dimension is a single block) has J cut into segments of whole tiles
#: (multiples of 64 values), one task each, about this many in all, so that
#: two threads share them.  12 unnamed permutations of 2.3-10.4 MB in 1-7
#: blocks went from 0.46 to 0.59 of the memcpy limit (geometric mean, 2
#: threads; a single-block float64 (31, 27, 41, 9) gather 0.48 -> 0.75, those
#: of 4-7 blocks not cut); seven more in three blocks 0.46 -> 0.56.  About 16
#: shorter segments measured 0.55 on the first set, and cutting blocks of
#: 5-13 as well gained nothing.
MIN_BLOCK_TASKS = 4
#: Blocked transposes of at least this many bytes (source and destination
#: together past half the 32 MiB L3) may go through L2 (block_l2_mode), with
#: ordinary stores below transpose_stream_min: unnamed 6-D uint16
#: permutations of 17-21 MB went from 0.44-0.58 to 0.54-0.68 of the memcpy
#: limit (those through the source buffer alone no longer take it: five
#: 6-D uint16 and int16 ones of 17-22 MB ran 1.12-1.24x faster in place,
#: see BLOCK_L2_SOURCE_ONLY).  Below it the block is transposed in place,
#: its reads and writes hitting L3: 5-D and 6-D permutations of 2.6-12.3 MB
#: (uint8 to float64)
#: ran 1.15x faster than through L2 (geometric mean of 12 gathers and
#: scatters, 0.41 -> 0.47 of the memcpy limit; four even, none slower;
#: uint8 5-D of 6.4 MB 0.27 -> 0.40, float64 6-D of 3.2 MB 0.49 -> 0.64).
#: Measured again on 14 5-D and 6-D gathers and scatters of 2-12 MB (four
#: of them new), lowering this to 1 MiB took them from 0.48 to 0.45 of the limit
#: (geometric mean; float32 5-D of 6.1 MB 0.47 -> 0.34, float64 6-D scatter
#: 0.53 -> 0.45).  The uint8 and float32 5-D ones run 2.0-3.0x faster on
#: two threads than on one: each core's cache bounds them, not its shuffles.
BLOCK_L2_MIN_TOTAL = 1 << 24
#: Blocks of two- to eight-byte values are chosen counting the L2 buffers
#: from this many times BLOCK_L2_MIN_TOTAL only (32 MiB, the streaming
#: threshold); below it, those that would stream in place (their rows on line
#: boundaries) are transposed in place, streamed, the others planned again
#: with BLOCK_L2_MIN_TOTAL (plan_block; past it BLOCK_L2_IN_PLACE keeps the
#: streaming ones out of the buffers as well).  On the Intel machine of the
#: README's results, in one process on the same buffers, alternating (2
#: threads, 5 rounds, the old plan against itself as a control: 0.79-1.18x),
#: unnamed 3-D to 6-D permutations of 16-32 MiB so planned ran 1.57x faster by
#: geometric mean in place (a fresh 22, 0.69-2.00x, 21 faster: 9-12 -> 14-21
#: GB/s), after 30, 26 and 22 in which all two- to eight-byte blocks of that
#: size went in place ran 1.43x, 1.30x and 1.07x: those that could not
#: stream, writing rows off line boundaries with ordinary stores, ran
#: 0.46-0.51x in place in three cases (rows of 1.7-3.8 KB), and keep the
#: buffers from BLOCK_L2_MIN_TOTAL, as do one-byte blocks (0.43-0.98x in
#: place, 3).  Past 32 MiB all blocks of wider values in place measured
#: about even (22, 0.50-1.97x), those of them that stream 1.43-1.97x (5 of
#: 5): see BLOCK_L2_IN_PLACE.  (The 16 MiB bound was set on a machine with a
#: 32 MiB L3.)
BLOCK_L2_WIDE_TIMES = 2
#: Blocks that would stream in place (rows on line boundaries) never take
#: the L2 buffers, whatever their values (the block chosen as before,
#: counting its L2 chunks), and are transposed in place with streaming
#: stores.  The same way, a fresh 22 unnamed 3-D to 6-D permutations of
#: 32-72 MiB of two- to eight-byte values so planned ran 1.76x faster by
#: geometric mean (1.25-2.17x, every one faster; 10-13 -> 15-28 GB/s;
#: control 0.93-1.12x), after 5 of 5 at 1.43-1.97x in a first set, and a
#: fresh 22 of one-byte values of 16-72 MiB 1.41x (1.19-1.83x, every one
#: faster).  On a machine whose L3 is much smaller than the copy, the
#: buffers may pay again (unmeasured here).
BLOCK_L2_IN_PLACE = True


#: A block tile one line tall reads a line from each of BLOCK_DEPTH source
#: rows (the C side's DMLS_BJ).
BLOCK_DEPTH = 64
#: Bytes of one way of the L2 (its size over its ways: 64 KiB on an AMD Zen 3
#: core's 512 KiB of 8 ways, 128 KiB on an Intel Xeon's 2 MiB of 16): source
#: rows a multiple of it apart in a buffer of huge pages (numpy asks for them
#: for large arrays) share an L2 set (rows_per_l2_set).
L2_WAY_BYTES = 64 << 10
#: Blocks of four- and eight-byte values streamed in place whose band of
#: BLOCK_DEPTH source rows puts more than this many in one L2 set take tiles
#: four lines tall (16 rows, a quarter of the lines in that set at a time;
#: the streaming stores still write whole lines).  One line tall, a band's
#: lines and those asked for ahead evict one another from the L2 before they
#: are used: on an Intel Xeon (2 MiB of L2 a core, a 480 MiB L3), in one
#: process on the same buffers, the plans switched between samples (2
#: threads, 5 rounds), 30 permutations of 4-D to 8-D power-of-two
#: dimensions of 34-67 MB so planned ran 1.47x faster by geometric mean
#: (0.85-2.51x) in a first run and 1.18x in a second, a fresh 20 of 24-70 MB
#: 1.21x (0.77-1.91x), and 20 of 16 MiB, from cache in part, 1.03x
#: (0.70-1.46x) (a float64 (64, 128, 2, 128, 4) gather 7.1 -> 17 GB/s; with
#: 4 KiB pages rather than huge ones, two of them ran 2.5x and 2.7x faster
#: one line tall); more than 8 or 16 rows a set 1.42x and 1.26x.  Four
#: lines tall for every such block, whatever its rows, measured 0.94x on 40
#: unnamed ones (0.52-1.25x).  Unmeasured on a machine with a small L3 (an
#: AMD EPYC of 32 MiB), where they stay one line tall (64, BLOCK_DEPTH: no
#: band puts more rows than that in a set).
BLOCK_TALL_ALIASED_ROWS = l3_bound("BLOCK_TALL_ALIASED_ROWS")
#: Lines of k per source row in chunks of rows a multiple of PHASE_BYTES
#: apart (l2_lines).
L2_PHASE_LINES = l3_bound("L2_PHASE_LINES")
#: Whether the line-aligned bands of source rows close together (pixels of an
#: NHWC to NCHW gather) ask for the next band into L2 rather than L1: 1 with a
#: large L3, where asks into L1 made bands off a page's first KiB slow
#: (transpose-sse2.c, dmls_nt_transpose); the engine reads it once, at import.
BAND_ASKS_L2 = l3_bound("BAND_ASKS_L2")

#: Block plans whose k rows are adjacent in the destination take tiles four
#: source lines tall below this many bytes, one line tall from it (plan_block).
#: In one process on the same buffers, alternating (2 threads, 7 rounds), 27
#: unnamed 4-D to 6-D permutations of 10-66 MB so planned ran 1.16x faster
#: one line tall (geometric mean; 23 faster, 0.70-1.43x; int16 and float16
#: gathers and scatters of 11-16 MB 1.25-1.42x, a 66 MB uint8 gather 1.43x);
#: tiles four lines tall first measured 0.66-1.11x (0.90x) of one line on
#: 27 of 2.8-9.6 MB, where the destination stays in cache.
BLOCK_TALL_TILE_MAX_TOTAL = 10 << 20
#: ... and only blocks of values of at least BLOCK_TALL_TILE_MIN_WIDTH bytes
#: whose J is at most BLOCK_TALL_TILE_MAX_J_BYTES (within a line).  Here
#: (an Intel machine of 2 MiB L2 a core) tiles four lines tall lost where
#: they had been chosen: in one process on the same buffers, alternating (2
#: threads, 5 rounds, the old plan against itself as a control), 24 unnamed
#: 3-D to 6-D permutations of 2-10 MB ran 1.30x faster one line tall
#: (0.89-2.16x; apart, a uint8 scatter of 59 x 55 x 20 x 69 x 2, rows of
#: 59 bytes whose first K dimension has 2 values, from 0.18 of the memcpy
#: limit to 2.2x that), a second 32 of 0.35-10 MB 1.13x, its slowest four-
#: and eight-byte values with J of 32-96 bytes (0.63-0.90x; one uint8 0.85x,
#: an eight-byte J of 512 bytes 0.87x), hence these bounds;
#: with them, a fresh 28 of 1-10 MB ran 1.20x faster (0.85-1.96x).
#: On a machine with a small L3 (SMALL_L3: the AMD EPYC, 1 MiB of L2 a core)
#: the tall tiles won again for two-byte and wider values whatever their J
#: (512 bytes: no bound under 64 values of j): in one process on the same
#: buffers, alternating (2 threads, 6 rounds), 18 unnamed permutations of
#: 2-10 MB ran 1.21x faster with every width (0.95-1.66x), a fresh 18 1.08x
#: whose one-byte ones ran 0.58-0.86x (the other 15 1.17x), and with the
#: two-byte bound a fresh 18 1.23x (0.90-1.81x, 15 faster).
BLOCK_TALL_TILE_MIN_WIDTH = l3_bound("BLOCK_TALL_TILE_MIN_WIDTH")
BLOCK_TALL_TILE_MAX_J_BYTES = l3_bound("BLOCK_TALL_TILE_MAX_J_BYTES")


#: Transposes (tile and block plans) stream from this many eighths of
#: stream_min_total (12 MiB): their source and destination together then
#: fill three quarters of a 32 MiB L3, and their scattered writes gain more
#: from skipping the read for ownership than a contiguous copy does.  Mid-size
#: transposes of 12-26 MB measured 0.61 -> 0.69 of the memcpy limit
#: (geometric mean of 14 gathers and scatters: 14.8 MB float16 40-channel
#: NCHW to NHWC 0.60 -> 0.81, 3333 x 2222 uint16 0.47 -> 0.58; none slower).
TRANSPOSE_STREAM_EIGHTHS = 3
#: Tile plans of one- and two-byte values whose source rows lie at least
#: TILE_STREAM_NARROW_MIN_ROW bytes apart stream from this many eighths
#: instead (8 MiB), where the engine stops treating such transposes as in
#: cache (16 MiB for wider values): between 8 and 12 MiB they read the
#: source as if from memory and wrote with ordinary stores.  In one process,
#: alternating with the 12 MiB bound (2 threads, 7 rounds, an A/A control
#: beside it: 0.80-1.24x), 38 unnamed NHWC/NCHW conversions and 3-D to 5-D
#: permutations of 8-12 MiB so planned ran faster, 1.25x and 1.36x by
#: geometric mean in two sets (0.76-2.05x; an int16 scatter into pixels of 13
#: channels 0.76x).  Pixels closer together (NHWC to NCHW gathers of 12-22
#: channels) measured 0.61-1.16x, 0.9x by geometric mean, and block plans
#: 0.54-1.64x, 1.08x: those keep the 12 MiB bound.
TRANSPOSE_STREAM_EIGHTHS_NARROW = 2
TILE_STREAM_NARROW_MIN_ROW = 40
#: So do one- and two-byte values whose source rows lie SHORT_ROWS bytes
#: apart (NHWC to NCHW gathers of 9-15 one-byte or 9-19 two-byte channels),
#: with a large L3 (TILE_STREAM_EIGHTHS_SHORT_ROWS; with a small one, the 12
#: MiB bound): the cached tile copied each plane's piece out of its buffer
#: with ordinary stores.  On the Intel Xeon with a 480 MiB L3, in one process
#: on the same buffers, the two plans alternating (2 threads, 5-7 rounds):
#: 34 unnamed one-byte copies so planned (NHWC to NCHW gathers, 2-D
#: transposes of 9-15 columns, 5-D permutations) of 8.4-11.6 MB ran 1.09x
#: faster by geometric mean timed back to back, as the harness's samples
#: mostly are (0.89-1.35x), and 1.16-1.50x with each call timed after a
#: memcpy of other buffers (out of cache: 0.38-1.23 -> 0.48-1.42 of the
#: memcpy limit); 40 two-byte ones of 8.5-12.1 MB 1.06x back to back
#: (0.81-1.27x) and 1.08-1.56x out of cache.  One-byte copies of 1-3 MB ran
#: 0.64x and 0.81x back to back, hence 8 MiB.  Pixels of 5-8 or 16-37
#: one-byte channels and of 5-8 two-byte ones measured 0.65-1.16x out of
#: cache and keep their bounds.
SHORT_ROWS = {1: (9, 15), 2: (18, 38)}
TILE_STREAM_EIGHTHS_SHORT_ROWS = l3_bound("TILE_STREAM_EIGHTHS_SHORT_ROWS")
#: ... one-byte ones stream from 8 MiB with a small L3 too
#: (TILE_STREAM_EIGHTHS_SHORT_BYTE_ROWS), that L3 being shared (see
#: L3_BOUNDS): in one process on the same buffers, the two plans alternating
#: (2 threads, 9 rounds), 12 unnamed NHWC to NCHW gathers of 10-15 uint8
#: channels of 8.4-11.7 MiB ran 1.22-1.50x faster (1.39x by geometric mean;
#: 7.3-8.2 GB/s from cache), a fresh 12 of 8.8-11.8 MiB 1.39x (1.28-1.61x,
#: every one faster); two-byte ones of 19 channels
#: measured 1.01x and 0.71x, and keep 12 MiB there.
TILE_STREAM_EIGHTHS_SHORT_BYTE_ROWS = l3_bound("TILE_STREAM_EIGHTHS_SHORT_BYTE_ROWS")
#: Those figures are from an Intel Xeon with a large L3 (see SMALL_L3).  On a
#: machine with a small one, tile plans of two-byte values whose source rows
#: lie more than CLOSE_ROW_BYTES apart (2-D transposes, NCHW to NHWC
#: scatters) stream from this many eighths (16 MiB), and below that run from
#: cache (TILE_CACHED_NARROW_BYTES, the same 16 MiB; the engine's default is
#: 8).  On an AMD EPYC with a 32 MiB L3, two builds alternating (2 threads, 8
#: rounds), such 2-D int16 and float16 transposes and NCHW to NHWC scatters
#: of 8.5-16 MB ran 1.50-2.09x faster (6 of 6, the vCPUs close together),
#: and a fresh 14 1.37x by geometric mean (1.03-1.72x, every one faster); in
#: one process alternating, with the vCPUs far apart, 1.04-1.77x (13).  With
#: the stream bound alone (the engine reading them as if from memory, with
#: ordinary stores) 2-D ones ran 0.73-0.85x.  Two-byte rows closer together
#: (NHWC to NCHW gathers) measured 1.14-1.50x under 12 MB but 0.64-0.73x at
#: 14.8-16 MB, and take the bounds of close rows below.  (With an L3 that
#: other jobs share, those measured slower than streaming from 8 MiB, now
#: the bound for both: see L3_BOUNDS.)
TILE_STREAM_EIGHTHS_IN_CACHE = l3_bound("TILE_STREAM_EIGHTHS_IN_CACHE")
TILE_CACHED_NARROW_BYTES = l3_bound("TILE_CACHED_NARROW_BYTES")
#: Likewise one-byte values whose source rows lie TILE_STREAM_NARROW_MIN_ROW
#: to CLOSE_ROW_BYTES apart (NHWC to NCHW gathers of 40 or more channels)
#: and two-byte ones whose rows are 40-63 bytes (20-31 channels), up to 12
#: MiB (three eighths, TILE_CACHED_CLOSE_BYTES).  Two-byte ones, two builds
#: alternating (2 threads, 8 rounds): 12 unnamed NHWC to NCHW gathers of
#: 21-31 channels, 10.7-15.2 MB, with 16 MiB bounds ran 1.08-1.51x under 13.3
#: MB (6 of 6) and 0.73-0.99x over it (6), hence 12 MiB; a fresh 10 of
#: 8.1-11.9 MB with 12 MiB bounds, 1.26-1.69x with 20-30 channels (7 of 7),
#: but 0.97-1.03x with 33-38 and 0.79x with 40, which keep 8 MiB
#: (TILE_IN_CACHE_TWO_BYTE_MAX_ROW).  One-byte ones, two builds
#: alternating (2 threads, 8 rounds), 12 unnamed such gathers and scatters
#: of 8.7-15.8 MB ran 1.09-1.62x faster under 13.6 MB (9 of 10; a 5-D
#: scatter of 8.7 MB 0.91x), but 0.78-0.83x at 15.3-15.8 MB; in one process
#: alternating, 12 MiB bounds 1.12x over 12 of 8.7-15.3 MB (0.90-1.50x); two
#: builds alternating with the 12 MiB bounds, the vCPUs far apart, a fresh 8
#: of 9.1-11.6 MB so planned (2-D-like NHWC to NCHW gathers of 40-47
#: channels, 5-D and 6-D gathers) 1.21-1.74x.
#: One-byte rows farther apart keep TILE_STREAM_EIGHTHS_BYTE_FAR.  (With an
#: L3 that other jobs share, 8 MiB again: see L3_BOUNDS.)
TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE = l3_bound("TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE")
TILE_CACHED_CLOSE_BYTES = l3_bound("TILE_CACHED_CLOSE_BYTES")
TILE_IN_CACHE_TWO_BYTE_MAX_ROW = 63


def narrow_in_cache_bounds(width: int, row_stride: int) -> tuple[int, int] | None:
    """(eighths of stream_min_total from which it streams, bytes under which
    it runs from cache) for a tile plan of one- or two-byte values whose
    source rows lie row_stride bytes apart, where the planner sets them
    (TILE_STREAM_EIGHTHS_BYTE_FAR, TILE_STREAM_EIGHTHS_IN_CACHE,
    TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE); else None."""
    if width == 1 and row_stride > CLOSE_ROW_BYTES:
        return TILE_STREAM_EIGHTHS_BYTE_FAR, TILE_CACHED_BYTE_FAR_BYTES
    if width == 2 and row_stride > CLOSE_ROW_BYTES:
        return TILE_STREAM_EIGHTHS_IN_CACHE, TILE_CACHED_NARROW_BYTES
    close_max = {1: CLOSE_ROW_BYTES, 2: TILE_IN_CACHE_TWO_BYTE_MAX_ROW}.get(width, 0)
    if TILE_STREAM_NARROW_MIN_ROW <= row_stride <= close_max:
        return TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE, TILE_CACHED_CLOSE_BYTES
    return None


def tile_cached_bytes(plan: "KernelPlan") -> int:
    """The bytes under which a tile plan that does not stream runs from cache,
    where the planner sets them (narrow_in_cache_bounds), else 0 (the
    engine's own bound)."""
    bounds = narrow_in_cache_bounds(plan.width, abs(plan.inner[1])) if plan.mode == "tile" else None
    return bounds[1] if bounds is not None else 0


#: Tile plans of four- and eight-byte values stream from this many sixteenths
#: of stream_min_total (2 MiB), and those whose source rows lie more than
#: CLOSE_ROW_BYTES apart go through the L2 buffers from
#: TILE_L2_WIDE_MIN_TOTAL (see tile_through_l2), the same 2 MiB: under 12 MiB
#: the cached tile read odd-sized 2-D transposes at 0.1-0.2 of the memcpy
#: limit (2001 x 1503 float32, 2.2 GB/s on 2 threads). In one process on the
#: same buffers, alternating (2 threads, 3 rounds, the old plan against
#: itself as a control: 0.88-1.07x), unnamed 2-D transposes, NHWC/NCHW
#: conversions and 3-D to 6-D permutations of 2-14 MB so planned ran 1.2x
#: faster by geometric mean in each of three sets (float32 2001 x 1503 2.7x;
#: four- and eight-byte ones 0.79-2.2x, the one under 0.9 a float64 5-D
#: scatter), and 1.3x and 1.41x in two fresh sets of 26 and 24 (0.68-2.2x;
#: the one under 0.8 beside a control of 2.1). Under 2 MB they measured 0.93x
#: (0.56-1.39x: the small 2-D ones 0.56-0.78x), and one- and two-byte ones of
#: 2-8 MB 0.49-2.3x (1.06x over 27 of 4.5-8.3 MB), so those keep their bounds.
#: Those figures are from an Intel Xeon with a large L3 (see SMALL_L3).  On an
#: AMD EPYC with a 32 MiB L3 the cached tile ran far faster under 12 MiB, and
#: there both bounds are 12 MiB (six sixteenths): in one process on the same
#: buffers, alternating (2 threads, 6 rounds), a fresh 16 unnamed four- and
#: eight-byte 2-D transposes, NHWC/NCHW conversions and 4-D to 6-D
#: permutations of 2-9 MB ran 1.79x faster by geometric mean in cache with
#: bounds of 8 MiB (1.12-2.52x, every one faster; float32 1350 x 1314 19.0 ->
#: 29.6 GB/s), a fresh 14 of 8-13 MB 1.15x faster with bounds of 12 MiB than
#: of 8 (0.90-1.54x), and 14 of 12-17 MB about even with 16 MiB against 12
#: (1.05x, 0.63-1.42x: 2-D transposes faster, NCHW to NHWC gathers slower).
TILE_STREAM_WIDE_SIXTEENTHS = l3_bound("TILE_STREAM_WIDE_SIXTEENTHS")
#: ... and those from source rows more than CLOSE_ROW_BYTES apart (2-D
#: transposes, NCHW to NHWC scatters) from 16 MiB there, the cached tile's
#: own bound for such values (DMLS_CACHED_WIDE_TRANSPOSE_BYTES): in one
#: process on the same buffers, the two plans alternating (2 threads, 6
#: rounds), two sets of 16 unnamed four- and eight-byte transposes of
#: 12.7-16.7 MB ran 1.06x and 1.05x faster by geometric mean, those with
#: source rows far apart 1.12x (20, 0.80-1.47x; float64 765 x 2122 22.3 ->
#: 32.8 GB/s) and NHWC to NCHW gathers, whose pixels lie close, 0.95x (12,
#: 0.80-1.25x), which keep 12 MiB.  With that L3 shared with other jobs
#: (see L3_BOUNDS), those of 12-16 MiB ran faster streamed, and the bound is
#: 12 MiB for both: in one process on the same buffers, the two plans
#: alternating (2 threads, 7 rounds), 24 unnamed four- and eight-byte copies
#: of 12-17.5 MB whose plans this changes ran 1.18x faster by geometric mean
#: (0.93-2.09x, 19 faster).  From 8 MiB, 24 of 8.4-12.5 MB measured 1.04x
#: (0.73-1.65x; 2-D gathers 0.73-0.86x), so not that.
TILE_STREAM_WIDE_FAR_SIXTEENTHS = l3_bound("TILE_STREAM_WIDE_FAR_SIXTEENTHS")
#: ... but those whose rows crowd L1's sets (aliased_tile_rows: a band of up
#: to 64 rows puts TILE_ALIASED_SET_ROWS or more in one set, rows a multiple
#: of 1 KiB apart; source rows only where there are TILE_ALIASED_SOURCE_ROWS
#: or more: 2-D transposes and NCHW/NHWC conversions of power-of-two
#: dimensions) from 8 MiB there (four sixteenths): the cached tile read a
#: float32 1536 x 2048 gather at 0.43 of the memcpy limit, a 3072 x 1024
#: scatter at 0.40.  Timed as the benchmarks time (samples of about ten
#: back-to-back calls, which find their buffers in the L3 when they fit),
#: the two plans alternating in one process on the same buffers (2 threads,
#: 5 rounds, the old plan against itself as a control: 1.02x), 68 such
#: four- and eight-byte copies of 8-16 MB ran 1.24x faster by geometric mean
#: (0.74-2.06x; 8-12 MB 1.13x, 12-16 MB 1.45x).  The rows' counts come from
#: a human-picked set of 47 whose plans an earlier form changed (1.06x): NCHW
#: to NHWC scatters of 8-32 channels, the planes their source rows, ran
#: 0.52-0.84x streamed, 128 or more 1.09-1.74x.  With them and the bound
#: below, a fresh 56 of 8-16 MB (2-D, NCHW/NHWC, 5-D; one- to eight-byte)
#: 1.17x (0.55-1.96x, 39 faster; control 1.00x; four- and eight-byte ones
#: 1.17x, one- and two-byte 1.18x; a float64 256 x 4096 gather 0.55x).
#: Odd-sized ones of 8-16 MB, whose rows alias none, measured 0.89x from 8
#: MiB (20, 0.61-1.18x) and keep their bounds.
TILE_STREAM_WIDE_ALIASED_SIXTEENTHS = l3_bound("TILE_STREAM_WIDE_ALIASED_SIXTEENTHS")
TILE_ALIASED_SET_ROWS = 16
TILE_ALIASED_SOURCE_ROWS = 128
#: One- and two-byte tiles whose rows so crowd L1's sets stream from 8 MiB
#: there too (with a large L3 their own bounds, all under the 32 MiB of
#: sixteen sixteenths): from cache or through the L2 buffers (up to 12-16
#: MiB) the float16 3072 x 2048 scatter read 0.42 of the memcpy limit and a
#: 1 x 16 x 512 x 512 NHWC to NCHW gather 0.51.  Timed as above, 51 such of
#: 4-16 MB ran 1.14x faster (0.66-1.98x): those of 8-16 MB 1.46x, of 6-8 MB
#: 1.11x and of 4-6 MB 0.94x; a fresh 11 of 6-8 MB with the rows' counts
#: 0.79x, so from 8 MiB.  (Samples of three calls, from colder caches, had
#: measured 1.32x and 1.36x from 4 MiB.)
TILE_STREAM_NARROW_ALIASED_SIXTEENTHS = l3_bound("TILE_STREAM_NARROW_ALIASED_SIXTEENTHS")
TILE_L2_WIDE_MIN_TOTAL = l3_bound("TILE_L2_WIDE_MIN_TOTAL")
#: One-byte tile plans whose source rows lie more than CLOSE_ROW_BYTES apart
#: (a 2-D transpose's) stream from this many eighths of stream_min_total (4
#: MiB) and go through the L2 buffers from TILE_L2_FAR_BYTE_MIN_TOTAL, the
#: same 4 MiB: in one process on the same buffers, alternating (2 threads, 3
#: rounds, the old plan against itself as a control: 0.85-1.10x), 24
#: unnamed uint8 transposes of 4.2-8.4 MB so planned ran 1.22x faster by
#: geometric mean (0.74-1.86x; 2-D ones from 5.5-8.2 to 7.9-10.3 GB/s).
#: Two-byte ones of 4.5-8.4 MB measured about even (0.49-1.29x) and keep 8
#: MiB.  On a machine with a small L3 (SMALL_L3) both bounds are 8 MiB, as for
#: two-byte values: on an AMD EPYC with a 32 MiB L3, in one process on the
#: same buffers, alternating (2 threads, 6 rounds), a fresh 16 unnamed uint8
#: 2-D transposes and NCHW to NHWC scatters of 4.4-7.8 MB ran 1.45x faster by
#: geometric mean in cache (1.11-1.96x, every one faster; 3139 x 1407 13.9 ->
#: 27.3 GB/s).  There, those of 8-12 MiB run from cache too, without
#: streaming (TILE_CACHED_BYTE_FAR_BYTES, the cached tile's bound, and three
#: eighths): in one process on the same buffers, the two plans alternating
#: (2 threads, 6 rounds), 8 unnamed uint8 2-D transposes and NCHW to NHWC
#: scatters of 9.6-12.5 MB ran 1.16x faster by geometric mean (1.01-1.40x), a
#: fresh 16 of 9.1-11.5 MB 1.28x (0.97-1.62x; 2988 x 3054 17.4 -> 28.2
#: GB/s); past 12 MiB they measured 0.76-0.94x (8 of 12.6-16.6 MB).  With an
#: L3 that other jobs share, those of 8-12 MiB ran faster streamed, and the
#: bound is 8 MiB for both (see L3_BOUNDS).
TILE_STREAM_EIGHTHS_BYTE_FAR = l3_bound("TILE_STREAM_EIGHTHS_BYTE_FAR")
TILE_CACHED_BYTE_FAR_BYTES = l3_bound("TILE_CACHED_BYTE_FAR_BYTES")
TILE_L2_FAR_BYTE_MIN_TOTAL = l3_bound("TILE_L2_FAR_BYTE_MIN_TOTAL")


#: Contiguous copies stream also when the bytes they read and write
#: together reach this many eighths of stream_min_total (40 MiB), past the
#: 32 MiB L3, with a destination under it: a 25.4 MB float32 pitched copy
#: measured 0.97-1.08x -> 1.20-1.36x PyTorch (15-16 -> 19-21 GB/s, 2
#: threads); plain float32 copies of 24-28 MB 17.9-19.8 -> 20.2-21.5 GB/s,
#: 16-20 MB about even.  Source bytes read again (a dimension broadcast from
#: the source) count once: a destination under 32 MiB filled from a small
#: source stays in the L3 across calls, and streaming its stores measured
#: 0.90-1.07x -> 0.67-0.78x PyTorch (29.6 MB int16 broadcast along H or W).
COPY_STREAM_EIGHTHS = 10
#: ... but COPY_STREAM_ROWS_EIGHTHS (24 MiB) with a small L3 where the copy
#: is rows apart on a side (any outer dimension left after merging: a pitched,
#: sliced or padded copy, not one run): there each row went out with ordinary
#: stores, the lines at its ends in part.  On the AMD EPYC (Zen 4, 32 MiB L3),
#: in one process on the same buffers, the plans alternating in a shuffled
#: order with an A/A control (2 threads, 11 rounds, 3 calls a sample), 16
#: unnamed placed copies of 12-20 MB whose plans a bound of 24 MiB changes
#: ran 1.11x faster streamed, the pitched ones 1.07-2.07x and the packed
#: ones (one run) 0.81-0.99x, hence the condition on the rows; with it, a
#: fresh 20 pitched and broadcast copies of 12.5-20.6 MB 1.11x (0.87-2.72x,
#: 15 faster; the control 1.00x, 0.90-1.24x).  A large L3: 40 MiB, as before
#: (unmeasured there).
COPY_STREAM_ROWS_EIGHTHS = l3_bound("COPY_STREAM_ROWS_EIGHTHS")

#: Contiguous copies whose source is read again (a dimension broadcast from
#: it) never stream rows of at most this many bytes with a small L3: the
#: source is in cache and ordinary stores from the engine's copy loop ran
#: ahead of streaming stores.  In one process, alternating (2 threads),
#: outputs of 64-128 MiB broadcast along H with rows of 512-1200 bytes
#: 1.19-1.30x faster (float32 rows of 1 KiB 1.03-1.04x, of 2-4 KiB
#: 1.02-1.08x); planes of 64 KB broadcast along C ran 0.94-0.98x, and longer
#: rows keep streaming.  With a large L3 they stream as other copies do:
#: there ordinary stores wrote broadcasts of 35-136 MB along H and C at
#: 13-17 GB/s, 0.76-1.02x PyTorch's copy_, and streaming stores at 38-43
#: GB/s (rows of 540-2002 bytes, float32 and int16, timed as the harness
#: does: 2.1-2.8x PyTorch); outputs under the streaming size keep ordinary
#: stores either way.
BROADCAST_PLAIN_ROW_BYTES = l3_bound("BROADCAST_PLAIN_ROW_BYTES")


def _slow_aliased_streams(signature: tuple[str, int, int] | None) -> bool:
    """Whether a processor of this (vendor, family, model) is one on which
    streaming stores to a few rows ALIASED_ROW_BYTES apart were measured
    slow: an AMD EPYC 7003 (Zen 3 cores: family 25, models 0-15)."""
    return signature is not None and signature[0] == "AuthenticAMD" and signature[1] == 25 and signature[2] < 16


#: On an AMD EPYC 7003 (NT_ALIASED_ROWS_SLOW), tile plans that write at most
#: ALIASED_ROWS_MAX destination rows a multiple of ALIASED_ROW_BYTES apart
#: (the channel planes of an NHWC to NCHW gather of 256 x 256 pixels) keep
#: ordinary stores (keeps_aliased_rows).  Streamed, the harness's gathers of
#: 64 float32 and 32 float16 channels ran at 8 GB/s there, 0.54-0.60 of the
#: memcpy limit: in one process on the same buffers, the two plans
#: alternating (2 threads, 5 rounds), 24 such NHWC to NCHW and NDHWC to
#: NCDHW gathers of 8-64 MB (3-256 one- to eight-byte channels, planes of
#: 48 KiB to 4 MiB) ran 1.43x faster by geometric mean with ordinary stores
#: (1.00-2.76x; float16 4 x 32 x 128 x 264 8.2 -> 22.5 GB/s), a fresh 9
#: 1.40x (1.15-1.72x); planes 1-3 KiB past such a multiple (255 x 256 or 300 x
#: 320 values) measured 0.75-0.93x, and 512-1024 rows (2-D transposes among
#: them) 0.69-0.92x, so those stream.  Elsewhere (an AMD EPYC with Zen 4
#: cores, an Intel Xeon) the same streamed gathers ran at 1.3-1.55 of the
#: memcpy limit, more than ordinary stores reach, and stream.
NT_ALIASED_ROWS_SLOW = _slow_aliased_streams(cpu_signature())
ALIASED_ROWS_MAX = 256
ALIASED_ROW_BYTES = 2048


def aliased_rows(row_stride: int) -> bool:
    """Whether destination rows ``row_stride`` bytes apart are ones this
    processor streams to slowly (NT_ALIASED_ROWS_SLOW, ALIASED_ROW_BYTES)."""
    return NT_ALIASED_ROWS_SLOW and row_stride % ALIASED_ROW_BYTES == 0


def keeps_aliased_rows(tile: Dim) -> bool:
    """Whether a tile plan of ``tile`` (rows of k, their source and
    destination strides) keeps ordinary stores however large it is
    (aliased_rows, ALIASED_ROWS_MAX)."""
    return tile[0] <= ALIASED_ROWS_MAX and aliased_rows(tile[2])


#: Likewise blocks whose rows would stream one by one in place (MODE
#: block): on the same processor, those whose first K dimension's rows lie a
#: multiple of ALIASED_ROW_BYTES apart, rows of under
#: BLOCK_ALIASED_MAX_ROW_BYTES, do not (block_keeps_aliased_rows); such a
#: block goes whole, through the L2 buffers or in place with ordinary stores,
#: as the rest of the planner would choose for a block that does not stream.
#: In one process on the same buffers, the plans alternating (2 threads, 5-6
#: rounds), streamed blocks of random 4-D to 6-D permutations of 16-70 MB
#: measured 0.65-2.20x without streaming against streaming (42: those whose
#: first K rows lie so 1.16-2.20x, 9, mostly of power-of-two dimensions; the
#: others 0.65-1.75x, rows back to back in the destination or of 6.8 KB
#: among the slowest, so they stream); as this rule, a fresh 14 so planned
#: 1.31x by geometric mean (0.79-1.89x; 8 of power-of-two dimensions, 6 of
#: others).
BLOCK_ALIASED_MAX_ROW_BYTES = 4096


def block_keeps_aliased_rows(kgroup: list[Dim], row_bytes: int) -> bool:
    """Whether a block of rows of ``row_bytes`` at the k group's destination
    offsets does not stream them one by one in place (aliased_rows of the
    first K dimension's, BLOCK_ALIASED_MAX_ROW_BYTES)."""
    return row_bytes < BLOCK_ALIASED_MAX_ROW_BYTES and aliased_rows(kgroup[0][2])


def transpose_stream_min() -> int:
    """Transposes of at least this many bytes use streaming stores."""
    return stream_min_total * TRANSPOSE_STREAM_EIGHTHS // 8


def tile_stream_min(width: int, row_stride: int, aliased: bool = False) -> int:
    """Tile plans of values of width bytes whose source rows lie row_stride
    bytes apart (and whose rows crowd L1's sets where ``aliased``:
    aliased_tile_rows) use streaming stores from this many bytes."""
    if width >= 4:
        return wide_tile_stream_min(row_stride, aliased)
    nbytes = narrow_tile_stream_min(width, row_stride)
    if width <= 2 and aliased:
        nbytes = min(nbytes, stream_min_total * TILE_STREAM_NARROW_ALIASED_SIXTEENTHS // 16)
    return nbytes


def narrow_tile_stream_min(width: int, row_stride: int) -> int:
    """tile_stream_min for values of under four bytes, before the bound of
    rows that alias (TILE_STREAM_NARROW_ALIASED_SIXTEENTHS)."""
    bounds = narrow_in_cache_bounds(width, row_stride)
    if bounds is not None:
        return stream_min_total * bounds[0] // 8
    if width <= 2 and row_stride >= TILE_STREAM_NARROW_MIN_ROW:
        return stream_min_total * TRANSPOSE_STREAM_EIGHTHS_NARROW // 8
    short = SHORT_ROWS.get(width)
    if short is not None and short[0] <= row_stride <= short[1]:
        eighths = TILE_STREAM_EIGHTHS_SHORT_BYTE_ROWS if width == 1 else TILE_STREAM_EIGHTHS_SHORT_ROWS
        return stream_min_total * eighths // 8
    return transpose_stream_min()


def wide_tile_stream_min(row_stride: int = 0, aliased: bool = False) -> int:
    """Tile plans of four- and eight-byte values whose source rows lie
    row_stride bytes apart (rows crowding L1's sets where ``aliased``)
    stream from this many bytes (see TILE_STREAM_WIDE_SIXTEENTHS,
    TILE_STREAM_WIDE_FAR_SIXTEENTHS and TILE_STREAM_WIDE_ALIASED_SIXTEENTHS)."""
    far = row_stride > CLOSE_ROW_BYTES
    sixteenths = TILE_STREAM_WIDE_FAR_SIXTEENTHS if far else TILE_STREAM_WIDE_SIXTEENTHS
    if aliased:
        sixteenths = min(sixteenths, TILE_STREAM_WIDE_ALIASED_SIXTEENTHS)
    return stream_min_total * sixteenths // 16


def aliased_tile_rows(inner: Dim, tile: Dim) -> bool:
    """Whether a tile plan's rows crowd L1's sets (see
    TILE_STREAM_WIDE_ALIASED_SIXTEENTHS): its source rows (``inner``, where
    there are TILE_ALIASED_SOURCE_ROWS or more) or its destination rows
    (``tile``), of which a band of at most 64 puts TILE_ALIASED_SET_ROWS or
    more in one set (rows_per_l1_set: a multiple of 1 KiB apart)."""
    def crowd(rows: Dim, side: int) -> bool:
        return rows[side] != 0 and rows_per_l1_set([rows], side, min(rows[0], 64)) >= TILE_ALIASED_SET_ROWS
    return (inner[0] >= TILE_ALIASED_SOURCE_ROWS and crowd(inner, 1)) or crowd(tile, 2)


#: Fills (one value repeated along each row: a broadcast along W) stream
#: their rows' whole lines with a large L3 (the engine's fill_lines_out), from
#: stream_min_total bytes written, where each row is contiguous and at least
#: FILL_STREAM_MIN_ROW bytes long; with a small L3 they never stream (see
#: copy_streams).  On this Intel Xeon (480 MiB L3), ordinary stores filled
#: 24-491 MB at 16-27 GB/s, 1.00-1.38x PyTorch's copy_ and 0.76 of the
#: memcpy limit at 491 MB (whose memcpy, past glibc's streaming threshold,
#: streams too); streamed, 41-45 GB/s, 2.1-2.9x PyTorch (fill_lines_out).
FILL_STREAMS = l3_bound("FILL_STREAMS")
FILL_STREAM_MIN_ROW = 128


def fill_streams(row: int, dst_stride: int, width: int, dst_bytes: int) -> bool:
    """Whether a fill of rows of ``row`` values (destination stride
    ``dst_stride`` bytes) of ``width`` bytes, ``dst_bytes`` in all, streams
    (FILL_STREAMS)."""
    return (bool(FILL_STREAMS) and dst_stride == width and row * width >= FILL_STREAM_MIN_ROW
            and dst_bytes >= stream_min_total)


def copy_streams(mode: str, dims: list, dst_bytes: int) -> bool:
    """Whether a contiguous copy ("memcpy") streams (a fill: fill_streams): from
    stream_min_total bytes written, or for a copy from COPY_STREAM_EIGHTHS of
    it read and written (dims, its (size, source stride, destination stride)
    triples, the last the contiguous row, tell the distinct source bytes: a
    dimension broadcast from the source reads the same bytes again).  A copy
    that reads its source again never streams rows of up to
    BROADCAST_PLAIN_ROW_BYTES.  A copy whose rows lie apart (any outer
    dimension) streams from COPY_STREAM_ROWS_EIGHTHS instead."""
    # Fills (one value along the innermost dimension: a broadcast along W)
    # never stream here (with a large L3 they may: fill_streams).  Ordinary
    # stores, as numpy's and PyTorch's, wrote them faster on a machine with a
    # small L3, whose streaming stores held at 27.0-27.4
    # GB/s on 2 threads in the benchmark runs (a 64 MiB broadcast along W,
    # spreads of 1-7%: 0.89-0.97x numpy and PyTorch).  In one process,
    # alternating (2 threads), fills of 64-512 MiB with rows of 512 B to 8 KiB
    # ran 1.04-1.81x faster with ordinary stores in 17 samples of 20
    # (0.80-0.98x in 3), and level over 40 rounds alternating with a plain C
    # fill; that C loop wrote 64 MiB at 29.6-30.0 GB/s with ordinary 16-byte
    # stores, 27.1-27.4 streaming.  At other moments streaming stores have
    # written 42-52 GB/s, and ordinary ones with them.
    if mode == "fill":
        return False
    repeats = math.prod(n for n, ss, _ in dims if ss == 0)
    if mode == "memcpy" and repeats > 1 and dims[-1][0] * dims[-1][1] <= BROADCAST_PLAIN_ROW_BYTES:
        return False
    if dst_bytes >= stream_min_total:
        return True
    if mode != "memcpy":
        return False
    eighths = COPY_STREAM_ROWS_EIGHTHS if any(n > 1 for n, _, _ in dims[:-1]) else COPY_STREAM_EIGHTHS
    return dst_bytes + dst_bytes // repeats >= stream_min_total * eighths // 8


def block_l2_min_total(width: int = 1) -> int:
    """Copies of values of ``width`` bytes of at least this many bytes may
    take a block through L2 (the streaming threshold when that is lower, as
    tests set it; BLOCK_L2_WIDE_TIMES for wider values that stream in
    place)."""
    return min(stream_min_total, BLOCK_L2_MIN_TOTAL * (BLOCK_L2_WIDE_TIMES if width >= 2 else 1))


def block_big_min_total() -> int:
    """Copies of at least this many bytes may take a big block (the
    streaming threshold when that is lower, as tests set it)."""
    return min(stream_min_total, BLOCK_BIG_MIN_TOTAL)

Dim = tuple[int, int, int]   # (size, source stride, destination stride)


@dataclass
class BlockGroups:
    """The two groups of a ``block`` plan, fastest dimension first."""

    j: list[tuple[int, int]]          # destination-contiguous: (size, source stride)
    k: list[tuple[int, int]]          # source-contiguous: (size, destination stride)
    j_elems: int
    k_elems: int
    stage_src: bool                   # stage source lines in L1 (rows share an L1 set)
    stage_dst: bool                   # stage destination rows in L1
    lines: int                        # source lines of k per tile row (1 or 4)
    whole: bool = False               # each block into a buffer, streamed out whole (see plan_block)
    next: bool = False                # in place or whole: ask for the next block's lines
    dst_ahead: bool = True            # in place or whole: ask for the destination lines of the tiles ahead
    dst_pieces: bool = False          # rows through the tile's buffer (under 16 bytes, or staged) in short
                                      # destination pieces far apart: ask for those lines too
    far: bool = False                 # long bands of 4- and 8-byte values ask further ahead (BLOCK_FAR_ASKS)
    join: int = 0                     # whole: at most this many blocks a buffer (block_join)


@dataclass
class KernelPlan:
    """One pass of the executor over a layout pair."""

    mode: str                         # memcpy fill strided tile interleave block nibble
    width: int                        # bytes per element; 1 for 4-bit
    outer: list[Dim]                  # outer dimensions, slowest first
    inner: Dim                        # the innermost dimension
    tile: Dim | None = None           # tile / interleave / block: the other transposed dimension
    tile_piece: int = 0               # tile: values of k per task when k is cut in pieces (else 0)
    tile_pieces: int = 1              # ... and the pieces (the last one holds the rest)
    segment_len: int = 0              # inner elements per task
    segments: int = 1                 # tasks per outer index
    tasks: int = 1
    dst_bytes: int = 0
    stream: bool = False
    l2: int = 0                       # block, tile: through L2 (0 no, 1 source rows, 2 both sides)
    l2_lines: int = 1                 # ... read in place: lines of k a chunk takes of each row (l2_lines)
    stage_tasks: bool = False         # tile: a task's one destination run through a buffer (stage_tasks)
    block: BlockGroups | None = None
    src_nibble: bool = False
    dst_nibble: bool = False
    sign_extend: bool = False

    @property
    def outer_count(self) -> int:
        return math.prod(n for n, _, _ in self.outer)


@dataclass
class Runs:
    """A staged block as seen from one 4-bit side: ``run`` contiguous nibbles
    per run; runs at ``outer`` (size, stage stride in bytes, side stride in nibbles)."""

    run: int
    outer: list[Dim]


@dataclass
class CopyPlan:
    """A whole copy: a kernel plan, or a staged 4-bit copy of blocks."""

    kind: str                         # plain, staged, staged_both, slabs
    main: KernelPlan                  # staged: outer = the blocks, inner = one block
    src_extent: int                   # bytes each side needs from its base
    dst_extent: int
    sub: KernelPlan | None = None     # staged: the byte plan run on each block
    src_runs: Runs | None = None      # staged_both: each side's runs in a block
    dst_runs: Runs | None = None
    whole_bytes: bool = False         # staged_both: no two blocks share a destination byte
    # plain: the copy cut in two along one dimension (split_for_block): main
    # copies the first part, rest the others from rest_src / rest_dst bytes
    # on, reaching rest_extent bytes from there on each side.
    rest: KernelPlan | None = None
    rest_src: int = 0
    rest_dst: int = 0
    rest_extent: tuple[int, int] = (0, 0)
    # slabs: each slab (an outer index of main) copied by sub into the
    # thread's buffer, its channels as planes, and by sub2 from there;
    # the bytes each step reaches from its bases, on each side.
    sub2: KernelPlan | None = None
    sub_extent: tuple[int, int] = (0, 0)
    sub2_extent: tuple[int, int] = (0, 0)


def extents(sizes, src_strides, dst_strides, element_bits, src_nibble, dst_nibble):
    """Bytes each side must have from its base, computed exactly."""
    src_last = sum((n - 1) * a for n, a in zip(sizes, src_strides))
    dst_last = sum((n - 1) * b for n, b in zip(sizes, dst_strides))
    if element_bits == 4:
        return ((src_last + 2) // 2 if src_nibble else src_last + 1,
                (dst_last + 2) // 2 if dst_nibble else dst_last + 1)
    width = element_bits // 8
    return (src_last + 1) * width, (dst_last + 1) * width


def merge_dims(dims: list[Dim]) -> list[Dim]:
    """Drop size-1 dims, order by destination then source stride (slowest
    first) and merge neighbours contiguous in both operands."""
    ordered = sorted((d for d in dims if d[0] > 1), key=lambda t: (t[2], t[1]), reverse=True)
    merged: list[Dim] = []
    for n, a, b in ordered:
        if merged:
            pn, pa, pb = merged[-1]
            if pa == a * n and pb == b * n:
                merged[-1] = (pn * n, a, b)
                continue
        merged.append((n, a, b))
    return merged


def source_fast_dim(outer: list[Dim], inner_src_stride: int) -> int:
    """Index of the outer dim with the smallest non-zero source stride below
    the innermost's (a transposition), or -1."""
    best = -1
    for i, (_, a, _) in enumerate(outer):
        if 0 < a < inner_src_stride and (best < 0 or a < outer[best][1]):
            best = i
    return best


def take_group(dims: list[Dim], side: int, unit: int, limit: int, first: Dim | None):
    """Pop a group of dims whose strides on one side run contiguously.

    Starting from ``first`` (or the dim whose stride is ``unit``), take the dim
    whose stride on ``side`` (1 source, 2 destination) equals ``unit`` times
    the elements taken so far, while at most ``limit`` elements; a dim that
    does not fit whole is split by its largest divisor that does (the rest
    stays in ``dims``).  Returns (group, elements).
    """
    group: list[Dim] = []
    total = 1
    while True:
        if first is not None:
            n, a, b = first
            first = None
        else:
            want = unit * total
            for i, t in enumerate(dims):
                if t[side] == want:
                    n, a, b = dims.pop(i)
                    break
            else:
                break
        room = limit // total
        if n > room:
            c = room
            while c > 1 and n % c:
                c -= 1
            if c > 1:
                group.append((c, a, b))
                dims.append((n // c, a * c, b * c))
                total *= c
            else:
                dims.append((n, a, b))
            break
        group.append((n, a, b))
        total *= n
    return group, total


def rows_per_l2_set(group: list[Dim], side: int, rows: int) -> int:
    """How many of the first ``rows`` group elements (at most BLOCK_DEPTH)
    share an offset modulo L2_WAY_BYTES: with the buffer in huge pages, the
    same L2 set."""
    offsets = [0]
    for n, *strides in group:
        offsets = [o + i * strides[side - 1] for i in range(n) for o in offsets][:rows]
        if len(offsets) == rows:
            break
    return max(collections.Counter(o % L2_WAY_BYTES for o in offsets).values())


def rows_per_l1_set(group: list[Dim], side: int, rows: int) -> int:
    """How many of ``rows`` consecutive group elements share an L1 set (4 KiB period)."""
    g = 4096
    for t in group:
        g = math.gcd(g, t[side])
    return rows * g // 4096


def short_destination_pieces(kgroup: list[Dim], row_bytes: int) -> bool:
    """Whether a block's destination rows of ``row_bytes`` make pieces of at
    most BLOCK_DST_PIECE_ASK_BYTES, some k dimension further apart: the rows
    that follow one another (a dimension whose destination stride is the
    piece's length so far) make up a piece (see BLOCK_DST_PIECE_ASK_BYTES)."""
    piece, left = row_bytes, list(kgroup)
    while True:
        on = next((t for t in left if t[2] == piece), None)
        if on is None:
            return bool(left) and piece <= BLOCK_DST_PIECE_ASK_BYTES
        left.remove(on)
        piece *= on[0]


def block_pitch(n: int) -> int:
    """Row pitch of a block buffer for rows of ``n`` bytes (the C side's
    dmls_block_pitch): whole lines, never a multiple of 4 KiB."""
    p = -(-n // 64) * 64
    return p + 64 if p % 4096 == 0 else p


def block_chunks(width: int, jtot: int, ktot: int, tile: bool = False,
                 in_place: bool = False, lines: int = 1) -> tuple[int, int]:
    """Values of j and of k per L2 chunk of a ``jtot x ktot`` block (the C
    side's dmls_block_chunks; a tile's when ``tile``, one whose source rows
    are read where they are when ``in_place`` as well, see
    l2_reads_in_place; a block's read in place, below): the whole block
    when both buffers (and the row table) hold it;
    else runs of about BLOCK_L2_RUN bytes on the longer side and as many
    whole lines as fit on the other; (0, 0) when not even 16 bytes do.
    Source rows of up to BLOCK_L2_RUN bytes are taken whole, except a
    tile's longer than TILE_L2_WHOLE_ROW bytes and shorter than its
    destination rows (see plan.h).  A tile read in place whose j reaches
    BLOCK_L2_RUN bytes takes at most in_place_chunk_k values of k; a block
    read in place (``in_place`` but not ``tile``: one through both
    buffers, the C side's dmls_block_in_place_chunks) takes a tile's chunks
    so read, of at most in_place_chunk_k values of k whatever its j
    (``lines`` lines of each source row, see l2_lines)."""
    if in_place and not tile:
        j, k = block_chunks(width, jtot, ktot, tile=True, in_place=True, lines=lines)
        return j, min(k, in_place_chunk_k(width, lines))
    room, e = BLOCK_L2_ROOM, 64 // width
    if (jtot <= BLOCK_L2_ROWS and jtot * block_pitch(ktot * width) <= room
            and ktot * block_pitch(jtot * width) <= room):
        return jtot, ktot
    j, k = jtot, ktot
    if ktot * width <= BLOCK_L2_RUN and not (tile and ktot * width > TILE_L2_WHOLE_ROW and jtot > ktot):
        j = min(room // block_pitch(ktot * width), (room // ktot // 64 - 1) * e)
        j = min(j - j % e, BLOCK_L2_ROWS, jtot)
    else:
        if jtot * width > BLOCK_L2_RUN:
            j = BLOCK_L2_RUN // width
        k = min((room // j // 64 - 1) * e, room // block_pitch(j * width))
        if in_place and jtot * width >= BLOCK_L2_RUN:
            k = min(k, in_place_chunk_k(width, lines))
        k = min(k - k % e, ktot)
    if j < 16 // width or k < 16 // width:
        return 0, 0
    return j, k


def l2_reads_in_place(row_stride: int) -> bool:
    """Whether a tile through L2 reads its source rows, ``row_stride``
    bytes apart, where they are rather than copying them to the source
    buffer (tile.c's transpose_through_l2): rows more than CLOSE_ROW_BYTES
    apart and not a multiple of 1 KiB apart (rows that crowd L1's sets)."""
    return row_stride > CLOSE_ROW_BYTES and row_stride % 1024 != 0


def in_place_chunk_k(width: int, lines: int = 1) -> int:
    """Values of k per L2 chunk of a tile read in place whose j reaches
    BLOCK_L2_RUN bytes (plan.h's dmls_in_place_chunk_k): one line of
    each source row, or two (``lines``, see l2_lines), and at least 16
    values.  The chunks had taken as many lines as the destination buffer
    held, and their source lines and that buffer then filled most of L2
    (see plan.h for the measurements: a fresh 26 2-D transposes of 20-70 MB
    1.19x faster by geometric mean)."""
    return max(64 * lines // width, 16)


#: Source rows read in place through L2 (l2_reads_in_place, a block through
#: both buffers) that all lie a multiple of this many bytes apart put one
#: line from each row at the same place within every 256 bytes of memory,
#: and a core asking for lines so placed gets them at under half the rate
#: (plan.h, dmls_in_place_chunk_k): their chunks take L2_PHASE_LINES lines of k
#: from each row, an L3 bound (2 where measured, with a large L3; 1 with a
#: small one, unmeasured there).
PHASE_BYTES = 128


def l2_lines(plan: "KernelPlan") -> int:
    """Lines of k a chunk of ``plan`` takes from each source row read in
    place through L2: L2_PHASE_LINES where the rows all lie a multiple of
    PHASE_BYTES apart, else 1 (and 1 for plans not read so)."""
    if plan.l2 == 0 or plan.mode not in ("block", "tile"):
        return 1
    if plan.block is not None:
        if plan.l2 != 2:
            return 1
        strides = [a for n, a in plan.block.j if n > 1]
    elif plan.tile is not None and l2_reads_in_place(plan.inner[1]):
        strides = [plan.inner[1]]
    else:
        return 1
    return L2_PHASE_LINES if all(a % PHASE_BYTES == 0 for a in strides) else 1


def block_l2_mode(jtot: int, ktot: int, width: int, kgroup: list[Dim], dst_bytes: int,
                  min_total: int | None = None) -> int:
    """How a block of a copy larger than the caches goes through L2.

    A block tile reads one line from each of dozens of source rows and
    writes a line or less to each of as many destination rows: memory sees
    short runs from many places at once.  When the source rows (their
    chunks' ``block_chunks`` values, ``width`` bytes each) are at least
    four lines long, copying them to an L2 buffer one after another first
    measured 1.2-1.5x faster (1: source; since the block kernel took its
    tiles band by band, no longer: see BLOCK_L2_SOURCE_ONLY, and
    block_l2_path, the mode a block takes).  When the destination rows are
    long too, or whole lines, transposing into a second buffer and writing
    its rows one after another (with streaming stores from the streaming
    threshold) gains more (2: both).
    Short destination rows (a few lines, most of them partly written) gain
    nothing from either.  Copies under ``min_total`` bytes (by default
    block_l2_min_total()) take neither: 0.
    """
    jc, kc = block_chunks(width, jtot, ktot)
    srun, drun = kc * width, jc * width
    if min_total is None:
        min_total = block_l2_min_total(width)
    if dst_bytes < min_total or srun < BLOCK_L2_SOURCE_RUN or drun < BLOCK_L2_MIN_DEST_RUN:
        return 0
    whole_lines = drun % 64 == 0 and all(b % 64 == 0 for _, _, b in kgroup)
    return 2 if drun >= BLOCK_L2_DEST_RUN or whole_lines else 1


#: Whether a block whose source rows are long enough for the L2 buffers but
#: whose destination rows are not (block_l2_mode 1) goes through the source
#: buffer alone, transposed from there straight to the destination, rather
#: than in place.  Off: in one process on the same buffers, alternating in an
#: order shuffled every round (2 threads, 5-7 rounds), 41 unnamed 5-D and 6-D
#: permutations of 18-63 MB so planned ran 1.17x (24) and 1.13x (17, fresh;
#: 0.92-1.65x, two uint8 ones 1.42x and 1.65x) faster in place by geometric
#: mean, the old plan against itself 0.99-1.05x; planned through both
#: buffers, 20 of 20-63 MB ran 0.97x in place (0.60-1.43x), so those keep
#: them.
BLOCK_L2_SOURCE_ONLY = False


def block_l2_path(jtot: int, ktot: int, width: int, kgroup: list[Dim], dst_bytes: int,
                  min_total: int | None = None) -> int:
    """The L2 mode a block takes (block_l2_mode, but for 1 where
    BLOCK_L2_SOURCE_ONLY is off: 0)."""
    mode = block_l2_mode(jtot, ktot, width, kgroup, dst_bytes, min_total)
    return 0 if mode == 1 and not BLOCK_L2_SOURCE_ONLY else mode


def _run_cost(width: int, jtot: int, ktot: int, l2: int | bool) -> float:
    """Relative cost of a block's memory runs: each side's run in bytes
    (the L2 chunk's, through L2) costs the inverse of its length."""
    j, k = block_chunks(width, jtot, ktot) if l2 else (jtot, ktot)
    return 1 / (k * width) + 1 / (j * width)


def whole_tiles_share(n: int, parts: int) -> int:
    """Values per segment when ``n`` values are cut into about ``parts``
    segments of whole 64-value tiles: n / parts rounded up to a multiple of
    64, at least 64."""
    share = -(-n // parts)
    return max(64, -(-share // 64) * 64)


#: A block's source-contiguous group K may be 4-7 values long (not the usual 8
#: or more) where they make source runs of at least this many bytes (7 float32
#: values, 4 float64 ones, or runs of 8 bytes taken as values): a permutation
#: whose source-fast dimension is that short but whose destination-fast one
#: goes on for hundreds of values was a tile of such short rows, a 2-D
#: transpose per task, or rows element by element.  In one process on the
#: same buffers, alternating with the old bound of 8 values (2 threads, 9
#: rounds), 20 unnamed 5-D and 6-D float64, uint32, float32, float16 and uint8
#: permutations of 1.3-29 MB so planned ran 1.53x faster by geometric mean
#: (0.96-3.46x, 17 of them 1.12x or more, three even; from 0.15-1.07 of the
#: memcpy limit to 0.25-1.28); shorter runs (5-7 int16 or float16 values, 5-6
#: uint8 ones, 6 uint32 ones: 5-24 bytes) ran 0.60-0.85x as such blocks in 8
#: of 11, and keep their tiles.
BLOCK_SHORT_K_BYTES = 28
#: ... and from STRIDED_SHORT_K_BYTES where the copy would otherwise go
#: element by element (no tile, no interleave): four-byte values in a K of
#: 4-6 (runs of 16-24 bytes), a block's micro-blocks against rows of a few
#: values a task.  In one process on the same buffers, alternating with the
#: element-by-element plan (2 threads, 5 rounds, old-against-old controls
#: 0.86-1.26x), two fresh sets of random 4-D to 6-D permutations of 8-70 MB
#: so planned ran 1.67x (6, all faster) and 1.53x (12, 10 faster: 0.76-3.2x)
#: faster by geometric mean.  Shorter runs (4-14 bytes: uint8, int16) ran
#: 1.05x on a fresh set of 10, 0.65-2.3x, and keep their rows.
STRIDED_SHORT_K_BYTES = 16


#: The first block search stops at the first K whose J spans this many bytes
#: of destination rows (two- to eight-byte values); a J that spans a line (64
#: bytes) but less than this goes on to shorter K, whose split replaces it
#: where it is better (the shorter side longer) and still a block of at least
#: BLOCK_LATER_MIN_VALUES values with more than one dimension in K or J (not a
#: plain 2-D transpose, which the tile path takes).  A float64 gather whose K
#: took 20 x 9 x 2 values (K and J both want the dimension of 9) left J 11
#: values, rows of 88 bytes; K of 20 leaves J 99 (1.8x faster).  In one
#: process on the same buffers, alternating in a shuffled order (2 threads, 5
#: rounds), with the old plan against itself as a control (0.99-1.02x): the
#: 23 of 500 unnamed 3-D to 6-D permutations of 8-70 MB of two- to eight-byte
#: values whose plans this changes, 8 of 400 with dimensions like 13, 23, 29,
#: 127 and 301, and a fresh 27 of 400 ran 1.21x, 1.21x and 1.13x faster by
#: geometric mean (0.70-1.70x; 6 of the 27 slower, down to 0.70x).  Stopping
#: at 256 bytes without the bounds on the later split measured 1.12x
#: (0.70-1.77x): splits into two single dimensions (0.72-0.77x) and blocks
#: of under 1000 values (0.70x) were the slower ones.  One-byte values keep
#: the first split that spans a line (BLOCK_J_ENOUGH_ONE_BYTE): 13 of 500 so
#: planned with J up to 128 or 256 bytes measured 0.99x (0.68-1.39x).
BLOCK_J_ENOUGH_BYTES = 256
BLOCK_J_ENOUGH_ONE_BYTE = 64
BLOCK_LATER_MIN_VALUES = 4096


#: The first block search also stops K at each dimension boundary of the
#: source-contiguous chain (K_AT_DIMENSION_BOUNDARIES): a limit of 16, 64 or
#: 256 values can land inside the dimension after the first, so that K takes
#: a piece of a dimension J would have continued with.  A uint8 permutation
#: whose source rows run 19 x 15 values and whose destination rows 9 x 15 was
#: a block of 570 x 9 (rows of 9 bytes) where 19 x 675 was there for the
#: taking.  In one process on the same buffers, alternating in a shuffled
#: order (2 threads, 5 rounds), the 30 of 600 unnamed 5-D and 6-D
#: permutations of 2-64 MB whose plans it changes ran 1.20x faster by
#: geometric mean (0.15 -> 0.72 of the memcpy limit for a 35 MB uint32
#: scatter, 0.42 -> 1.33 and 0.50 -> 1.07 for two more; a few 0.79-0.87x),
#: and a fresh 20 of 700 1.23x (0.86-3.97x, 14 faster; the old plan against
#: itself 0.99x).  Both searches so ran 1.20x; the big-block search keeps
#: its own limits, with which it was measured.
K_AT_DIMENSION_BOUNDARIES = True


def _k_limits(dims: list[Dim], width: int, group: int) -> list[int]:
    """The limits the first block search tries for K, largest first: 16,
    64, 256 and ``group`` values, and (K_AT_DIMENSION_BOUNDARIES) each
    product of the whole dimensions that run contiguously in the source, up
    to ``group``."""
    limits = {group, 256, 64, 16}
    if K_AT_DIMENSION_BOUNDARIES:
        chain, total = list(dims), 1
        while True:
            nxt = next((t for t in chain if t[1] == width * total), None)
            if nxt is None or total * nxt[0] > group:
                break
            chain.remove(nxt)
            total *= nxt[0]
            limits.add(total)
    return sorted(limits, reverse=True)


def _short_side_values(ktot: int, jtot: int) -> int:
    """The values of a block split whose shorter side is under 8 values (the
    tie-break between such splits), else 0."""
    return ktot * jtot if min(ktot, jtot) < 8 else 0


#: A block of at most BLOCK_L2_BYTES in a copy that streams but whose rows
#: could not (k rows off the line offset of the first), whose rows lie back
#: to back in the destination in runs of at least this many bytes, is
#: transposed into a buffer and written out a run at a time with streaming
#: stores (``whole``), where its rows went out with ordinary stores, each
#: line read for ownership first (see block_whole in src/block.c).  Blocks
#: that are one run (all their outer dimensions slower in the destination)
#: gained most; in one process on the same buffers, alternating in a
#: shuffled order (2 threads, 5 rounds), with the old plan against itself as
#: a control (0.98x), those whose runs are shorter than the block, 26 of 300
#: unnamed 5-D and 6-D permutations of 12-64 MB, ran 1.09x faster by
#: geometric mean from runs of 1024 bytes (1.07x from 2048, 1.11x from 256),
#: a fresh 28 of 66 of another 300 1.08x (0.74-1.56x; one-byte scatters
#: 0.74-0.92x).  Bounds on the rows' length (256 or 1024 bytes) measured
#: 1.07x and 1.09x on those 54 where none measured 1.11x.
BLOCK_WHOLE_MIN_BYTES = 1024
#: ... or, for one- and two-byte values, whose rows are each at least
#: BLOCK_WHOLE_ROW_BYTES long, in at least BLOCK_WHOLE_MIN_RUNS runs: a tile
#: of such a block writes a line or two to each of dozens of rows far apart.
#: In one process on the same buffers, alternating in a shuffled order (2
#: threads, 5 rounds), with the old plan against itself as a control
#: (1.00x), 16 unnamed 5-D and 6-D permutations of 12-64 MB whose plans this
#: changes ran 1.23x faster by geometric mean (0.82-1.67x, 13 faster; 0.46
#: -> 0.56 of the memcpy limit), a fresh 12 of 13-50 MB 1.26x (0.92-1.69x,
#: 0.50 -> 0.63; its two uint32 ones 0.92x and 0.96x, before the bound on
#: the width).  Rows back to back of under 100 bytes measured 0.73-0.94x
#: (float16 to float32 gathers whose runs are 4-19 such rows), blocks of
#: 7-33 rows of 500-900 bytes 0.67-0.96x, and four-byte values 0.92-0.96x,
#: so those keep their rows in place; with rows from 128 bytes, the 16 of
#: 15-52 MB that this adds ran 0.87x (0.63-1.41x, control 1.01x), and from
#: 32 runs, 14 of 14-60 MB 0.92x (0.58-1.44x, control 1.00x).
BLOCK_WHOLE_ROW_BYTES = 256
BLOCK_WHOLE_MIN_RUNS = 48
#: Whether blocks are ever streamed whole (takes_whole); off, they keep their
#: rows in place or go through the L2 buffers.
WHOLE_BLOCKS = True
#: ... except blocks of values of at most BLOCK_L2_OVER_WHOLE_WIDTH bytes
#: with at least BLOCK_L2_OVER_WHOLE_MIN_J values of j that would go through
#: both L2 buffers (block_l2_path 2), their rows off line boundaries (rows
#: on them keep BLOCK_WHOLE_LINE_ROW_BYTES' rule): those take the buffers,
#: since those read their source rows where they are (plan.h's
#: dmls_block_in_place_chunks).  In one process on the same buffers,
#: alternating (2 threads, 5 rounds), 14 unnamed 5-D and 6-D permutations
#: of 28-63 MB whose blocks could take both buffers (13 of them streamed
#: whole) ran there 1.13x faster by geometric mean (0.74-2.04x) with whole
#: blocks off: one- and two-byte values 1.02-2.04x (9), four- and
#: eight-byte ones 0.74-0.92x (5); a fresh 18
#: of one- and two-byte values 1.09x (0.74-1.64x), all four of those under
#: 0.9x two-byte blocks of 129-141 values of j, those of 179 or more
#: 1.04-1.64x.  With both bounds, a fresh 24 ran 1.14x (0.81-1.38x, 20
#: faster); rows on line boundaries were then left to their own rule (the
#: tests' line-aligned blocks), which took out that set's three slowest
#: (0.81-0.96x): the 21 this rule changes ran 1.19x (1.00-1.38x).
BLOCK_L2_OVER_WHOLE_WIDTH = 2
BLOCK_L2_OVER_WHOLE_MIN_J = 160
#: Blocks are streamed whole in copies of at least this many eighths of
#: stream_min_total: the transposes' streaming bound (12 MiB), but 16 MiB on
#: a machine with a small L3 (SMALL_L3), where blocks of 12-16 MiB ran
#: faster in place from the L3: on the AMD EPYC, in one process on the same
#: buffers, the two plans alternating (2 threads, 5 rounds), 20 unnamed 4-D
#: to 6-D permutations of 12.7-16.6 MB whose plans this changes ran 1.29x
#: faster by geometric mean (0.74-1.66x; a uint32 scatter 17.3 -> 28.8
#: GB/s), a fresh 16 of 13.1-16.5 MB 1.26x (0.91-1.61x); from 24 MiB
#: instead, 16 of 16.8-23.5 MB measured 1.06x (0.76-1.57x), so 16.  With
#: that L3 shared with other jobs (see L3_BOUNDS), blocks of 8-16 MiB ran
#: faster streamed whole, and they are from 8 MiB (two eighths): in one
#: process on the same buffers, the two plans alternating (2 threads, 7
#: rounds), 30 unnamed 4-D to 6-D permutations of 8-16 MB whose plans this
#: changes ran 1.27x faster by geometric mean (0.89-1.87x, 28 faster; from
#: 12 MiB, 1.09x), a fresh 24 1.15x (0.68-1.53x, 19 faster); from 4 MiB, 24
#: of 3.5-8 MB measured 0.95x (0.61-1.33x).
BLOCK_WHOLE_EIGHTHS = l3_bound("BLOCK_WHOLE_EIGHTHS")
#: Blocks of values of up to BLOCK_WHOLE_SMALL_MAX_WIDTH bytes stream whole
#: only from BLOCK_WHOLE_MIN_BLOCK_BYTES (a block of 4-31 KiB, its runs of
#: 1-16 KiB each streamed out on its own, stays in place).  On this machine
#: (an Intel one of 2 MiB L2 a core; the rules above were measured on a
#: 32 MiB-L3 AMD one), in one process on the same buffers, alternating (2
#: threads, 5 rounds, the old plan against itself as a control): 28 unnamed
#: 3-D to 6-D permutations of 17-67 MB with whole blocks ran 1.06x faster
#: in place, those of under 32 KiB every one (1.07-1.53x, 7); a second 24
#: whose plans a 32 KiB bound changes 1.09x, its slowest the eight-byte ones
#: (0.55x and 0.80x; one- to four-byte ones 0.84-1.72x), hence the width; with
#: both bounds, a fresh 24 of 8-70 MB 1.32x (0.95-1.69x, 21 faster, one even).
BLOCK_WHOLE_MIN_BLOCK_BYTES = 32 << 10
BLOCK_WHOLE_SMALL_MAX_WIDTH = 4
#: But with a large L3, a smaller block of at least BLOCK_WHOLE_ONE_RUN_MIN
#: bytes that is one run of the destination (its rows back to back, every
#: other dimension slower there) streams whole where its rows are at least
#: BLOCK_WHOLE_ONE_RUN_ROW bytes long: in place, each of its few long rows
#: went out with ordinary stores.  On the Intel Xeon with a 480 MiB L3, in
#: one process on the same buffers, the two plans alternating (2 threads, 5
#: rounds, calls back to back as the harness's samples are): float32 gathers
#: of 17 x 435 blocks (1740-byte rows) 1.41-1.72x faster (0.54-0.58 -> 0.76-
#: 0.99 of the memcpy limit), and of 60 fresh unnamed 4-D to 6-D
#: permutations of 13-66 MB whose plans this changes, 57 ran 1.11-2.58x
#: faster (most had read 0.22-0.78 of the limit), three 0.70-0.90x.  Without
#: the bound on the rows, of 40 whose plans that changed, the 4 with rows of
#: 512-1023 bytes measured 0.83-1.18x and the 32 with shorter ones
#: 0.52-1.29x (1.0x by geometric mean): those stay in place.  With a small
#: L3, unmeasured, 0: off.
BLOCK_WHOLE_ONE_RUN_MIN = l3_bound("BLOCK_WHOLE_ONE_RUN_MIN")
BLOCK_WHOLE_ONE_RUN_ROW = 1024
#: And with a large L3, blocks of values of BLOCK_WHOLE_SHORT_ROW_MIN_WIDTH
#: bytes or more whose destination rows are at most
#: BLOCK_WHOLE_SHORT_ROW_BYTES long stay in place in copies of under
#: BLOCK_WHOLE_SHORT_ROW_MAX_TOTAL bytes: streamed whole, each of their many
#: short rows went out on its own, parts of lines.  On the Intel Xeon with a
#: 480 MiB L3, in one process on the same buffers, the two plans alternating
#: (2 threads, 5 rounds): tuned on 19 unnamed 4-D to 6-D permutations of
#: 8-70 MB with rows of at most 128 bytes among 72 whole blocks of every kind
#: (1.4x faster by geometric mean, 18 faster), then 30 of such rows drawn
#: afresh 1.20x (0.76-2.12x), those of 56 MB or more 0.98x (9), hence a
#: size bound (48 MiB first); 30 more drawn afresh
#: 1.22x (0.68-1.94x), its one-byte ones about even (11, 0.68-1.39x), hence
#: the width; with all three bounds, a fresh 30 of 8000 draws 1.33x
#: (0.83-1.99x, 28 faster; 0.72 -> 0.96 of the memcpy limit by geometric
#: mean, the 4 under 0.6 of it 0.71-1.26 after).  Rows of 129-256 bytes then
#: measured 1.09x (24, 0.64-1.44x), those in copies of 44 MB or more
#: 0.64-0.96x, the others 1.01-1.44x; with rows of up to 256 bytes and
#: copies under 40 MiB, a fresh 30 (of 20000 draws) 1.20x (0.85-1.65x, 27
#: faster).  Blocks joined side by side (block_join), of which none of these
#: was, keep streaming whole.  With a small L3, unmeasured, 0: off.
BLOCK_WHOLE_SHORT_ROW_BYTES = l3_bound("BLOCK_WHOLE_SHORT_ROW_BYTES")
BLOCK_WHOLE_SHORT_ROW_MAX_TOTAL = 40 << 20
BLOCK_WHOLE_SHORT_ROW_MIN_WIDTH = 2
#: A block whose rows all start on one line offset (which could stream one
#: by one) but that would go through both L2 buffers streams whole where its
#: rows are at least this many bytes: in one process on the same buffers,
#: alternating in a shuffled order (2 threads, 5 rounds), with the old plan
#: against itself as a control (1.02x), 14 unnamed 5-D and 6-D permutations
#: of 25-61 MB with rows of 1 KiB or more ran 1.19x faster by geometric mean
#: (0.94-1.65x, 0.78 -> 0.92 of the memcpy limit), 6 more 1.13x (control
#: 1.02x); from 512 bytes, the 8 of 20-63 MB that this adds 1.16x
#: (1.02-1.31x, control 0.98x), a fresh 14 of 23-56 MB 1.09x (0.98-1.32x,
#: control 1.00x; 0.83 -> 0.90).  Rows of 256-511 bytes measured 1.03x
#: (0.92-1.17x; control 0.99x), of 128-192 bytes 0.81-0.99x.
BLOCK_WHOLE_LINE_ROW_BYTES = 512
#: Blocks in place or whole (neither through L2 nor streamed row by row),
#: all of J a task, in copies of at least this many bytes: the last tiles of
#: each ask for the lines of the next block's first tiles, source and (rows
#: of up to 256 bytes, in place) destination, as each tile does for the tile
#: two ahead; whole blocks of a bounded size (whole_asks_ahead) ask for all
#: their next block's source lines while their runs go out.  A
#: block of a few tiles (a uint8 block of 54 x 135 values is three) started
#: with all its lines missing.  In one process on the same buffers,
#: alternating in a shuffled order (2 threads, 5 rounds), with the old code
#: against itself as a control: 12 unnamed 5-D and 6-D permutations of
#: 12-61 MB with blocks in place ran 1.13x faster by geometric mean (control
#: 1.02x; the source lines alone 1.08x; a 48.6 MB uint8 gather 0.37 -> 0.51
#: of the memcpy limit), a fresh 28 of 12-64 MB 1.08x (0.91-1.56x, control
#: 0.99x; 0.59 -> 0.64), and as this planner rule a fresh 20 1.07x
#: (0.81-1.51x, control 0.98x; 0.64 -> 0.69).  Below, it is even: 24 of
#: 4-12.6 MB 1.03x (control 1.02x), 24 of 2-12 MB 1.02x (control 1.01x,
#: single cases of 3-9 MB down to 0.83x).  Asking three tiles ahead instead
#: of two measured 1.025x (0.74-1.15x), one tile 0.88x; blocks whose rows
#: stream one by one asking for the next block 1.03x (control 1.00x), so
#: those do not.
BLOCK_NEXT_MIN_TOTAL = 8 << 20
#: Of whole blocks, those of WHOLE_AHEAD_MIN_BYTES to WHOLE_AHEAD_MAX_BYTES
#: ask for the next block (whole_asks_ahead).  On the Intel Xeon with a
#: large L3, two builds alternating (2 threads, 4-8 rounds), unnamed 5-D and
#: 6-D permutations of 8-70 MB with whole blocks of up to 64 KiB ran 1.19x
#: faster by geometric mean asking (20, 0.85-1.78x), 0.90-2.8x in a second
#: set, and with the lower bound 1.04x on a fresh 16 (0.64-1.43x); every
#: block asking measured 1.11x (18), its blocks of 88-177 KB 0.83-0.96x and
#: those of 1.8-2.1 KiB 0.63x, 0.80x and 1.59x.  With a small L3 (SMALL_L3)
#: every whole block asks, up to the L2 buffer's BLOCK_L2_BYTES, as measured
#: on an AMD EPYC 7003 (Zen 3, 32 MiB L3, 512 KiB of L2 a core; the Zen 4
#: EPYC was not measured so): two builds alternating (2 threads, 4-5
#: rounds), unnamed 5-D and 6-D permutations of 8-70 MB with whole blocks
#: of 69-298 KiB ran 1.15x faster by geometric mean (21, 0.92-1.44x; an
#: int16 scatter of 244 KiB blocks 6.8 -> 9.8 GB/s; in one process, the
#: bounds alternating, the 19 of them whose plans change 1.16x) and 1.11x
#: on a fresh 16 (0.90-1.39x; 4 blocks under 64 KiB beside them, unchanged,
#: 0.93-1.01x).
WHOLE_AHEAD_MIN_BYTES = 4 << 10
WHOLE_AHEAD_MAX_BYTES = l3_bound("WHOLE_AHEAD_MAX_BYTES")


def whole_asks_ahead(block_bytes: int) -> bool:
    """Whether a whole block of ``block_bytes`` asks for the next block's
    source lines while its runs go out (WHOLE_AHEAD_MIN_BYTES,
    WHOLE_AHEAD_MAX_BYTES)."""
    return WHOLE_AHEAD_MIN_BYTES <= block_bytes <= WHOLE_AHEAD_MAX_BYTES


#: Blocks in place or whole ask for the destination lines of the tiles ahead
#: (block.c: each tile row's, and a wide band's) only in copies of at least
#: this many bytes; smaller ones, whose destination the caches hold, ask for
#: their source lines alone.  The requests cost more instructions than the
#: misses they hide there: on one thread a 2.1 MB int16 block copy moved
#: 14.6 GB/s with them and 16.4-19.4 without any.  In one process on the
#: same buffers, alternating (2 threads, 6 rounds), unnamed 4-D to 6-D
#: permutations so planned ran, asking for their source lines alone: of 2-12
#: MB 1.07x faster by geometric mean (16, 1.00-1.19x), of 6-12 MB even
#: (1.01x, 20, 0.78-1.14x), of 12-24 MB 0.84x (16, 0.54-1.11x); with this
#: bound a fresh 24 of 1-8 MB 1.05x (0.94-1.20x).  Asking for nothing at
#: all measured the same under 8 MB and 0.77x at 6-12 MB: the source
#: requests pay from L3 (a 9.1 MB float32 gather 0.53x without them).
BLOCK_DST_AHEAD_MIN_TOTAL = 8 << 20
#: Blocks in place whose destination rows go through the tile's buffer (rows
#: of j shorter than a micro-block, under 16 bytes: 8-15 one-byte values; or
#: rows staged against L1 aliasing, stage_dst) ask for the destination lines of the tiles ahead as
#: well, where the destination's pieces are short and apart: the rows that
#: follow one another in the destination (a k dimension whose stride is the
#: pieces' length so far) make pieces of at most this many bytes, and some
#: k dimension lies further apart (dst_pieces).  Copied out of the buffer
#: into scattered pieces of 60 bytes (12 one-byte values, five of them
#: back to back, then 900 bytes on: a (6, 2, 910, 15, 76, 5) uint8 scatter),
#: each piece's line was read for ownership only as its store came, and
#: such a scatter of 59 MB ran at 0.27 of the memcpy limit.  In one process
#: on the same buffers, alternating (2 threads, 7 rounds), 40 unnamed 4-D
#: to 6-D permutations of 8-70 MB so planned ran as follows asking for
#: them: pieces of 65-266 bytes 0.97-2.24x (7, six faster), of 279-1024
#: bytes 0.82-1.28x, longer ones 0.81-1.10x; with the two of 60-byte pieces
#: above, 1.83x and 2.14x.  Then two builds side by side
#: (benchmarks/compare_builds.py, two passes of 7 repeats), the 11 of those
#: that ask 1.46x by geometric mean (0.93-2.01x; the 59 MB scatter above
#: 3.6 -> 6.8 GB/s), a fresh 24 1.37x (0.85-1.93x, 20 faster; the slower
#: ones have pieces that the next task carries on, or tasks of 12-72 rows).
#: (Only copies of at least BLOCK_DST_AHEAD_MIN_TOTAL ask.)
BLOCK_DST_PIECE_ASK_BYTES = 256

#: Blocks of four- and eight-byte values whose bands are long (a KiB or more
#: of each of 64 or more source rows) ask for the lines of the tile 12 ahead
#: rather than 2 (BlockGroups.far; block.c's block_ahead says when) only on
#: a machine with a small L3 (SMALL_L3).  There (an AMD EPYC, Zen 3) such
#: blocks from memory ran 1.04-1.07x faster by geometric mean on fresh sets;
#: on an Intel Xeon with a 480 MiB L3, in one process on the same buffers,
#: the distance switched between samples (2 threads, 7 rounds), 2 ahead ran
#: 1.03x faster than 12 on 40 unnamed such blocks of 19-67 MB (0.86-1.46x)
#: and 1.11x on 25 of power-of-two dimensions (0.83-2.25x).
BLOCK_FAR_ASKS = SMALL_L3


#: Whole blocks are joined along the innermost outer dimension where its
#: destination stride is the block's row (J's values): each block's k rows
#: run on into the next block's, which had been written block by block,
#: rows of J alone.  BLOCK_JOIN_RUN_BYTES of each row at a time (block_join)
#: are transposed into the buffer side by side and streamed out as one run
#: (src/block.c: block_whole, dmls_block_joined), in copies of at least
#: stream_min_total bytes (past the L3, where each destination line read for
#: ownership costs a line from memory), of blocks of at least
#: BLOCK_JOIN_MIN_ROWS rows (more write streams than the hardware follows)
#: of 64 to BLOCK_JOIN_MAX_ROW bytes each, and at least
#: BLOCK_JOIN_MIN_BLOCKS blocks a buffer.  Such blocks had been in place,
#: rows of a few lines each with ordinary stores (or whole, their runs one
#: row long).  Two builds alternating (2 threads, 4 rounds), without those
#: bounds 16 unnamed 5-D and 6-D permutations of 14-67 MB whose plans it
#: changed ran 1.14x faster by geometric mean (0.84-1.60x; a float16 gather
#: of blocks of 36 rows of 120 bytes 1.60x, a uint8 gather of 78 rows of
#: 220 bytes 0.35 -> 0.48 of the memcpy limit), but with rows of up to 1 KiB
#: only 16 others 0.94x (0.54-1.34x): blocks of 10-12 rows, rows of 14-23
#: bytes and copies of 14-21 MB ran 0.54-0.87x.  With the bounds on the
#: size, rows and row length, a fresh 16 of 37-64 MB 1.13x (0.80-1.52x),
#: whose four of two blocks a buffer 0.80-1.06x, hence at least three; with
#: all the bounds, a fresh 16 of 3000 draws 1.26x (0.96-1.62x, 13 faster),
#: and from 16 MiB rather than 32 the 9 of 16-32 MB that adds 1.00x
#: (0.77-1.30x); in one process alternating, rows of 1 KiB or more joined
#: too, a fresh 11 of 37-69 MB that adds 1.00x (0.98-1.08x).
#: About one plan in 150 of the unnamed benchmark's draws (19-21 of 3000, in
#: three sets; one in 75 of its 5-D and 6-D ones).
BLOCK_JOIN = True
BLOCK_JOIN_RUN_BYTES = 4096
BLOCK_JOIN_MIN_ROWS = 33
BLOCK_JOIN_MAX_ROW = 1024
BLOCK_JOIN_MIN_BLOCKS = 3


def block_join(outer: list[Dim], kgroup: list[Dim], jtot: int, ktot: int, width: int, dst_bytes: int) -> int:
    """How many whole ``jtot x ktot`` blocks a buffer takes along the
    innermost of ``outer`` (slowest first), in a copy of ``dst_bytes``
    bytes, where that dimension carries on the block's rows in the
    destination and no k dimension does (whole_run_bytes); 0 where they
    are not joined (see BLOCK_JOIN).  As many as make rows of
    BLOCK_JOIN_RUN_BYTES, within the dimension and the buffer."""
    if not BLOCK_JOIN or not outer or dst_bytes < stream_min_total or ktot < BLOCK_JOIN_MIN_ROWS:
        return 0
    n, _, b = outer[-1]
    row = jtot * width
    if n < 2 or b != row or not 64 <= row < BLOCK_JOIN_MAX_ROW or whole_run_bytes(kgroup, row) != row:
        return 0
    m = min(n, -(-BLOCK_JOIN_RUN_BYTES // row), BLOCK_L2_BYTES // (row * ktot))
    return m if m >= BLOCK_JOIN_MIN_BLOCKS else 0


def takes_whole(kgroup: list[Dim], jtot: int, ktot: int, width: int, dst_bytes: int, join: int = 0) -> bool:
    """Whether a block of ``jtot x ktot`` values (k rows at ``kgroup``'s
    destination offsets), in a copy of ``dst_bytes`` whose rows cannot
    stream one by one (or would only through the L2 buffers, see
    BLOCK_WHOLE_LINE_ROW_BYTES), is transposed whole into the L2 destination buffer
    and streamed out a run at a time (BLOCK_WHOLE_MIN_BYTES,
    BLOCK_WHOLE_ROW_BYTES, BLOCK_WHOLE_MIN_RUNS).  Where the block could
    also go through both L2 buffers (block_l2_path), whole won when those
    copied the source rows to the first buffer (since they read them where
    they are, narrow blocks with a long J take them instead:
    BLOCK_L2_OVER_WHOLE_WIDTH): in one
    process on the same buffers, alternating in a shuffled order (2
    threads, 5 rounds), with the old plan against itself as a control
    (1.00x, 1.01x), 20 unnamed 5-D and 6-D permutations of 21-63 MB whose
    plans this changes ran 1.22x faster by geometric mean (0.87-1.95x, 19
    faster; 0.67 -> 0.82 of the memcpy limit), a fresh 20 of 20-61 MB
    1.29x (0.79-1.92x, 18 faster; 0.70 -> 0.90).  Their rows back to back
    in the destination (a run of several rows) gained most, 1.03-1.95x:
    the L2 path writes them row by row, each row's end lines in part.
    With ``join`` (block_join), ``join`` such blocks side by side, whose
    rows make runs ``join`` times as long.
    """
    blocks = max(join, 1)
    block = jtot * ktot * width * blocks
    if not WHOLE_BLOCKS or dst_bytes < stream_min_total * BLOCK_WHOLE_EIGHTHS // 8 or block > BLOCK_L2_BYTES \
            or (not join and width >= BLOCK_WHOLE_SHORT_ROW_MIN_WIDTH and jtot * width <= BLOCK_WHOLE_SHORT_ROW_BYTES
                and dst_bytes < BLOCK_WHOLE_SHORT_ROW_MAX_TOTAL):
        return False
    run = whole_run_bytes(kgroup, jtot * width) * blocks
    one_run_of_long_rows = (BLOCK_WHOLE_ONE_RUN_MIN and run >= block >= BLOCK_WHOLE_ONE_RUN_MIN
                            and jtot * width >= BLOCK_WHOLE_ONE_RUN_ROW)
    if width <= BLOCK_WHOLE_SMALL_MAX_WIDTH and block < BLOCK_WHOLE_MIN_BLOCK_BYTES and not one_run_of_long_rows:
        return False
    return run >= BLOCK_WHOLE_MIN_BYTES or (
        width <= 2 and jtot * width >= BLOCK_WHOLE_ROW_BYTES and block // run >= BLOCK_WHOLE_MIN_RUNS)


def whole_run_bytes(kgroup: list[Dim], run: int) -> int:
    """The bytes of a run of a block's rows back to back in the destination:
    rows of ``run`` bytes at the k group's offsets, along the dimensions
    whose destination strides run on from them (take_group's group on the
    destination side from a unit of ``run`` bytes, never split)."""
    _, rows = take_group(list(kgroup), 2, run, math.prod(n for n, _, _ in kgroup), None)
    return run * rows


#: A block or tile plan of at least SUBLINE_MIN_TOTAL bytes whose innermost
#: outer dimension moves both sides a line or more per step, but which has
#: another whose stride on one side is under a line, runs that one innermost
#: (subline_innermost): consecutive tasks then share that side's lines while
#: they are in cache.  In destination order, a 24 MB uint8 scatter whose
#: blocks each read 990 source rows of 42 bytes 3486 bytes apart, the next
#: 42 bytes of those rows 7 blocks later (after 0.9 MB of other lines), ran
#: at 2 GB/s on one thread, 0.21 of the memcpy limit on two.  In one process
#: on the same buffers, alternating in a shuffled order (2 threads, 5
#: rounds), with the old plan against itself as a control (0.99x): the 20
#: unnamed 4-D and 5-D permutations of 8-70 MB of 2400 whose plans this
#: changes (10 blocks, 10 tiles; one- and two-byte values) ran 1.53x faster
#: by geometric mean (0.89-2.70x, 17 faster; 1.7-7 GB/s before).  Below
#: 8 MB, in cache, 15 so planned measured 0.95x (0.63-1.26x); interleaving
#: plans so reordered 0.66-0.92x (4), and keep their order.
SUBLINE_INNERMOST = True
SUBLINE_MIN_TOTAL = 8 << 20


def subline_innermost(outer: list[Dim], total: int) -> list[Dim]:
    """``outer`` (slowest first) of a copy of ``total`` bytes with the
    dimension whose smaller non-zero stride is the shortest under 64 bytes
    moved innermost, where the innermost's strides are both 64 bytes or more
    (or zero); else as it is (see SUBLINE_INNERMOST)."""
    if (not SUBLINE_INNERMOST or total < SUBLINE_MIN_TOTAL or len(outer) < 2
            or 0 < min(outer[-1][1], outer[-1][2]) < 64):
        return outer
    short = [i for i, (_, a, b) in enumerate(outer[:-1]) if 0 < min(a, b) < 64]
    if not short:
        return outer
    i = min(short, key=lambda i: min(outer[i][1], outer[i][2]))
    return outer[:i] + outer[i + 1:] + [outer[i]]


#: A block plan in place (not through L2 nor whole) of at least
#: BLOCK_RUN_ON_MIN_TOTAL bytes whose source rows are short (K's run and
#: the J dimensions that carry it on: at most BLOCK_RUN_ON_MAX_BYTES) and
#: carried on by an outer dimension (its source stride is the row's length)
#: runs that one innermost (run_on_innermost): each block then reads the
#: bytes right after the last one's, from lines already in cache or next in
#: the prefetcher's stream, rather than rows far from them.  In destination
#: order, a uint32 scatter (46, 268, 6, 11, 11) whose blocks read 737 source
#: rows of 44 bytes, each row carried on by the block 184 blocks later, ran
#: at 0.61 of the memcpy limit (0.85 in source order).  In one process on
#: the same buffers, alternating in a shuffled order (2 threads, 5 rounds):
#: 36 unnamed 4-D to 6-D permutations of 8-70 MB so planned with rows of
#: up to 640 bytes ran 1.11x faster by geometric mean (0.63-1.69x; 0.47 ->
#: 0.78 of the limit for a float32 scatter of rows of 600 bytes), a fresh
#: 36 1.12x (0.85-1.55x; 0.28 -> 0.42 for a uint8 scatter of 414-byte
#: rows), 24 of rows of 641-1024 bytes 1.06x (0.91-1.36x); 40 of any row
#: length up to 48 KB 1.02x (0.78-1.39x), so longer rows keep their order.
#: Copies of 1-8 MB measured 0.90x (30, 0.61-1.32x) and keep theirs too.
BLOCK_RUN_ON = True
BLOCK_RUN_ON_MAX_BYTES = 1024
BLOCK_RUN_ON_MIN_TOTAL = 8 << 20

#: ... unless the innermost outer dimension (destination order) carries on
#: the block's destination rows (J's values: its destination stride is the
#: row), and those are shorter than the source rows and than
#: BLOCK_KEEP_DEST_ROW_BYTES (keeps_destination_run): then each block
#: writes the bytes right after the last one's, whose lines the last one
#: left in part.  Run on in the source, a uint8 scatter (74, 29, 54, 18, 28)
#: whose blocks write 1008 rows of 74 bytes and read 74 rows of 1008 (the
#: rows' neighbours written 27 blocks later, every line of a row's ends
#: read for ownership twice) ran at 0.34 of the memcpy limit.  In one
#: process on the same buffers, alternating in a shuffled order (2 threads,
#: 7-9 rounds, the old plan against itself as a control: 1.02x and 1.01x),
#: two fresh sets of 24 unnamed 4-D to 6-D permutations of 8-66 MB whose
#: plans keeping destination rows of up to 1 KiB changes ran 1.29x and
#: 1.14x faster by geometric mean (0.92-2.11x and 0.82-1.57x): those with
#: rows under 512 bytes 0.97-2.11x and 0.82-1.57x (the 0.82x a float16
#: scatter of 132-byte rows, 0.89x on 15 rounds), those of 512 bytes or more
#: 1.02x (0.86-1.33x, 13; a dimension of 2 carrying rows of 520-910 bytes
#: 0.94-1.07x), so they run on as before.  With both bounds, a fresh 24 of
#: 10-66 MB 1.21x (0.90-2.19x, 17 faster; control 1.02x): uint8 ones 1.35x,
#: four int16 gathers 0.90-0.93x.  About one draw in 700.
BLOCK_KEEP_DEST_RUN = True
BLOCK_KEEP_DEST_ROW_BYTES = 512


def keeps_destination_run(outer: list[Dim], row: int, source_row: int) -> bool:
    """Whether a block plan's ``outer`` (slowest first) keeps its order
    because the innermost carries on destination rows of ``row`` bytes,
    shorter than BLOCK_KEEP_DEST_ROW_BYTES and than the ``source_row``
    bytes run_on_innermost would carry on (see BLOCK_KEEP_DEST_RUN)."""
    return (BLOCK_KEEP_DEST_RUN and bool(outer) and outer[-1][2] == row
            and row < min(BLOCK_KEEP_DEST_ROW_BYTES, source_row))


def block_source_run(jgroup: list[Dim], ktot: int, width: int) -> int:
    """The bytes of a block's source row: K's run of ``ktot`` values, and
    the J dimensions (fastest first) that carry it on in the source."""
    run = ktot * width
    for n, a, _ in jgroup:
        if a != run:
            break
        run *= n
    return run


def run_on_innermost(outer: list[Dim], run: int, total: int) -> list[Dim]:
    """``outer`` (slowest first) of a block or tile plan of ``total`` bytes
    whose source rows are ``run`` bytes, with the dimension that carries
    those rows on in the source (source_chain's first) innermost, within
    BLOCK_RUN_ON_MAX_BYTES and BLOCK_RUN_ON_MIN_TOTAL; else as it is.  (The
    callers check BLOCK_RUN_ON and TILE_RUN_ON.)"""
    if run > BLOCK_RUN_ON_MAX_BYTES or total < BLOCK_RUN_ON_MIN_TOTAL:
        return outer
    return chain_innermost(outer, source_chain(outer, run)[:1])


#: A tile plan (its source rows whole in each task: not cut in pieces of k)
#: does the same (TILE_RUN_ON), with source rows of at least
#: TILE_RUN_ON_MIN_BYTES, within the block rule's bounds (run_on_innermost).
#: In one process on the same buffers, alternating (2 threads, 5 rounds):
#: 10 unnamed 4-D to 6-D permutations of 8-70 MB so planned, rows of
#: 216-792 bytes, ran 1.08x faster by geometric mean (0.89-1.31x), a fresh
#: 10 of 260-1022 bytes 1.15x (0.99-1.42x); in that fresh set a tile of
#: 6-byte rows (three int16 values) carried on by a dimension of 2 ran 0.45x
#: and one of 96-byte rows of 32-byte units 0.90x, hence the lower bound.
TILE_RUN_ON = True
TILE_RUN_ON_MIN_BYTES = 128


def _block_split(dims: list[Dim], inner: Dim, width: int, group: int, short_k_bytes: int,
                 elems: int) -> tuple[list[Dim], int, list[Dim], int, list[Dim]] | None:
    """A block's groups (kgroup, ktot, jgroup, jtot, the dimensions left) of
    at most ``elems`` values in all, for plan_block; None if K is too short.

    K is taken first, as long as allowed, and J gets what room is left; when
    that leaves J short (dimensions like 11 or 19 do not split), a shorter K
    may leave room for a longer J: keep the split whose shorter side is
    longest (both sides' runs are what the copy streams)."""
    best = None
    line = False
    for klimit in _k_limits(dims, width, group):
        rest = list(dims)
        kgroup, ktot = take_group(rest, 1, width, klimit, None)
        if ktot < 8 and not (ktot >= 4 and ktot * width >= short_k_bytes):
            break
        jgroup, jtot = take_group(rest, 2, width, min(group, elems // ktot), inner)
        # Of two splits whose shorter side is equally short, and shorter than
        # 8, the one with more values (a K of 6 beside a J of 102, not a K of
        # 102 beside a J of 6, which is no block at all).
        if (best is None or (min(ktot, jtot), _short_side_values(ktot, jtot)) >
                (min(best[1], best[3]), _short_side_values(best[1], best[3]))) and (
                not line or (ktot * jtot >= BLOCK_LATER_MIN_VALUES and (len(kgroup) > 1 or len(jgroup) > 1))):
            best = (kgroup, ktot, jgroup, jtot, rest)
        if jtot >= 64 // width:  # J spans a destination line: enough, or a shorter K if better
            if best[3] * width >= (BLOCK_J_ENOUGH_ONE_BYTE if width == 1 else BLOCK_J_ENOUGH_BYTES):
                break
            line = True
    return best


def plan_block(merged: list[Dim], width: int, group: int = BLOCK_GROUP_FIRST,
               short_k_bytes: int | None = None) -> KernelPlan | None:
    """A ``block`` plan if the layout has a source-contiguous group K and a
    destination-contiguous group J of at most ``group`` elements each that are
    both long enough and at least one of them spans several dimensions (or a
    split one); else None.  A K of 4 to 7 values is long enough where its
    runs make ``short_k_bytes`` (BLOCK_SHORT_K_BYTES unless given).

    The block holds at most block_elems values, or twice as many where
    BLOCK_GROW_WIDTHS and BLOCK_GROW_MIN_TOTAL allow and neither of its
    groups is then shorter nor its path through L2 another.  It goes through
    L2 from block_l2_min_total(width) bytes, or from block_l2_min_total()
    for wider values that would not stream in place (BLOCK_L2_WIDE_TIMES)."""
    if short_k_bytes is None:
        short_k_bytes = BLOCK_SHORT_K_BYTES
    plan = _sized_block(merged, width, group, short_k_bytes, block_l2_min_total(width))
    if (plan is not None and width >= 2 and plan.l2 == 0 and not plan.stream and not plan.block.whole
            and plan.dst_bytes >= block_l2_min_total()):
        # (wider values skip the L2 buffers early only where they stream in
        # place, their rows on line boundaries: BLOCK_L2_WIDE_TIMES)
        early = _sized_block(merged, width, group, short_k_bytes, block_l2_min_total())
        if early is not None and early.l2:
            return early
    if plan is not None and plan.l2 and BLOCK_L2_IN_PLACE:
        # (and blocks of any values that would stream in place, past that
        # size too: BLOCK_L2_IN_PLACE)
        flat = _sized_block(merged, width, group, short_k_bytes, block_l2_min_total(width), in_place=True)
        if flat is not None and flat.stream and not flat.block.whole:
            return flat
    return plan


def _sized_block(merged: list[Dim], width: int, group: int, short_k_bytes: int, l2_min: int,
                 in_place: bool = False) -> KernelPlan | None:
    """plan_block's block through L2 from ``l2_min`` bytes (never where
    ``in_place``), of block_elems values or twice as many
    (BLOCK_GROW_WIDTHS)."""
    plan = _plan_block(merged, width, group, short_k_bytes, block_elems(width), l2_min, in_place)
    if plan is None or width not in BLOCK_GROW_WIDTHS or plan.dst_bytes < BLOCK_GROW_MIN_TOTAL:
        return plan
    grown = _plan_block(merged, width, group, short_k_bytes, 2 * block_elems(width), l2_min, in_place)
    if (grown is not None
            and grown.block.j_elems >= plan.block.j_elems and grown.block.k_elems >= plan.block.k_elems
            and grown.block.j_elems * grown.block.k_elems > plan.block.j_elems * plan.block.k_elems
            and (grown.l2, grown.stream) == (plan.l2, plan.stream)):
        return grown
    return plan


def _plan_block(merged: list[Dim], width: int, group: int, short_k_bytes: int,
                elems: int, l2_min: int, in_place: bool = False) -> KernelPlan | None:
    """plan_block for blocks of at most ``elems`` values, through L2 from
    ``l2_min`` bytes (the choice of block counting so), or never where
    ``in_place``."""
    dims = list(merged)
    inner = dims.pop()
    # J starts at the destination's unit-stride dimension (the innermost).
    if inner[2] != width or any(b == 0 for _, _, b in merged):
        return None
    best = _block_split(dims, inner, width, group, short_k_bytes, elems)
    if best is None:
        return None
    total = math.prod(n for n, _, _ in merged) * width
    if total >= block_big_min_total():
        # A block need not fit L1 or L2 whole (the kernel tiles it, and
        # through L2 it is copied in chunks of k): with both groups as long
        # as the tables allow, both sides' runs can be long where dimensions
        # that do not split (11, 17, 19) would leave one of them short.  A
        # big block must have, in L2 chunks, the runs the L2 path wants for
        # both sides (transposed in place, below block_l2_min_total,
        # destination runs from BLOCK_L2_MIN_DEST_RUN will do: unnamed
        # permutations of 2.8-12.4 MB that this gives a longer block, most of
        # them a tile of short source rows before, went from 0.22 to 0.28 and
        # 0.27 to 0.34 of the memcpy limit, sets of 14 and 11, geometric
        # means, 2 threads; one uint8 gather, (37, 19, 32, 131) in order
        # (1, 3, 0, 2), from 0.46-0.58 to 0.36-0.41); its cost counts them
        # whole below block_l2_min_total and in chunks from it.
        staged = total >= l2_min
        need = 2 if staged else 1
        limit = BLOCK_L2_BIG_GAIN * _run_cost(width, best[3], best[1],
                                              block_l2_path(best[3], best[1], width, best[0], total, l2_min))
        big = None
        for klimit in (group, 256, 64, 16):
            rest = list(dims)
            kgroup, ktot = take_group(rest, 1, width, klimit, None)
            jgroup, jtot = take_group(rest, 2, width, group, inner)
            if ktot < 8 or jtot < 8 or block_l2_mode(jtot, ktot, width, kgroup, total, min_total=0) < need:
                continue
            cost = _run_cost(width, jtot, ktot, staged)
            if cost < limit and (big is None or cost < big[0]):
                big = (cost, (kgroup, ktot, jgroup, jtot, rest))
        if big is not None:
            best = big[1]
    kgroup, ktot, jgroup, jtot, dims = best
    # Two single dimensions are a plain 2-D transpose: the tile path does those.
    if jtot < 8 or (len(kgroup) == 1 and len(jgroup) == 1):
        return None
    dims.sort(key=lambda t: (t[2], t[1]), reverse=True)
    dims = subline_innermost(dims, total)
    outer_count = math.prod(n for n, _, _ in dims)
    dst_bytes = outer_count * jtot * ktot * width
    # When consecutive k rows are adjacent in the destination (the first K
    # dimension's stride is the whole J run) and short (a band of 4-line-tall
    # tiles covers 256 * jtot <= 16 KiB, in L1 while its j tiles fill it),
    # tiles of 4 source lines by 16 j read each source row in longer bursts,
    # in copies under BLOCK_TALL_TILE_MAX_TOTAL bytes.  Otherwise every k row
    # is its own write stream: keep tiles one line tall.
    lines = 4 if (kgroup[0][2] == jtot * width and jtot <= 64 and dst_bytes < BLOCK_TALL_TILE_MAX_TOTAL
                  and width >= BLOCK_TALL_TILE_MIN_WIDTH and jtot * width <= BLOCK_TALL_TILE_MAX_J_BYTES) else 1
    # Rows a multiple of 4 KiB apart share an L1 set: stage a side when a
    # tile's rows would put more than 8 lines in one set.  Wider elements
    # write 4 or 2 destination rows per micro-block, which the store path
    # absorbs (staging them measured slower).  (stage_src below, once the
    # tiles' height is settled.)
    stage_dst = width <= 2 and rows_per_l1_set(kgroup, 2, 64 * lines // width) > 8
    # Streaming stores write whole destination lines, four per k row and
    # tile (one-line-tall tiles of 64 columns): every k row must start on the
    # same line offset.  Four-line-tall tiles write one line per row and
    # tile; streamed that way they measured slower, so they keep plain stores.
    stream = (dst_bytes >= transpose_stream_min() and lines == 1 and not stage_dst
              and jtot >= 64 // width and all(b % 64 == 0 for _, _, b in kgroup)
              and not block_keeps_aliased_rows(kgroup, jtot * width))
    # Too few blocks for threads to share (a 4-D permutation is often a single
    # block): J is cut into segments of whole tiles, one task each
    # (MIN_BLOCK_TASKS; not through L2, whose chunks are planned for the whole
    # of J, nor whole blocks).
    share = jtot
    if outer_count < MIN_BLOCK_TASKS:
        share = min(jtot, whole_tiles_share(jtot, -(-MIN_BLOCK_TASKS // outer_count)))
    # A whole block (see takes_whole) takes the place of the L2 buffers too,
    # and of streaming rows one by one where those would go through them.
    # Whole blocks joined along the innermost outer dimension (block_join)
    # where that takes them.
    l2 = 0 if in_place else block_l2_path(jtot, ktot, width, kgroup, dst_bytes, l2_min)
    may_whole = (share == jtot and (not stream or (l2 > 0 and jtot * width >= BLOCK_WHOLE_LINE_ROW_BYTES))
                 and not (l2 == 2 and not stream and width <= BLOCK_L2_OVER_WHOLE_WIDTH
                          and jtot >= BLOCK_L2_OVER_WHOLE_MIN_J))
    join = block_join(dims, kgroup, jtot, ktot, width, dst_bytes) if may_whole else 0
    if join and not takes_whole(kgroup, jtot, ktot, width, dst_bytes, join):
        join = 0
    whole = may_whole and (join > 0 or takes_whole(kgroup, jtot, ktot, width, dst_bytes))
    if whole:
        l2, stream = 0, False
    if l2:
        # Written from the L2 buffer, streamed only in BOTH (row by row).
        stream = l2 == 2 and dst_bytes >= transpose_stream_min()
    if BLOCK_RUN_ON and not l2 and not whole:
        source_row = block_source_run(jgroup, ktot, width)
        if not keeps_destination_run(dims, jtot * width, source_row):
            dims = run_on_innermost(dims, source_row, dst_bytes)
    seg = jtot if l2 else share
    segments = -(-jtot // seg)
    nxt = (not l2 and not stream and segments == 1 and dst_bytes >= BLOCK_NEXT_MIN_TOTAL
           and (not whole or whole_asks_ahead(jtot * ktot * width)))
    if stream and not l2 and width >= 4 and rows_per_l2_set(jgroup, 1, BLOCK_DEPTH) > BLOCK_TALL_ALIASED_ROWS:
        # Streamed in place (so one line tall so far) with source rows in few
        # L2 sets: tiles four lines tall, a quarter as many rows at once
        # (BLOCK_TALL_ALIASED_ROWS).
        lines = 4
    stage_src = rows_per_l1_set(jgroup, 1, BLOCK_DEPTH // lines) > 8
    return KernelPlan(
        mode="block", width=width, outer=dims, inner=(jtot, jgroup[0][1], width),
        tile=(ktot, width, kgroup[0][2]), segment_len=seg, segments=segments, tasks=outer_count * segments,
        dst_bytes=dst_bytes, stream=stream,
        block=BlockGroups(j=[(n, a) for n, a, _ in jgroup], k=[(n, b) for n, _, b in kgroup],
                          j_elems=jtot, k_elems=ktot, stage_src=stage_src, stage_dst=stage_dst,
                          lines=lines, whole=whole, next=nxt,
                          dst_ahead=dst_bytes >= BLOCK_DST_AHEAD_MIN_TOTAL, far=BLOCK_FAR_ASKS and width >= 4,
                          dst_pieces=(dst_bytes >= BLOCK_DST_AHEAD_MIN_TOTAL
                                      and (jtot * width < 16 or stage_dst)
                                      and short_destination_pieces(kgroup, jtot * width)),
                          join=join), l2=l2)


#: A transpose planned as a tile whose shorter side is under
#: SPLIT_TILE_SIDE_BYTES, of at least SPLIT_MIN_BYTES, where a dimension stops
#: a block's K or J group short for want of a divisor that fits (a prime
#: such as 83 or 127 beside a group of 28 or 25 values, which leaves room
#: for 36 or 40 more), is cut in two along that dimension: its first
#: multiple of what fits, which the block kernel takes, and the rest, copied
#: after it (split_for_block).  Tasks of a 50 x 28 uint8 tile, each writing
#: 50 rows of 28 bytes far apart, ran at 2-4 GB/s on two threads.  In one
#: process on the same buffers, alternating in a shuffled order with the
#: whole copy (2 threads, 7 rounds, the whole copy against itself as a
#: control: 0.91-1.16x), two fresh sets of 9 unnamed 4-D and 5-D
#: permutations of 8-70 MB whose plans this changes ran 2.09x and 2.23x
#: faster by geometric mean (1.57-3.75x, all 18 faster; uint8, int16,
#: float16, uint32, float64).  Tuned on 22 others, cut as two separate
#: copies: tiles whose shorter side was 212-568 bytes ran 0.74-0.92x in 4 of
#: 6, and copies already planned as blocks 0.43-1.92x, so neither is cut;
#: nor copies under 8 MiB (2.4-3.8 MB, in cache: 0.59-0.94x).
#:
#: A copy planned element by element (``strided``: no block, and a
#: destination-fast dimension of under 8 values, too short for a tile) is
#: cut the same way at any size, where that gives a block: a dimension such
#: as 19443 (3 x 6481) or 1091 (prime) that no divisor splits kept the
#: block's group at 3 or 1.  Measured the same way (old-against-old
#: control 0.99-1.06x), 7 of 92 such 4-D to 6-D permutations of 8-70 MB
#: drawn at random ran 4.77x faster by geometric mean (3.00-7.37x), 4 of
#: 2-8 MB 6.08x (3.84-12.7x), 8 of 0.1-0.8 MB 3.07x (1.67-9.99x).
SPLIT_FOR_BLOCKS = True
#: ... and where the cut at the first dimension that stops a group (K's)
#: leaves no block, such a copy tries the next (J's; group_stops): in a full
#: reversal both groups stop at a prime (uint8 3 x 2473 x 97 x 82 turned
#: over: K at 82 beside 97, J at 3 beside 2473), and K's cut, which makes K
#: longer, left J's room too short for any of 2473.  In one process on the
#: same buffers, alternating (2 threads, 4 rounds), 10 random 4-D to 6-D
#: permutations of 23-62 MB so planned (reversals, most of them) ran 5.4x
#: faster by geometric mean (3.0-8.7x, all faster; 0.9-2.2 -> 5.6-11.3
#: GB/s), a fresh 4 5.9x (4.6-7.1x).  About one random permutation in 50
#: (one in 600 of the unnamed benchmark's NCHW, matrix and 5-D/6-D draws).
SPLIT_OTHER_STOPS = True
SPLIT_TILE_SIDE_BYTES = 192
SPLIT_MIN_BYTES = 8 << 20
#: ... where the group has room for at least SPLIT_MIN_ROOM more values of
#: the dimension and its largest divisor that fits is at most half of that.
SPLIT_MIN_ROOM = 8
#: A copy planned as a block whose K (its source runs) is under
#: SPLIT_SHORT_BLOCK_BYTES, from SPLIT_MIN_BYTES, is cut the same way where
#: the first part's block then has a longer K and a J as long: a uint8
#: block of 75 x 21 values (source runs of 21 bytes, a prime 163 next) ran
#: at 0.25 of the memcpy limit.  In one process on the same buffers,
#: alternating (2 threads, 3 rounds, the old plan against itself as a
#: control: 0.98x), a fresh 12 unnamed 4-D to 6-D permutations of 11-66 MB
#: whose plans this changes ran 1.65x faster by geometric mean (0.99-3.03x);
#: tuned on 15 where any block with a side under a line was cut (1.34x,
#: 0.66-2.68x): a J that got shorter (1741 to 358, 400 to 200) measured
#: 0.70x and 0.92x, short Js 0.66-1.43x, so those keep their plans.
SPLIT_SHORT_BLOCK_BYTES = 64
#: ... and so is one whose runs are short on both sides: J (destination
#: runs) under SPLIT_SHORT_J_BYTES and K under SPLIT_SHORT_JK_BYTES, where a
#: dimension with no divisor that fits stops K (a uint8 block of 220 x 78
#: values beside 274 = 2 x 137, at 0.37 of the memcpy limit; cut at 260, a K
#: of 1014, 1.42x faster).  Each of its tasks wrote K destination rows of a
#: few lines in place and read as many short source runs.  In one process on
#: the same buffers, alternating (2 threads, 5 rounds): 30 unnamed 5-D and
#: 6-D permutations of 8-70 MB cut wherever K was under 4 KiB ran 1.07x by
#: geometric mean (0.65-1.57x), those of J under 256 bytes 1.23x (14,
#: 0.96-1.57x), the others 0.94x; a fresh 25 cut where J was under 256 bytes
#: 1.15x (0.75-1.98x), those of K under 512 bytes 1.30x (15, 0.91-1.98x),
#: the others 0.95x (a K of 854 bytes 0.75x).  With both bounds, a fresh 21
#: ran 1.25x (0.82-2.04x, 15 faster).  About one in 230 of the unnamed
#: benchmark's draws is so cut.
SPLIT_SHORT_J_BYTES = 256
SPLIT_SHORT_JK_BYTES = 512
#: Where no other dimension stops a group, the destination's fastest one
#: (J's first) is cut the same way when it does not fit J's room and its
#: largest divisor that does is at most half of it (24441 = 3 x 8147 beside
#: a K of 88 float64 values, room for 744: a J of 3, so no block, and a
#: tile of 4-value source rows at 0.31 of the memcpy limit).  In one process
#: on the same buffers, alternating (2 threads, 3 rounds, the old plan
#: against itself as a control: 0.99x, 1.02x), 16 unnamed 3-D to 6-D
#: permutations of 14-66 MB whose plans this changes (mostly reversals)
#: ran 2.72x faster by geometric mean (0.83-15.2x; a uint8 reversal of
#: 11 x 96 x 55994 from 0.55 GB/s), a fresh 12 1.50x (0.83-5.22x).
SPLIT_INNER_J = True
#: Where no dimension above stops a group, one that K took only a small
#: divisor of is cut the same way (SPLIT_PIECES): a 2 x 37078 x 226
#: float16 array turned over (37078 = 2 x 18539) gave K the first dimension
#: and 2 of 37078, 4 values, too few for a block, and was a tile of 2-value
#: rows at 0.18 of the memcpy limit; cut at 36864 = 72 x 512, its first part
#: is a block of K = 2 x 512.  In one process on the same buffers,
#: alternating (2 threads, 5 rounds, the old plan against itself as a
#: control: 0.84-1.24x), 25 unnamed 3-D to 6-D permutations of 8-70 MB whose
#: plans this changes ran 1.65x faster by geometric mean (0.84-4.19x), tuned
#: on, and a fresh 23 1.81x (0.87-18.9x, 19 faster, 2 even; a uint8 scatter of
#: 10 x 88 x 3 x 12235 from 0.45 to 8.5 GB/s).  Tried before the rules
#: above, it cut dimensions whose first part was no block, where those
#: rules' cut gave one (0.07x and 0.31x).
SPLIT_PIECES = True
#: A copy planned as a tile, of at least block_big_min_total() bytes, looks
#: for J's stop with J's room as a big block has it (BLOCK_GROUP_FIRST
#: values, whatever K took; SPLIT_TILE_BIG_J), not the block_elems bound on
#: the block's values: beside a K of 768 one-byte values, a J group of 47
#: (a prime) had room for 7 of the next dimension, 163 (prime again), under
#: SPLIT_MIN_ROOM, so the 35 MB uint8 reversal of 47 x 163 x 4608 stayed a
#: tile of destination rows of 47 bytes at 0.21 of the memcpy limit; cut at
#: 147 = 7 x 21, 0.54.  In one process on the same buffers, alternating (2
#: threads, 5 rounds): the 20 of 14000 unnamed 3-D to 6-D permutations of
#: 8-70 MB planned as tiles whose plans this changes ran 1.51x faster by
#: geometric mean (1.10-4.87x, every one faster; an int16 gather of 91 x 32 x
#: 811 x 12 from 0.14 to 0.68 of the limit), a fresh 14 2.02x (0.95-3.85x,
#: 13 faster).  Copies already cut for a block measured 0.92x with the room
#: so widened (22, 0.56-1.10x) and keep theirs: the wider room is tried only
#: where the usual one gives no block.
SPLIT_TILE_BIG_J = True
#: A copy planned as a block of at least SPLIT_MIN_BYTES that no cut above
#: changes, whose J group is at most SPLIT_BLOCK_BIG_J_BYTES bytes, is cut the
#: same way where that gives its first part a block with a longer J: at J's
#: stops with a big block's room, then at the dimension of which J took only
#: a small divisor (group_stops' j_pieces).  Blocks of destination rows of a
#: few dozen bytes wrote each row's part of a line from many places, a line
#: at a time: a uint8 scatter of 2 x 4 x 293 x 130 x 4 x 16 in order
#: (5, 3, 4, 2, 1, 0) had J = 8 beside 293 and 130, and read 0.17 of the
#: memcpy limit; cut at 1024 values of J, through L2, 0.63.  In one process
#: on the same buffers, alternating (2 threads, 5 rounds), 24 unnamed 3-D to
#: 6-D permutations of 8-70 MB whose plans this changes (of 80000 draws, about
#: one in 400) ran 1.28x faster by geometric mean (0.78-2.23x, 21 faster),
#: tuned on, a fresh 30 1.33x (0.78-3.73x, 24 faster; every one that read
#: under 0.6 of the limit faster, those under 0.2 3.2-3.7x).  0 turns it off.
SPLIT_BLOCK_BIG_J_BYTES = 64
#: A block of fewer than SPLIT_TINY_BLOCK_BYTES (J x K values of a few
#: hundred bytes: its J stopped at a prime, or at a dimension its K took,
#: beside a short K) is cut, from SPLIT_TINY_MIN_BYTES, at a dimension that
#: stops its own J or K group (tiny_block_stops), where the first part's
#: block holds SPLIT_TINY_GROW times as many values or more with neither
#: group shorter; of such cuts the one with the largest block.  Each task of
#: such a block moved a few hundred bytes: a uint8 scatter of blocks of 12 x
#: 19 values beside a prime 587 ran at 0.84 GB/s, 0.05 of the memcpy limit.
#: In one process on the same buffers, alternating (2 threads, 5 rounds),
#: 8 unnamed 4-D to 6-D permutations of 13-56 MB so cut, tuned on, ran
#: 1.14-5.28x faster, a fresh 18 of 12-67 MB 1.93x by geometric mean
#: (1.06-7.44x, all faster; five from 0.05-0.15 of the limit to
#: 0.27-0.63), and 46 of 1-8 MB 1.50x (0.74x and 0.87x the two of under 2
#: MB, the others 1.10-5.95x).  Blocks of 1-4 KiB so cut ran 1.00x (40,
#: 0.85-1.18x) and are not.  About one unnamed draw of 8-70 MB in 3000 (of
#: the issue-like and the perm families) is so cut.
SPLIT_TINY_BLOCK_BYTES = 1024
SPLIT_TINY_MIN_BYTES = 2 << 20
SPLIT_TINY_GROW = 4


def group_stops(merged: list[Dim], width: int, big_j: bool = False,
                j_pieces: bool = False) -> Iterator[tuple[int, int]]:
    """The dimensions (each with its index in ``merged``) that stop a
    block's K group, then its J group, short: the next one a group would
    take, which does not fit the room left and whose largest divisor that
    does is at most half of it; with the length of its first part, the most
    whole multiples of that room (see SPLIT_FOR_BLOCKS); then J's own first
    dimension (SPLIT_INNER_J), then a dimension K took only a small divisor
    of (SPLIT_PIECES), then with ``j_pieces`` one J did
    (SPLIT_BLOCK_BIG_J_BYTES).  J's room is BLOCK_GROUP_FIRST values where
    ``big_j`` (a big block's, SPLIT_TILE_BIG_J), else what block_elems
    leaves it."""
    dims = list(merged)
    inner = dims.pop()
    if inner[2] != width or inner[1] == width:
        return
    rest = list(dims)
    kgroup, ktot = take_group(rest, 1, width, BLOCK_GROUP_FIRST, None)
    sides = [(1, ktot, BLOCK_GROUP_FIRST)]
    jgroup: list[Dim] = []
    if ktot >= 4:
        limit = BLOCK_GROUP_FIRST if big_j else min(BLOCK_GROUP_FIRST, block_elems(width) // ktot)
        jgroup, jtot = take_group(rest, 2, width, limit, inner)
        sides.append((2, jtot, limit))
    for side, tot, limit in sides:
        room = limit // tot
        for t in rest:
            n = t[0]
            # (Not what take_group left of a dimension it split: only whole
            # dimensions are cut.)
            if t[side] != width * tot or room < SPLIT_MIN_ROOM or n <= room or t not in merged:
                continue
            fit = room
            while n % fit:
                fit -= 1
            if 2 * fit <= room:
                yield merged.index(t), n - n % room
                break
    if SPLIT_INNER_J and ktot >= 8 and len(sides) == 2:
        # J's own first dimension (the destination's fastest) does not fit
        # and has no divisor that does: cut it
        _, jtot, limit = sides[1]
        n = inner[0]
        if n > limit >= SPLIT_MIN_ROOM and 2 * jtot <= limit:
            yield len(merged) - 1, n - n % limit
    if SPLIT_PIECES and kgroup and kgroup[-1] not in merged:
        yield from piece_stop(merged, kgroup[-1], ktot)
    if j_pieces and jgroup and jgroup[-1] not in merged:
        yield from piece_stop(merged, jgroup[-1], sides[1][1])


def piece_stop(merged: list[Dim], piece: Dim, tot: int) -> Iterator[tuple[int, int]]:
    """A group of ``tot`` values took only a small divisor of a dimension
    (its last entry, ``piece``, a piece of one of ``merged``): that one, cut
    at the most multiples of the group's room for it in BLOCK_GROUP_FIRST
    values, where that room is at least SPLIT_MIN_ROOM and twice the piece."""
    c, a, b = piece
    whole = next((t for t in merged if t[1:] == (a, b) and t[0] > c and t[0] % c == 0), None)
    room = BLOCK_GROUP_FIRST // (tot // c)
    if whole is not None and room >= SPLIT_MIN_ROOM and 2 * c <= room:
        yield merged.index(whole), whole[0] - whole[0] % room


def tiny_block_stops(main: KernelPlan, merged: list[Dim], width: int) -> Iterator[tuple[int, int]]:
    """Cuts (index in ``merged``, first part's length) for a block plan
    ``main`` of ``merged``: at each whole dimension the plan's J or K group
    would take next but has no room for, and at the dimension of which the
    group's last entry is a small divisor, the most whole multiples of the
    room (see SPLIT_TINY_BLOCK_BYTES)."""
    b = main.block
    assert b is not None
    j_limit = min(BLOCK_GROUP_FIRST, block_elems(width) // b.k_elems)
    # (J's entries carry their source strides, K's their destination ones)
    for side, other, tot, limit, group in ((2, 1, b.j_elems, j_limit, b.j), (1, 2, b.k_elems, BLOCK_GROUP_FIRST, b.k)):
        room = limit // tot
        for i, t in enumerate(merged):
            if t[side] == width * tot and t[0] > room >= SPLIT_MIN_ROOM and t[0] % room:
                yield i, t[0] - t[0] % room
        c, stride = group[-1]
        piece_room = limit // (tot // c)
        for i, t in enumerate(merged):
            if (t[0] > c and t[0] % c == 0 and t[other] == stride and piece_room >= SPLIT_MIN_ROOM
                    and 2 * c <= piece_room and t[0] % piece_room):
                yield i, t[0] - t[0] % piece_room


def tiny_block(main: KernelPlan, width: int) -> bool:
    """Whether ``main`` is a block plan that split_tiny_block may cut."""
    b = main.block
    return (main.mode == "block" and b is not None and main.width == width
            and main.dst_bytes >= SPLIT_TINY_MIN_BYTES
            and b.j_elems * b.k_elems * width < SPLIT_TINY_BLOCK_BYTES)


def cut_at(merged: list[Dim], i: int, head: int) -> tuple[list[Dim], list[Dim], int, int]:
    """``merged`` cut in two along its dimension ``i``, the first part its
    first ``head`` values: the first part's dimensions, the rest's, and the
    rest's source and destination offsets in bytes."""
    n, a, b = merged[i]
    return (merged[:i] + [(head, a, b)] + merged[i + 1:], merged[:i] + [(n - head, a, b)] + merged[i + 1:],
            head * a, head * b)


def split_tiny_block(main: KernelPlan, dims: list[Dim],
                     width: int) -> tuple[KernelPlan, KernelPlan, int, int, list[Dim]] | None:
    """split_for_block's cut of a tiny block (SPLIT_TINY_BLOCK_BYTES) of
    ``dims``, or None."""
    b = main.block
    assert b is not None
    merged = merge_dims(list(dims))
    best = None
    for i, head in tiny_block_stops(main, merged, width):
        first, rest, rest_src, rest_dst = cut_at(merged, i, head)
        plan = plan_dims(first, width)
        q = plan.block
        if (q is None or q.k_elems < b.k_elems or q.j_elems < b.j_elems
                or q.j_elems * q.k_elems < SPLIT_TINY_GROW * b.j_elems * b.k_elems):
            continue
        if best is None or q.j_elems * q.k_elems > best[0]:
            best = (q.j_elems * q.k_elems, (plan, plan_dims(rest, width), rest_src, rest_dst, rest))
    return None if best is None else best[1]


def split_for_block(main: KernelPlan, dims: list[Dim],
                    width: int) -> tuple[KernelPlan, KernelPlan, int, int, list[Dim]] | None:
    """A copy of ``dims`` (size, source and destination strides in bytes)
    planned as ``main``, cut in two where that gives a block (see
    SPLIT_FOR_BLOCKS), or a block with a longer J (SPLIT_BLOCK_BIG_J_BYTES):
    (first part's plan, rest's plan, rest's source and destination offsets
    in bytes, rest's dims); else None."""
    if not SPLIT_FOR_BLOCKS or main.width != width:
        return None
    cut = _split_usual(main, dims, width)
    if cut is None and main.mode == "block" and main.dst_bytes >= SPLIT_MIN_BYTES \
            and main.block.j_elems * width <= SPLIT_BLOCK_BIG_J_BYTES:
        merged = merge_dims(list(dims))
        for i, head in group_stops(merged, width, big_j=True, j_pieces=True):
            first, rest, rest_src, rest_dst = cut_at(merged, i, head)
            plan = plan_dims(first, width)
            if plan.mode == "block" and plan.block.j_elems > main.block.j_elems:
                return plan, plan_dims(rest, width), rest_src, rest_dst, rest
    return cut


def _split_usual(main: KernelPlan, dims: list[Dim],
                 width: int) -> tuple[KernelPlan, KernelPlan, int, int, list[Dim]] | None:
    """split_for_block's cuts for a block, at the usual stops (and a tile's at
    a big block's, SPLIT_TILE_BIG_J)."""
    # (A plan element by element is cut at any size; see SPLIT_FOR_BLOCKS.)
    short_block = (main.mode == "block" and main.dst_bytes >= SPLIT_MIN_BYTES
                   and (main.block.k_elems * width < SPLIT_SHORT_BLOCK_BYTES
                        or (main.block.j_elems * width < SPLIT_SHORT_J_BYTES
                            and main.block.k_elems * width < SPLIT_SHORT_JK_BYTES)))
    tiny = tiny_block(main, width)
    if main.mode != "strided" and not short_block and (
            main.mode != "tile" or main.tile is None or main.dst_bytes < SPLIT_MIN_BYTES
            or min(main.inner[0], main.tile[0]) * width >= SPLIT_TILE_SIDE_BYTES):
        return split_tiny_block(main, dims, width) if tiny else None
    merged = merge_dims(list(dims))
    # (a tile that no cut at J's usual room makes a block tries J's room as a
    # big block has it: SPLIT_TILE_BIG_J)
    passes = [False] + ([True] if SPLIT_TILE_BIG_J and main.mode == "tile"
                        and main.dst_bytes >= block_big_min_total() else [])
    for big_j in passes:
        for tried, (i, head) in enumerate(group_stops(merged, width, big_j)):
            if tried > 0 and (main.mode != "strided" or not SPLIT_OTHER_STOPS):
                break
            first, rest, rest_src, rest_dst = cut_at(merged, i, head)
            plan = plan_dims(first, width)
            if plan.mode != "block":
                continue
            if short_block and (plan.block.k_elems <= main.block.k_elems
                                or plan.block.j_elems < main.block.j_elems):
                break
            return plan, plan_dims(rest, width), rest_src, rest_dst, rest
    return split_tiny_block(main, dims, width) if tiny else None


#: Contiguous rows of at most this many bytes (the engine's inline short-row
#: copy) may run in source order (short_rows_order) ...
SHORT_ROW_BYTES = 512
#: ... and rows of at most SHORT_ROW_PLAIN_BYTES in a copy that does not
#: stream (see short_rows_order).
SHORT_ROW_PLAIN_BYTES = 4096
#: ... except rows of at least SHORT_ROW_STREAM_MIN_BYTES whose destination
#: order reads them as at most SHORT_ROW_STREAMS streams: those keep
#: destination order (see short_rows_order for the measurements).
SHORT_ROW_STREAMS = 256
SHORT_ROW_STREAM_MIN_BYTES = 160
#: ... and source order writes at most SHORT_ROW_WRITE_STREAMS rows before
#: it comes back beside the first (see short_rows_order) ...
SHORT_ROW_WRITE_STREAMS = 64
#: ... except in a copy that streams, rows shorter than
#: SHORT_ROW_FAR_READ_BYTES (0 with a large L3: no rows) whose source
#: neighbours destination order reads SHORT_ROW_FAR_READ_APART bytes or more
#: of copying apart, where source order writes its destination neighbours
#: at most SHORT_ROW_NEAR_WRITE_APART bytes apart: those run in source order
#: (see short_rows_order).
SHORT_ROW_FAR_READ_BYTES = l3_bound("SHORT_ROW_FAR_READ_BYTES")
SHORT_ROW_FAR_READ_APART = 1 << 20
SHORT_ROW_NEAR_WRITE_APART = 64 << 10


def short_rows_order(outer: list[Dim], row_bytes: int, streams: bool = True, far_reads: bool = True) -> list[Dim]:
    """The outer dimensions of a copy of short contiguous rows, in the order
    they run: destination order (merge_dims'), or source order where that
    puts a shorter dimension innermost.

    The innermost outer dimension is the one that jumps on one side: in
    destination order, the rows are written one after another and read
    either as that many streams (each moving one row along per round) or
    as passes over a whole region, a row at a time far apart.  Streams are
    the faster, and the fewer the better, so the order with the shorter
    innermost dimension wins: a (0, 2, 1, 3) permutation of
    (32, 1024, 16, 64) float16 scattered read 1024 rows 2 KiB apart per
    pass, 16 passes; in source order it reads each row once and writes 16
    streams, 2.25x faster (one process, alternating, 2 threads).  Scatters
    of 5-D permutations with rows of 48-128 bytes ran 1.03-2.5x faster;
    gathers, which keep destination order, 0.56-0.85x in source order.
    Dimensions of stride 0 (broadcast) keep destination order.

    Rows of SHORT_ROW_STREAM_MIN_BYTES or more (two and a half lines)
    that destination order reads as at most SHORT_ROW_STREAMS streams keep
    it, even where source order would write fewer: a few read streams and
    one written run beat a few write streams each writing its rows' first
    and last lines in part, lines whose other parts another pass writes
    long after.  In one process on the same buffers, alternating in an
    order shuffled every round (2 threads, 5 rounds), unnamed 4-D to 6-D
    permutations of 16-64 MB keeping a last dimension of such rows
    (gathers and scatters, six types) ran 1.17x faster by geometric mean
    (28 fresh cases, 0.61-1.75x, 19 faster; the old plan against itself
    in the same loop 0.99x), after 1.12-1.22x on the sets that chose the
    bounds; scatters are most of the slower ones, with no bound found
    that parts them from the faster; shorter rows
    (24-156 bytes) measured 0.96x so, and destination orders of more than
    256 streams (a pass over a region) 0.65-1.15x, and keep the rule above.

    Source order writes as many streams as it copies rows before it comes
    back to write beside the first; more than SHORT_ROW_WRITE_STREAMS (64)
    keep destination order, however many streams that reads: the rows are
    written a line or two at a time, each line a read for ownership that
    the stores behind it wait on, and past 64 streams none of those reads
    is asked for ahead.  A uint8 scatter of (3, 35, 16, 201, 44) in order
    (0, 3, 1, 2, 4) wrote 201 streams of 44-byte rows at 4.4 GB/s (0.21 of
    the memcpy limit, 0.6x PyTorch's speed), 16.1 GB/s in destination order
    (560 read streams).  The old order against the new in alternating
    processes, timed as the harness does (2 threads, 4 rounds): the 16 of
    32 unnamed permutations of 2-70 MB that source order took which this
    changes ran 1.27x faster by geometric mean (0.89-3.20x; rows under 64
    bytes 1.68-3.20x), a fresh 24 1.29x (0.75-3.19x, rows of 208-512 bytes
    the slower ones).  13 of the other 16 (3-59 streams) ran faster in
    source order (0.61-0.94x in destination order).

    This takes in an earlier rule for rows off whole lines (each shares a
    line with the row beside it): destination order where source order
    wrote two rows beside each other 1 MiB or more of copying apart, the
    shared line read for ownership and written back twice (5 of 1300
    unnamed permutations of 12-64 MB 1.21x faster so); those write more
    than 64 streams.

    In a copy that does not stream (``streams`` false), rows of up to
    SHORT_ROW_PLAIN_BYTES (4 KiB) take these rules too, where longer than
    SHORT_ROW_BYTES they had kept destination order: an int16 scatter of
    (1693, 14, 391) in order (1, 0, 2) read 1693 rows 10948 bytes apart a
    pass, at 0.88-0.95x PyTorch, and ran 1.6-1.9x faster in source order.
    The old order against the new in alternating processes, timed as the
    harness does (2 threads, 3 rounds): two sets of 20 and 16 unnamed
    permutations of 2-40 MB so planned 1.19x and 1.22x faster by geometric
    mean (0.79-1.62x).  Copies that stream ran 0.88x so (14 of 12-70 MB,
    0.61-1.03x) and keep destination order.

    Rows shorter than SHORT_ROW_PAIR_BYTES whose neighbours both orders
    visit that far apart run in pairs instead (pair_short_rows: destination
    order with the dimension one source row long beside the innermost).

    On a machine with a small L3, a streaming copy of rows shorter than
    SHORT_ROW_FAR_READ_BYTES (128) whose destination order reads a row's
    source neighbour SHORT_ROW_FAR_READ_APART (1 MiB) or more of copying
    later, past the L2, runs in source order wherever that writes a row's
    destination neighbour within SHORT_ROW_NEAR_WRITE_APART (64 KiB),
    however many streams that writes: destination order makes passes over
    the source, each reading a row here and there, and the lines a row
    shares with its neighbours come again from the L3 or memory in the
    next pass, where source order reads each line once and its write
    streams, however many, meet their lines again while the caches hold
    them.  An int16 gather of (8, 101, 82, 2, 3, 37) in order
    (1, 2, 4, 3, 0, 5), 74-byte rows read in 8 passes over 29 MB, ran at
    0.27-0.33 of the memcpy limit and 2.3x faster in source order.  On an
    AMD EPYC (Zen 4: 1 MiB of L2 a core, a 32 MiB L3), in one process on
    the same buffers, alternating (2 threads, 7 rounds), unnamed 5-D and
    6-D permutations of 8-70 MB so planned ran 1.35x faster by geometric
    mean (33 on which the bounds were set, 0.84-2.28x, 30 faster), a fresh
    24 1.39x (0.93-2.02x, 22 faster) and the 31 of 60000 draws that it
    changes 1.29x (0.87-1.78x, 30 faster).  Rows of 160-256 bytes measured
    0.87x so (19), copies that do not stream 0.87x (8), and keep the rules
    above.
    ``far_reads`` false leaves this rule out (wide_runs_tile: where the run
    tile had been taken, source order ran 0.95x its speed, 17 cases).
    """
    if (row_bytes > (SHORT_ROW_BYTES if streams else SHORT_ROW_PLAIN_BYTES) or len(outer) < 2
            or any(a == 0 or b == 0 for _, a, b in outer)):
        return outer
    if row_bytes >= SHORT_ROW_STREAM_MIN_BYTES and outer[-1][0] <= SHORT_ROW_STREAMS:
        return outer
    by_src = sorted(outer, key=lambda t: (t[1], t[2]), reverse=True)
    dst_apart = revisit_bytes(by_src, row_bytes, 2)   # source order: destination neighbours
    src_apart = revisit_bytes(outer, row_bytes, 1)    # destination order: source neighbours
    if row_bytes < SHORT_ROW_PAIR_BYTES and min(dst_apart, src_apart) >= SHORT_ROW_REVISIT_BYTES:
        paired = pair_short_rows(outer, row_bytes)
        if paired is not None:
            return paired
    if (far_reads and streams and row_bytes < SHORT_ROW_FAR_READ_BYTES and src_apart >= SHORT_ROW_FAR_READ_APART
            and dst_apart <= SHORT_ROW_NEAR_WRITE_APART):
        return by_src
    if by_src[-1][0] >= outer[-1][0] or dst_apart > SHORT_ROW_WRITE_STREAMS * row_bytes:
        return outer
    return by_src


#: Rows shorter than this many bytes whose neighbours both orders visit
#: SHORT_ROW_REVISIT_BYTES or more of copying apart (each order's far side:
#: source order writes the destination's neighbouring rows megabytes apart,
#: destination order reads the source's so) run in destination order with
#: the dimension one source row long moved in beside the innermost
#: (pair_short_rows), where the pair holds at most SHORT_ROW_PAIR_MAX rows:
#: the innermost writes a run of rows, the next steps every source stream
#: one row along, so both sides move in streams. In one process on the same
#: buffers, alternating in an order shuffled every round (2 threads, 7
#: rounds, the old plan against itself as a control: 0.99x and 1.00x), the
#: gathers and scatters of 9000 unnamed shapes of 8-70 MB that this changes
#: (6, 5-D and 6-D) and four chosen ones ran 1.32x faster by geometric mean
#: (rows of 70 bytes 2.3-2.4x, a 63 MB float16 gather that had trailed
#: numpy; one uint32 pair of 152-byte rows 0.75-0.81x, hence the bound), and
#: the fresh 14 of 24000 shapes, rows of 40-96 bytes, 1.53x (1.15-2.56x, one
#: 0.99x). Unbounded, with only one side far, it ran 0.82x on 16 others.
SHORT_ROW_PAIR_BYTES = 128
SHORT_ROW_PAIR_MAX = 64
SHORT_ROW_REVISIT_BYTES = 1 << 20


def pair_short_rows(outer: list[Dim], row_bytes: int) -> list[Dim] | None:
    """Destination order with the dimension that steps one row in the source
    moved to run just outside the innermost (which steps one row in the
    destination), or None where no such pair is."""
    if outer[-1][2] != row_bytes:
        return None
    i = next((i for i, t in enumerate(outer[:-1]) if t[1] == row_bytes), None)
    if i is None or i == len(outer) - 2 or outer[i][0] * outer[-1][0] > SHORT_ROW_PAIR_MAX:
        return None
    return outer[:i] + outer[i + 1:-1] + [outer[i], outer[-1]]


def revisit_bytes(outer: list[Dim], row_bytes: int, side: int) -> int:
    """Bytes a copy of rows of ``row_bytes`` with its outer dimensions
    running in the order ``outer`` (slowest first) copies between two rows
    beside each other on ``side`` (1 source, 2 destination): the rows of
    the loops inside the dimension whose stride there is the row; the whole
    copy where no dimension's is."""
    rows = 1
    for n, a, b in reversed(outer):
        if (a, b)[side - 1] == row_bytes:
            break
        rows *= n
    return rows * row_bytes


def plan_bytes(sizes, src, dst, width: int) -> KernelPlan:
    """The kernel plan for elements of ``width`` bytes (strides in bytes)."""
    count = math.prod(sizes)
    merged = merge_dims(list(zip(sizes, src, dst))) or [(1, width, width)]
    outer = merged[:-1]
    inner_n, inner_ss, inner_ds = merged[-1]
    run = inner_n * width
    if (WIDEN_SHORT_RUNS and inner_ss == width and inner_ds == width and run in (2, 4, 8) and outer
            and all(a % run == 0 and b % run == 0 for _, a, b in outer)):
        # Contiguous runs of 2, 4 or 8 bytes on both sides (a permutation that
        # keeps a last dimension of two or four values) are values of that
        # width: the tile and block kernels take them, not a copy a run.
        return plan_dims(outer, run)
    if inner_ss == width and inner_ds == width and 3 <= run <= RUN_TILE_WIDE_MAX and run not in (4, 8) and outer:
        runs = plan_runs(outer, run, count * width)
        block = run_block(outer, run) if RUN_BLOCKS and run <= RUN_TILE_MAX else None
        if block is not None and (runs is None or runs.tile[0] * run < RUN_BLOCK_TILE_BYTES
                                  or partial_run_rows(runs, run)):
            return block
        if runs is not None and (run <= RUN_TILE_MAX or wide_runs_tile(runs, run, outer)):
            return runs
    tile = None
    if inner_ss == width and inner_ds == width:
        mode = "memcpy"
    elif inner_ss == 0:
        mode = "fill"
    else:
        block = plan_block(merged, width) or plan_block(merged, width, BLOCK_GROUP)
        if block is not None:
            return block
        mode = "strided"
        best = source_fast_dim(outer, inner_ss)
        # (8 one-byte channels: from 16 pixels, one step of the kernel's)
        channels = INTERLEAVE_MAX_BYTE_CHANNELS if width == 1 and best >= 0 and outer[best][0] >= 16 else 7
        if (best >= 0 and inner_n <= channels and inner_ds == width and outer[best][1] == width
                and outer[best][2] == inner_n * width
                and (not small_interleave(outer[best][0], inner_n, width)
                     or small_pixels_join(outer, best, inner_n, width))):
            # Interleave a few channels: the source-fast dimension k becomes
            # the loop, the destination-fast (small) one the channels.
            n, a, b = outer.pop(best)
            mode = "interleave"
            tile = (inner_n, inner_ss, inner_ds)
            inner_n, inner_ss, inner_ds = n, a, b
        elif best >= 0 and inner_n >= 8:
            mode = "tile"
            tile = outer.pop(best)
        else:
            # Element by element otherwise: a block of shorter source runs
            # (see STRIDED_SHORT_K_BYTES) first.
            block = (plan_block(merged, width, short_k_bytes=STRIDED_SHORT_K_BYTES)
                     or plan_block(merged, width, BLOCK_GROUP, STRIDED_SHORT_K_BYTES))
            if block is not None:
                return block
    # (a fill never streams; a copy's answer does not hang on its order)
    copy_stream = mode == "memcpy" and copy_streams(mode, outer + [(inner_n, inner_ss, inner_ds)], count * width)
    if mode == "memcpy":
        outer = short_rows_order(outer, inner_n * width, copy_stream)
    elif mode == "tile":
        outer = subline_innermost(outer, count * width)
    plan = KernelPlan(mode=mode, width=width, outer=outer, inner=(inner_n, inner_ss, inner_ds),
                      tile=tile, dst_bytes=count * width)
    plan.stream = (copy_stream
                   or mode == "fill" and fill_streams(inner_n, inner_ds, width, plan.dst_bytes)
                   or mode == "tile" and plan.dst_bytes >= tile_stream_min(
                       width, abs(inner_ss), aliased_tile_rows((inner_n, inner_ss, inner_ds), tile))
                   and not keeps_aliased_rows(tile)
                   or mode == "interleave" and not small_interleave(inner_n, tile[0], width)
                   and interleave_streams(plan))
    chain = pixels_join_chain(plan) if mode == "interleave" else []
    if chain:
        # joined along the source (innermost, its first link inside), with ordinary stores
        row = plan.inner[0] * width
        _, b = panels(plan.outer, source_chain(plan.outer, row), row, row * plan.tile[0], width)
        plan.outer = chain_innermost(plan.outer, chain, b)
        plan.stream = False
    plan.l2 = 2 if tile_through_l2(plan) else 0
    split_tasks(plan)
    batch_short_rows(plan)
    if mode == "strided" and STRIDED_REVISIT_ORDER:
        plan.outer = revisit_order(plan)
    plan.stage_tasks = stage_tasks(plan)
    if plan.l2 == 2 and stages_over_l2(plan):
        plan.l2, plan.stage_tasks = 0, True
    if (TILE_RUN_ON and mode == "tile" and plan.tile is not None and plan.tile[1] == width
            and plan.tile_pieces == 1 and plan.tile[0] * width >= TILE_RUN_ON_MIN_BYTES):
        plan.outer = run_on_innermost(plan.outer, plan.tile[0] * width, plan.dst_bytes)
    return plan


def plan_dims(dims: list[Dim], width: int) -> KernelPlan:
    """plan_bytes for dims of (size, source stride, destination stride)."""
    return plan_bytes([n for n, _, _ in dims], [a for _, a, _ in dims], [b for _, _, b in dims], width)


def split_tasks(plan: KernelPlan) -> None:
    """Cut a plan's work into tasks: its rows into segments, and a transpose
    with too few tasks into pieces of k (split_tile_rows), after which whether
    it goes through L2 and its segments are decided again."""
    split_segments(plan)
    if split_tile_rows(plan):
        plan.l2 = 2 if tile_through_l2(plan) else 0
        split_segments(plan)


#: Planes interleaved into pixels of at most this many one-byte channels
#: (wider values: 7) take the interleave kernel rather than the transposing
#: tile (see plan_bytes): its SSSE3 network for 5-8 one-byte channels (two
#: pixels a 16-byte register, an 8 x 8 transpose of words) was never given
#: 8, which went through the tile's 16 x 16 byte blocks, half of each
#: wasted.  In one process on the same buffers, alternating in a shuffled
#: order (2 threads, 5 rounds), with the old plan against itself as a
#: control (1.00x): NCHW to NHWC uint8 scatters of 8 channels, 0.3-64 MB,
#: ran 2.62x faster by geometric mean (1.38-4.20x; 0.35 -> 1.38 of the
#: memcpy limit at 8.9 MB, in cache), gathers of 8-column matrices stored
#: column by column 3.4x and 3.5x; in cache, one thread, 8.6 -> 36 GB/s.
#: Under 16 pixels (the kernel's step, the rest pixel by pixel), tiny
#: transposes of 3-6 pixels by 8 planes measured 0.87-1.00x and keep the tile.
INTERLEAVE_MAX_BYTE_CHANNELS = 8


#: Interleaving tasks of at most this many pixels that are at most
#: INTERLEAVE_SMALL_BYTES bytes in all (a permutation whose few channels are a
#: short dimension far apart, pixels of another: 2 pixels of 5 int16 channels
#: a task) are copied element by element in batches (mode strided), not through
#: the interleave kernel, whose set-up and pixel-by-pixel rest (under its
#: 8- or 16-pixel step) cost more than such tasks hold.  In one process on
#: the same buffers, alternating in a shuffled order (2 threads, 7 rounds, the
#: old plan against itself as a control: 0.86-1.10x), 26 gathers and scatters
#: of 20 unnamed 4-D to 6-D permutations of 5-60 MB so planned ran 1.63x faster
#: by geometric mean (0.98-2.88x); an int16 (32, 5, 23, 23, 19, 2) scatter in
#: order (2, 0, 4, 3, 5, 1), 2 pixels of 5 channels a task, 2.37x (0.06 of the
#: memcpy limit before).  Larger tasks, in three earlier sets (54 plans),
#: measured 0.47-0.95x in 10 (4-8 float32 or uint32 pixels of 4-7 channels,
#: 80-192 bytes; 11 uint8 pixels of 5, 11 uint32 or float64 ones) and 1.05-3.71x
#: in the rest, and keep the interleave kernel.  Unless the executor can join
#: them along the source (small_pixels_join): then they are interleaves, and do
#: not stream (the int16 scatter of 3 pixels of 6 channels a task in order
#: (2, 4, 3, 0, 5, 1), whose rows go on along dimensions of 4, 2 and 313,
#: 10.3 -> 5.9 ms; see JOIN_PIXELS_ROW_BYTES for the rest).  Runs of 12
#: pixels (4 tasks of 3) had run 0.89x, hence runs of at least twice
#: INTERLEAVE_SMALL_PIXELS pixels.
INTERLEAVE_SMALL_PIXELS = 8
INTERLEAVE_SMALL_BYTES = 64


def small_interleave(pixels: int, channels: int, width: int) -> bool:
    """Whether interleaving tasks of ``pixels`` pixels of ``channels``
    values of ``width`` bytes are too small for the interleave kernel."""
    return pixels <= INTERLEAVE_SMALL_PIXELS and pixels * channels * width <= INTERLEAVE_SMALL_BYTES


#: Interleaving copies of four- and eight-byte values stream from this many
#: eighths of stream_min_total (8 MiB) rather than from all of it, as do those
#: of one-byte values whose tasks write INTERLEAVE_STREAM_BYTE_TASK bytes or
#: more; of these, tasks under INTERLEAVE_STREAM_MIN_TASK bytes only where the
#: executor joins them (interleave_tasks_join).  In one process on the same
#: buffers, alternating (2 threads, 7 rounds, the old plan against itself as
#: a control: 0.98x and 1.00x), unnamed NCHW/NHWC conversions and 2-D to 6-D
#: permutations of 8-32 MiB so planned ran 1.16x faster by geometric mean
#: (35, 0.67-1.82x, 30 faster; a 5-channel float32 NCHW to NHWC scatter of
#: 31.6 MB, 14.4 -> 17.6 GB/s), tuned on; 1.07x on a second 30 (0.56-1.75x,
#: 20 faster), whose two slowest, float64 tasks of 96 and 200 bytes that no
#: task continues, the task bound then kept as they were; and 1.06x on a
#: fresh 28 (0.76-1.47x, 16 faster; the slowest one-byte 7-channel scatters
#: and a uint32 one).  Two-byte values measured about even (21, 0.58-1.41x),
#: and one-byte tasks of 75 and 756 bytes 0.68x; they keep the whole
#: threshold.  On the 32 MiB-L3 machine of the first measurement, copies of
#: 10-12 MB (wider values) ran 0.46-0.47x streaming: unmeasured there since.
INTERLEAVE_STREAM_EIGHTHS = 2
INTERLEAVE_STREAM_BYTE_TASK = 4096
INTERLEAVE_STREAM_MIN_TASK = 256
#: ... and so do interleaves of one- and two-byte values whose tasks of at most
#: this many bytes the executor joins along the destination
#: (interleave_tasks_join; 0 turns this off): only a copy that streams is
#: joined so, and below stream_min_total such tasks went one by one, a few
#: short plane rows interleaved and written a task at a time (a uint8 scatter
#: of 2 planes of 21 pixels a task, 42 bytes, in 798336 tasks: 33.5 MB, just
#: under the 32 MiB, at 0.21 of the memcpy limit, 0.59 streamed).  In one
#: process on the same buffers, alternating (2 threads, 5 rounds), 24 unnamed
#: 4-D to 6-D gathers and scatters of 8-32 MiB so planned (of 68000 draws) ran
#: 1.19x faster by geometric mean streamed, those with tasks of at most 256
#: bytes 1.37x (10, 1.02-1.89x), larger ones 0.73-1.54x; a fresh 31 with
#: tasks of at most 256 bytes 1.44x (0.86-4.23x, 28 faster; a uint8 gather of
#: 2 planes of 16 pixels a task 0.12 -> 0.51 of the limit, the slowest one
#: of 7.9 MiB, under the bound).  Not those the executor joins along the
#: source instead (pixels_join_chain), which none of those were: a float16
#: scatter of 2 planes of 14 pixels a task, whose rows go on along a
#: dimension of 116768, streamed in runs of 4 tasks at 0.45x.
INTERLEAVE_STREAM_JOINED_TASK = 256
#: The executor's joined interleave tasks: at most this many bytes, in runs
#: of at least JOIN_MIN_TASKS (the engine's DMLS_JOIN_PLANES_TASK_BYTES and
#: DMLS_JOIN_MIN_TASKS, isa.h).
JOIN_PLANES_TASK_BYTES = 512
JOIN_MIN_TASKS = 4
#: Interleaving tasks of at most JOIN_PLANES_TASK_BYTES that do not stream,
#: whose planes' rows are shorter than this many bytes (a line), are joined
#: along the source where dimensions continue those rows (join_chain,
#: interleave_pixels_join; the engine's DMLS_JOIN_PIXELS_ROW_BYTES, isa.h).
#: Two builds alternating (2 threads, 5-6 rounds): 45 unnamed 4-D to 6-D
#: gathers and scatters so planned (small interleaves among them, see
#: INTERLEAVE_SMALL_PIXELS), tuned on, ran 1.97x faster by geometric mean
#: (0.95-4.90x; a 5-D uint8 gather of 5 planes of 13 pixels a task, 491040
#: tasks, 12.0 -> 3.7 ms), a fresh 11 1.97x (0.91-3.94x; plans left as they
#: were 0.85-1.04x in the same runs).  Rows of 82-90 bytes had run
#: 0.68-0.95x joined (each task's rows already whole lines), hence the
#: bound.  Copies that stream are joined so too, and then do not stream,
#: unless the executor joins their tasks along the destination
#: (interleave_tasks_join): 8 unnamed ones so planned ran 1.09-4.49x faster,
#: a fresh 8 0.98-3.28x (1.49x by geometric mean; a uint8 gather of 5 planes
#: of 2 pixels a task 17.9 -> 5.5 ms); 16 whose order changed, most of them
#: joined along the destination before, 0.99x.
JOIN_PIXELS_ROW_BYTES = 64
#: ... where, with the dimensions joined along innermost, at most this many
#: bytes are copied between a task's destination and the next one's beside it
#: (revisit_bytes), so that the lines the two share are still in L2 when the
#: second writes its part.  A uint32 gather whose 40-byte tasks met their
#: neighbours 539 KB apart ran 0.73x joined, an int16 scatter's 12-byte ones
#: 4.1 MB apart 0.81x; those within 168 KB 1.25-4.90x (25).
JOIN_PIXELS_REVISIT_BYTES = 512 << 10


def interleave_tasks_join(plan: KernelPlan) -> bool:
    """Whether the executor joins an interleaving plan's tasks into longer
    runs before streaming them: tasks of at most JOIN_PLANES_TASK_BYTES whose
    pixels lie back to back on both sides, each task's destination going on
    from the one before's, in runs of at least JOIN_MIN_TASKS (execute.c,
    joined_planes)."""
    assert plan.tile is not None
    n, iss, ids = plan.inner
    task = n * plan.tile[0] * plan.width
    return (bool(plan.outer) and task <= JOIN_PLANES_TASK_BYTES and iss == plan.width
            and plan.tile[2] == plan.width and ids == plan.tile[0] * plan.width
            and plan.outer[-1][2] == task and plan.outer[-1][0] >= JOIN_MIN_TASKS)


def source_chain(outer: list[Dim], row: int) -> list[int]:
    """The outer dimensions (indices into outer) that continue
    rows of ``row`` bytes in the source, innermost first: the first one's
    source stride is the row, each next one's the one before's times its
    size.  Walking them with the first innermost, the rows of all of them lie
    back to back."""
    chain, want, used = [], row, set()
    while True:
        for i, (n, a, _) in enumerate(outer):
            if i not in used and n > 1 and a == want:
                break
        else:
            return chain
        chain.append(i)
        used.add(i)
        want *= outer[i][0]


def join_chain(outer: list[Dim], row: int, task: int, width: int) -> list[int]:
    """source_chain for plane rows of ``row`` bytes, interleaving tasks of
    ``task`` (values of ``width`` bytes), where the executor would join
    along it: rows under JOIN_PIXELS_ROW_BYTES, tasks of at most
    JOIN_PLANES_TASK_BYTES, JOIN_MIN_TASKS tasks or more, and either in
    panels (panels: the chain up to the panels' dimension) or, with the
    chain innermost, at most JOIN_PIXELS_REVISIT_BYTES copied between a
    task's destination and the next one's beside it (revisit_bytes); none
    otherwise."""
    if row >= JOIN_PIXELS_ROW_BYTES or task > JOIN_PLANES_TASK_BYTES:
        return []
    chain = source_chain(outer, row)
    if math.prod(outer[i][0] for i in chain) < JOIN_MIN_TASKS:
        return []
    inside, _ = panels(outer, chain, row, task, width)
    if inside:
        return inside
    return chain if revisit_bytes(chain_innermost(outer, chain), task, 2) <= JOIN_PIXELS_REVISIT_BYTES else []


#: Joined pixels go in panels (the engine's run_panels, execute.c) where a
#: dimension B continues the destination a task at a time (its destination
#: stride is one task's bytes), the chain inside it holds at least
#: PANEL_MIN_CHAIN_BYTES of tasks, each task is at most PANEL_MAX_TASK_BYTES,
#: B has PANEL_MIN_ROWS rows or more, and four- and eight-byte values' plane
#: rows are PANEL_MIN_WIDE_ROW_BYTES or more (the engine's DMLS_PANEL_*,
#: isa.h).  Each task's few bytes had gone to the destination a chain's run
#: at a time, far from the last task's, and the bytes beside them, in B's
#: next row, only a whole chain later; the engine now takes up to 512 bytes
#: of B's rows by a buffer's worth of the chain's tasks at a time, each
#: task's rows one run.  B is the loop just outside the chain
#: (chain_innermost), which ends inside it where the source goes on through
#: it.  Two builds alternating (2 threads, 4-6 rounds), first with panels
#: cut out of the threads' ranges of tasks: of the unnamed benchmark's 4-D
#: to 6-D draws, chains of under 16 KiB of tasks ran 0.41-1.19x (their
#: tasks' neighbours still in L1, or tasks of 4-6 bytes), tasks of 222 and
#: 364 bytes and B of 2 rows 0.79-0.92x, four-byte values with plane rows of
#: 8 bytes 0.71-0.94x; hence the bounds.  With panels the threads' units of
#: work, 41 so planned that the bounds were tuned on 1.52x faster by
#: geometric mean (0.85-4.22x), a fresh 30 (seeds 2200-2999) 1.74x
#: (0.97-6.33x, 29 faster).  About one draw in 800.
PANEL_MIN_CHAIN_BYTES = 16384
PANEL_MAX_TASK_BYTES = 192

#: Chains of at least PANEL_MIN_FAR_CHAIN_BYTES (not PANEL_MIN_CHAIN_BYTES) of
#: tasks go in panels too where their tasks, of PANEL_MIN_FAR_TASK_BYTES or
#: more, lie PANEL_FAR_TASK_STRIDE bytes or more apart in the destination (the
#: stride of the chain's innermost dimension; the engine's far_chain): each
#: task's bytes went to a page of their own.  Two builds alternating in one
#: process (2 threads, 7 rounds): with chains of 256 bytes and up in panels, 27
#: unnamed permutations of 8-61 MB whose tasks the executor joins along the
#: source ran 0.82-1.75x, chains of under 2 KiB 0.82-0.92x (4-6 byte tasks
#: among them), those of 2-16 KiB whose tasks lie 6.5 KiB or more apart
#: 1.09-1.75x; with chains of 2 KiB and up, a fresh 15 1.23x by geometric mean
#: (0.77-1.90x), those whose tasks lie 5.6 KiB or more apart 1.05-1.90x, within
#: 3.1 KiB 0.91-0.93x, a uint8 one of 4-byte tasks 0.77x; hence the bounds.
#: With them, a fresh 23 (of 50000 draws) 1.33x (0.85-4.22x, 18 faster; the
#: slower ones ran 11-22 GB/s before, the faster 1.6-15).
PANEL_MIN_FAR_CHAIN_BYTES = 2048
PANEL_MIN_FAR_TASK_BYTES = 8
PANEL_FAR_TASK_STRIDE = 4096
PANEL_MIN_ROWS = 3
PANEL_MIN_WIDE_ROW_BYTES = 16


def panels(outer: list[Dim], chain: list[int], row: int, task: int, width: int) -> tuple[list[int], int | None]:
    """Where interleaving tasks of ``task`` bytes, plane rows of ``row``
    (values of ``width`` bytes), whose rows go on along ``chain`` (indices
    into outer, innermost first, as source_chain gives them) go in panels
    (see PANEL_MIN_CHAIN_BYTES, and PANEL_MIN_FAR_CHAIN_BYTES for shorter
    chains whose tasks lie far apart): the chain inside the panels' dimension B
    and B's index, the chain cut at the first of its dimensions, past the
    first, whose destination stride is ``task`` where one is; else ([],
    None)."""
    for k in range(1, len(chain)):
        if outer[chain[k]][2] == task:
            b, chain = chain[k], chain[:k]
            break
    else:
        b = next((i for i, (n, _, d) in enumerate(outer) if i not in chain and n > 1 and d == task), None)
        if b is None:
            return [], None
    tasks = math.prod(outer[i][0] for i in chain)
    far = (bool(chain) and tasks * task >= PANEL_MIN_FAR_CHAIN_BYTES and task >= PANEL_MIN_FAR_TASK_BYTES
           and abs(outer[chain[0]][2]) >= PANEL_FAR_TASK_STRIDE)
    if (tasks < JOIN_MIN_TASKS or (tasks * task < PANEL_MIN_CHAIN_BYTES and not far) or task > PANEL_MAX_TASK_BYTES
            or outer[b][0] < PANEL_MIN_ROWS or (width >= 4 and row < PANEL_MIN_WIDE_ROW_BYTES)):
        return [], None
    return chain, b


def chain_innermost(outer: list[Dim], chain: list[int], b: int | None = None) -> list[Dim]:
    """outer with the dimensions of chain (indices, innermost first, as
    source_chain gives them) innermost, its first the innermost of all, the
    others in their order; B (an index, for panels) just outside the chain."""
    return ([d for i, d in enumerate(outer) if i not in chain and i != b] + ([outer[b]] if b is not None else [])
            + [outer[i] for i in reversed(chain)])


def small_pixels_join(outer: list[Dim], best: int, channels: int, width: int) -> bool:
    """Whether a small interleave (small_interleave: pixels outer[best], a
    source-fast dimension, of ``channels`` planes) has outer dimensions
    along which the executor joins its tasks (join_chain: ones that continue
    each plane's row), runs of at least twice INTERLEAVE_SMALL_PIXELS
    pixels; such a copy does not stream."""
    n = outer[best][0]
    rest = outer[:best] + outer[best + 1:]
    chain = join_chain(rest, n * width, n * channels * width, width)
    return bool(chain) and math.prod(rest[i][0] for i in chain) * n >= 2 * INTERLEAVE_SMALL_PIXELS


def pixels_join_chain(plan: KernelPlan) -> list[int]:
    """The outer dimensions (indices into plan.outer, innermost first; none
    for no join) along which a short interleaving task's pixels go on in the
    source: each plane's row of the next task starts where this one's ends
    (source_chain).  The executor joins runs along them when they are the
    innermost ones, in that order (plan_bytes puts them there:
    chain_innermost; interleave_pixels_join), and the copy does not stream; one that streams and whose tasks the executor joins along
    the destination instead (interleave_tasks_join) keeps its order."""
    assert plan.tile is not None
    n, iss, ids = plan.inner
    task = n * plan.tile[0] * plan.width
    if (plan.stream and interleave_tasks_join(plan)) or iss != plan.width or plan.tile[2] != plan.width \
            or ids != plan.tile[0] * plan.width:
        return []
    return join_chain(plan.outer, n * plan.width, task, plan.width)


def interleave_pixels_join(plan: KernelPlan) -> bool:
    """Whether the executor joins an interleaving plan's tasks along the
    source (execute.c, joined_pixels): tasks of at most JOIN_PLANES_TASK_BYTES
    that do not stream, whose innermost outer dimensions continue each
    plane's row, in runs of at least JOIN_MIN_TASKS."""
    if plan.mode != "interleave" or not plan.outer:
        return False
    chain = pixels_join_chain(plan)
    return bool(chain) and chain == list(range(len(plan.outer) - 1, len(plan.outer) - 1 - len(chain), -1))


def interleave_streams(plan: KernelPlan) -> bool:
    """Whether an interleaving copy streams: its pixels lie back to back in the
    destination and it writes stream_min_total bytes or more (the executor
    interleaves 4 KiB of pixels at a time in L1 and streams them out), or
    from INTERLEAVE_STREAM_EIGHTHS of it, for the values and tasks named there.

    In one process on the same buffers, alternating (2 threads), NCHW to NHWC
    scatters of 2-6 channels of 34-64 MB (float16 to float64) ran 1.08-1.30x
    faster (a 5-channel float64 one that ran level with PyTorch 1.25x).
    """
    assert plan.tile is not None
    if plan.inner[2] != plan.tile[0] * plan.width:
        return False
    if plan.dst_bytes >= stream_min_total:
        return True
    task = plan.inner[0] * plan.tile[0] * plan.width
    if plan.width >= 4:
        wanted = task >= INTERLEAVE_STREAM_MIN_TASK or interleave_tasks_join(plan)
    else:
        wanted = (plan.width == 1 and task >= INTERLEAVE_STREAM_BYTE_TASK
                  or task <= INTERLEAVE_STREAM_JOINED_TASK and interleave_tasks_join(plan)
                  and not join_chain(plan.outer, plan.inner[0] * plan.width, task, plan.width))
    return wanted and plan.dst_bytes >= stream_min_total * INTERLEAVE_STREAM_EIGHTHS // 8


#: Contiguous runs of 3 to this many bytes on both sides (not 4 or 8, which are
#: values: WIDEN_SHORT_RUNS) that a transpose moves whole are values of that
#: width for the engine's run tile (plan_runs); 0 turns it off.  In one process
#: on the same buffers, alternating with it off (2 threads), 17 unnamed 3-D to
#: 5-D permutations of 1.6-14 MB keeping runs of 5-16 bytes ran 1.74x faster by
#: geometric mean (1.04-3.80x), 0.46 -> 0.79 of the memcpy limit; 20 with runs
#: of 3-7 bytes (RGB images turned, 3 float16 values, dimensions of 2 to
#: 400000) 1.97-5.71x, 0.04-0.20 -> 0.16-0.71.  Runs of 17-32 bytes (the
#: kernel's widest) had taken the run tile only where a copy a run would not
#: have both sides' back-to-back dimensions as its two innermost loops; since,
#: in one process on the same buffers, alternating in a shuffled order (2
#: threads, 5 rounds), with the old plan against itself as a control (1.02x,
#: 1.00x), the 53 and 54 gathers and scatters of two sets of 3-D to 5-D
#: permutations of 2-60 MB (runs of 17-31 bytes, one- to eight-byte values)
#: that kept a copy a run ran 1.32x and 1.24x faster by geometric mean in the
#: run tile (0.59-3.13x; 2-D transposes of 18-byte runs 1.44-2.50x; the
#: slowest, 0.62-0.75x, gathers of 24-30-byte runs of two-byte values), they
#: all do.
RUN_TILE_MAX = 32


#: Runs of RUN_TILE_MAX + 1 to this many bytes (up to a line: the engine's
#: DMLS_RUN_TILE_WIDE_MAX) take the run tile too, each run moved exactly, where
#: the copy comes from memory (its destination at least half of
#: stream_min_total, so that source and destination together pass the L3),
#: the tile's source rows hold RUN_WIDE_TILE_BYTES or more of runs back to
#: back and each destination row's piece RUN_WIDE_PIECE_BYTES or more; other
#: copies of such runs stay a copy a run (memcpy), which in destination order
#: reads each source line that two runs share twice, far apart.  Two builds
#: in alternating processes (2 threads, 6 rounds): unnamed 4-D to 6-D
#: permutations of 2-65 MB with runs of 33-64 bytes (float64 96 x 6 x 2 x 463 x
#: 6 in order (3, 1, 2, 0, 4), 48-byte runs, 0.39-0.43 -> 0.84 of the memcpy
#: limit) ran 1.29x faster by geometric mean taking the tile whatever their
#: shape (9 tuned on) but 0.91x on a fresh 18 (0.43-1.26x), and 0.98x on
#: another 20 with the source rows' bound alone (0.52-1.62x): slower where a
#: destination piece was 2-8 runs, a source row's run of runs under 1 KiB, or
#: the copy under 16 MiB (in cache, where a shared line costs nothing); with
#: all three bounds, a fresh 20 of 16-64 MB
#: 1.28x (0.82-1.88x, 18 faster).  Runs of 65-256 bytes measured 0.68-1.15x
#: in the tile (all seven over 128 bytes slower), and runs of 65-128 bytes
#: within those bounds 1.02x over 20 of 21-70 MB (0.68-2.80x): they stay rows.
RUN_TILE_WIDE_MAX = 64
RUN_WIDE_TILE_BYTES = 1024
RUN_WIDE_PIECE_BYTES = 512


#: ... and, whatever those two bounds, where a copy a run would read a source
#: line that two runs share, then WIDE_RUN_REVISIT_BYTES or more later read
#: it again (revisit_bytes: the source-adjacent run's dimension is an outer
#: loop of the copy's, with that many bytes inside it), and the tile's
#: source rows hold WIDE_RUN_REVISIT_ROW_BYTES or more of runs back to back.
#: In one process on the same buffers, alternating (2 threads, 6 rounds),
#: the two bounds lifted: of 32 unnamed permutations of 16-70 MB with runs of
#: 36-64 bytes, those whose copy a run read a shared line again 150 KB to
#: 27 MB later ran 1.21x faster in the tile by geometric mean (15,
#: 0.73-1.96x), those that read it again within 30 KB 0.94x (17,
#: 0.67-1.23x).  With this bound, a fresh 16 (about one unnamed draw in 900
#: of that size) 1.35x (0.84-1.93x, 14 faster; a float32 gather 6.4 -> 12.4
#: GB/s).
WIDE_RUN_REVISIT_BYTES = 128 << 10
WIDE_RUN_REVISIT_ROW_BYTES = 128


def wide_runs_tile(runs: KernelPlan, run: int, outer: list[Dim]) -> bool:
    """Whether a transpose of runs wider than RUN_TILE_MAX bytes takes the
    run tile ``runs`` (plan_runs) rather than a copy a run in the order of
    its outer dimensions ``outer``: see RUN_TILE_WIDE_MAX and
    WIDE_RUN_REVISIT_BYTES."""
    if 2 * runs.dst_bytes < stream_min_total:
        return False
    if runs.tile[0] * run >= RUN_WIDE_TILE_BYTES and runs.inner[0] * run >= RUN_WIDE_PIECE_BYTES:
        return True
    if runs.tile[0] * run < WIDE_RUN_REVISIT_ROW_BYTES:
        return False
    streams = copy_streams("memcpy", outer + [(1, run, run)], runs.dst_bytes)
    return revisit_bytes(short_rows_order(outer, run, streams, far_reads=False), run, 1) >= WIDE_RUN_REVISIT_BYTES


def plan_runs(outer: list[Dim], run: int, dst_bytes: int) -> KernelPlan | None:
    """The plan of a transpose of contiguous runs of ``run`` bytes (a
    permutation that keeps a last dimension of three one-byte values, say),
    given the dimensions outside the runs (strides in bytes, merged): the
    runs are the values of a tile plan (the engine's run tile, tile-runs.c),
    or None where no dimension has runs back to back on both sides (the
    destination's fastest one and a source-fast one).

    Copied a run at a time, each run of such a permutation read a source line
    of its own: an RGB image of 1080 x 1920 turned ran at 2.0-2.6 GB/s, 0.06
    of the memcpy limit (0.28 as a transpose of runs).
    """
    inner_n, iss, ids = outer[-1]
    rest = list(outer[:-1])
    best = source_fast_dim(rest, iss)
    if ids != run or best < 0 or rest[best][1] != run:
        return None
    tile = rest.pop(best)
    plan = KernelPlan(mode="tile", width=run, outer=rest, inner=(inner_n, iss, ids), tile=tile,
                      dst_bytes=dst_bytes)
    split_tasks(plan)   # never through L2: a run plan does not stream
    return plan


#: A transpose of runs whose source-fast side is a group of dimensions (the
#: runs of a 5-D permutation keeping its last dimension of 5 bytes, 4 x 81
#: of them back to back in the source) is a block of runs (run_block) where
#: the run tile would move fewer than RUN_BLOCK_TILE_BYTES of each source
#: row a task (its single dimension's), the block of at most RUN_BLOCK_BYTES:
#: the run tile's kernel over the block's offset tables, in place (no L2
#: buffers, streaming or whole blocks).  A uint8 gather with runs of 5
#: bytes, tasks of 4 x 12 runs, ran at 0.25 of the memcpy limit.  In one
#: process on the same buffers, alternating (2 threads, 3 rounds, the old
#: plan against itself as a control: 0.94x, 0.99x), 17 unnamed 4-D to 6-D
#: permutations of 10-54 MB with runs of 3-28 bytes whose plans change ran
#: 1.25x faster by geometric mean taking every block (0.84-3.80x); those
#: whose run tile moved 1224-3220 bytes of each source row a task ran
#: 0.84-0.99x, under 1024 bytes 1.04-3.80x; with that bound, a fresh 14 of
#: 10-57 MB 1.12x (0.83-1.53x).
RUN_BLOCKS = True
RUN_BLOCK_TILE_BYTES = 1024
RUN_BLOCK_BYTES = 256 << 10


#: ... and where the run tile would write fewer than RUN_BLOCK_PIECE_BYTES
#: of each destination row a pass, rows that hold more (partial_run_rows):
#: the dimensions that fill the rest of them are further out, so each
#: destination line is written in as many passes far apart, where the
#: block's J group takes them in.  An int16 scatter writing 12 of each 96
#: bytes a pass read 0.28 of the memcpy limit, 2.56x faster as a block.  Old
#: plan against new (2 threads, 3 rounds), 36 unnamed permutations of 4-70
#: MB whose plans a bound of 128 changed (20 in one process on the same
#: buffers, alternating, the old plan against itself as a control; 16 in
#: alternating processes, timed as the harness does): pieces of 12-66
#: bytes 1.15-2.4x faster (every one), of 84-126 bytes 0.76-1.31x, hence
#: the bound; a fresh 16 with it, timed as the harness does, 1.60x by
#: geometric mean (0.99-2.56x).  About one unnamed draw in a thousand is so
#: planned.
RUN_BLOCK_PIECE_BYTES = 72


def partial_run_rows(runs: KernelPlan, run: int) -> bool:
    """Whether the run tile ``runs`` writes fewer than RUN_BLOCK_PIECE_BYTES
    of each destination row a pass, and rows that hold more."""
    piece = runs.inner[0] * run
    return piece < RUN_BLOCK_PIECE_BYTES and runs.tile[2] > piece


def run_block(outer: list[Dim], run: int) -> KernelPlan | None:
    """A block plan of runs of ``run`` bytes (``outer``: the dimensions
    outside the runs, strides in bytes, merged, the destination-fast one
    last), kept in place; or None (see RUN_BLOCKS)."""
    if not outer or outer[-1][2] != run:
        return None
    plan = _plan_block(outer, run, BLOCK_GROUP_FIRST, BLOCK_SHORT_K_BYTES, RUN_BLOCK_BYTES // run,
                       block_l2_min_total())
    if plan is None:
        return None
    plan.l2, plan.stream = 0, False
    plan.block = replace(plan.block, whole=False, next=False, stage_src=False, stage_dst=False, lines=1)
    return plan


#: Whether plan_bytes takes contiguous runs of 2, 4 or 8 bytes (on both sides,
#: at strides that are multiples of the run) as values of that width.
WIDEN_SHORT_RUNS = True


#: Short strided rows (at most 16 values: both sides' fastest dimensions short
#: and different, which neither a tile nor a block takes) run a task each; the
#: innermost outer dimension joins the task as a batch of rows (the plan's
#: ``tile``), up to this many values a task, so that the executor steps its
#: index of the outer dimensions once a batch rather than once a row.
STRIDED_BATCH_VALUES = 256
#: Likewise contiguous rows of at most SHORT_BATCH_ROW_BYTES (a permutation
#: that keeps a last dimension of a few values), up to SHORT_BATCH_BYTES a task.
SHORT_BATCH_ROW_BYTES = 64
SHORT_BATCH_BYTES = 1024
#: ... as long as this many tasks remain.
STRIDED_BATCH_MIN_TASKS = 64
#: A batch of short strided rows whose dimension's largest divisor that fits
#: the batch is less than 1 / BATCH_WHOLE_FACTOR of it (a prime such as 37
#: beside rows of 7 values, which took no batch at all: a task every 7
#: values) is taken whole, up to this many times STRIDED_BATCH_VALUES.  In
#: one process on the same buffers, alternating in a shuffled order (2
#: threads, 9 rounds, the old plan against itself as a control: 0.82-1.13x,
#: 1.00x by geometric mean), 12 unnamed 4-D to 6-D gathers of 3-37 MB that
#: reverse their last three dimensions (2-3 x 29-67 x 4-7 values) ran
#: 1.28-4.80x faster (1.72x by geometric mean; a float16 one 1.4 -> 6.7
#: GB/s).  Batches of short contiguous rows (memcpy) so taken ran 0.52-1.67x
#: (0.94x over 20), and keep their divisors.
BATCH_WHOLE_FACTOR = 2
#: A longer such dimension whose largest divisor that fits the batch is
#: likewise under 1 / BATCH_WHOLE_FACTOR of it takes its largest divisor up
#: to BATCH_WHOLE_FACTOR times the batch (262 = 2 x 131 beside rows of 2
#: values: batches of 131 rows, not 2, where a task moved 8 bytes).  In one
#: process on the same buffers, alternating (2 threads, 3 rounds, the old
#: plan against itself as a control: 1.02x, 1.03x), 13 unnamed 4-D to 6-D
#: permutations of 5-70 MB whose plans this changes ran 1.33x faster by
#: geometric mean (1.03-2.07x), a fresh 10 of 2-66 MB 1.15x (0.99-2.05x).
BATCH_GROW = True
#: Short rows repeated back to back this many times or more (the innermost
#: outer dimension has source stride 0 and destination stride one row: a
#: broadcast along H) are not batched: the executor writes each run of them
#: whole as a periodic pattern, whole destination lines with aligned stores
#: (execute.c; plan.h's DMLS_REPEAT_MIN_ROWS).  Batched, rows of 1-63 bytes went one
#: short copy a row, at most 1 KiB a task: in one process on the same
#: buffers, alternating in a shuffled order (2 threads, 9 rounds, the old
#: plan against itself as a control: 1.00x), 16 unnamed NCHW broadcasts
#: along H of 9-62 MB with rows of 5-56 bytes of every width ran 2.25x
#: faster by geometric mean (0.92-10.2x; a uint8 one with rows of 5 bytes
#: from 3.3 to 33.9 GB/s), from 1.00-4.3x PyTorch's speed to 1.64-10.6x.
REPEAT_MIN_ROWS = 4


def batch_short_rows(plan: KernelPlan) -> None:
    """Take the innermost outer dimension of a plan of short strided or
    contiguous rows as a batch of rows per task (see STRIDED_BATCH_VALUES and
    SHORT_BATCH_BYTES); a longer one is cut, its batch the largest divisor
    that fits."""
    if plan.segments != 1 or not plan.outer:
        return
    if plan.mode == "strided" and plan.inner[0] <= 16:
        most = STRIDED_BATCH_VALUES // plan.inner[0]
    elif plan.mode == "memcpy" and plan.inner[0] * plan.width <= SHORT_BATCH_ROW_BYTES:
        most = SHORT_BATCH_BYTES // (plan.inner[0] * plan.width)
    else:
        return
    n, a, b = plan.outer[-1]
    if plan.mode == "memcpy" and a == 0 and b == plan.inner[0] * plan.width and n >= REPEAT_MIN_ROWS:
        return   # one row repeated back to back: the executor writes each run whole
    q = next((q for q in range(min(n, most), 1, -1) if n % q == 0), 1)
    if plan.mode == "strided" and q * BATCH_WHOLE_FACTOR < n <= most * BATCH_WHOLE_FACTOR:
        q = n   # a dimension with no divisor that fits (37 rows of 7 values): whole
    elif BATCH_GROW and plan.mode == "strided" and q * BATCH_WHOLE_FACTOR < most < n:
        q = next((d for d in range(most * BATCH_WHOLE_FACTOR, q, -1) if n % d == 0), q)
    if q < 2 or plan.outer_count // q < STRIDED_BATCH_MIN_TASKS:
        return
    if q == n:
        plan.outer.pop()
    else:
        plan.outer[-1] = (n // q, q * a, q * b)
    plan.tile = (q, a, b)
    plan.tasks = plan.outer_count * plan.segments


#: A plan element by element (``strided``) whose tasks read or write lines
#: that a slower outer dimension comes back to (its stride on that side under
#: a line, or exactly the task's span there: the same lines, or the next
#: bytes of a run) only after more than FAR_REVISIT bytes of other tasks
#: runs that dimension innermost (revisit_order): its next values then find
#: those lines in L1.  Outer dimensions go in destination order, so a
#: dimension that interleaves a few values in the source (stride 2 or 4
#: bytes) but lies far apart in the destination was the slowest: every
#: source line was read once per value, the whole copy apart (an int16
#: gather of 17 MB whose source rows hold three values of such a dimension
#: ran at 0.05 of the memcpy limit).  In one process on the same buffers,
#: alternating (2 threads, 3-4 rounds, the old plan against itself as a
#: control: 0.97x, 1.03x), 11 unnamed 4-D to 6-D permutations of 2-61 MB so
#: planned whose order this changes ran 1.34x faster by geometric mean
#: (0.97-2.39x), a fresh 5 of 7-65 MB 1.58x (0.92-2.42x).  Moving every
#: dimension with a stride under a line innermost instead (near ones too)
#: measured 0.49-1.36x.
STRIDED_REVISIT_ORDER = True
FAR_REVISIT = 256 << 10


def revisit_order(plan: KernelPlan) -> list[Dim]:
    """``plan.outer`` (slowest first) with the dimensions that come back to
    a task's lines from further than FAR_REVISIT bytes away moved innermost,
    the smallest stride last; the others keep their order (see
    STRIDED_REVISIT_ORDER)."""
    kn, ka, kb = plan.tile if plan.tile is not None else (1, 0, 0)
    n, ia, ib = plan.inner
    # A task's extent on each side, and the bytes it moves on both.
    span = ((kn - 1) * abs(ka) + (n - 1) * abs(ia) + plan.width,
            (kn - 1) * abs(kb) + (n - 1) * abs(ib) + plan.width)
    task = 2 * plan.width * kn * n
    outer = list(plan.outer)
    far = [i for i, (_, a, b) in enumerate(outer)
           if any(0 < x < 64 or x == e for x, e in zip((abs(a), abs(b)), span))
           and task * math.prod(t[0] for t in outer[i + 1:]) > FAR_REVISIT]
    if not far:
        return outer
    moved = sorted((outer[i] for i in far), reverse=True,
                   key=lambda t: min(x for x in (abs(t[1]), abs(t[2])) if x > 0))
    return [t for i, t in enumerate(outer) if i not in far] + moved


#: A transpose cut into fewer tasks than this (an NCHW to NHWC copy of a single
#: image, whose channels are one short row; a matrix a few dozen columns wide)
#: has its rows of k cut into an outer dimension, so that threads can share it;
#: each piece keeps at least MIN_TILE_ROWS rows where k has such a divisor, and
#: else at least MIN_TILE_PIECE (a 251 x 173 image has none of 256 or more).
#: Short ragged rows back to back keep MIN_TILE_ROWS, their kernel's minimum
#: (RAGGED_MIN_ROWS).
MIN_TILE_TASKS = 16
MIN_TILE_ROWS = 256
MIN_TILE_PIECE = 64
#: Equal pieces of k only from a divisor at most this many times the pieces
#: needed; else uneven ones (tile_pieces).  Many short pieces each pay the
#: kernel's set-up and a ragged last micro-block row, and read each source row
#: in short runs: 8 NCHW to NHWC scatters of 1.4-24 MB (pixels of 12-40
#: channels; k a product of two primes, such as 283 x 397) went 0.60 -> 0.65 of
#: the memcpy limit (geometric mean; 24 uint8 channels of 201 x 151 pixels
#: 0.59 -> 0.71; one of 8 even).
MAX_TILE_CUT = 2


def task_k(plan: KernelPlan) -> int:
    """Values of k (the transposed dimension) one task copies at most (1 without one)."""
    return plan.tile_piece or (plan.tile[0] if plan.tile is not None else 1)


#: A transpose of at least PIECES_MIN_BYTES into destination rows off line
#: boundaries, whose k has no divisor for enough tasks, keeps its segments and
#: has k cut into pieces (tile_pieces) where the shorter segments would be
#: PIECES_OVER_SEGMENTS_OF values or fewer.  Segments of 64 values made tasks
#: of 64 source rows along all of k, each writing 64 values of every
#: destination row (two lines of it in part), too short for the streaming
#: kernels of such rows.  In one process on the same buffers, alternating in an
#: order shuffled every round (2 threads, 7-11 rounds, the old plan against
#: itself as a control: 0.94-1.06x), a fresh set of 24 unnamed 2-D and 3-D
#: transposes of 0.3-60 MB whose plans change (one to eight bytes) ran 1.29x
#: faster by geometric mean (0.76-1.84x, 21 faster; int16 3653 x 1561 1.84x,
#: a uint8 1560 x 8897 scatter 0.76x).  Before it, streaming ones: 5 float32
#: ones 1.39x (1.10-1.56x), 7 of one and two bytes 1.31x (1.05-1.68x); 9 of
#: 10-12 MB that do not stream 1.25x (1.09-1.41x); 0.3-1.1 MB ones (371 x 371
#: float16 to float64, 311 x 463 int16) 1.20-2.02x, but a 263 x 397 float32
#: one 0.84-0.85x.  Under 256 KiB, uint8 ones of 65-130 KB ran 0.84-0.93x;
#: destination rows on line boundaries (int16 rows of 2 KiB) 0.66-1.26x, so
#: neither.
PIECES_OVER_SEGMENTS_OF = 64
PIECES_MIN_BYTES = 256 << 10


def split_tile_rows(plan: KernelPlan) -> bool:
    """Cut a transpose's k rows into pieces, when it has too few tasks.

    The smallest a that brings the tasks to MIN_TILE_TASKS and leaves pieces of at least
    MIN_TILE_ROWS rows, if it is at most MAX_TILE_CUT times the pieces needed (k = 283 x
    397 would otherwise be cut in 283 pieces where 4 would do).  When k has no such
    divisor, the rows of j are cut into shorter segments instead, down to 64 values (but a
    copy into rows off line boundaries keeps segments that would end so short:
    PIECES_OVER_SEGMENTS_OF); where they cannot be (rows of 64 values or fewer, short rows
    back to back, those copies), pieces of at
    least MIN_TILE_PIECE rows will do (not for short ragged rows back to back, whose
    kernel takes RAGGED_MIN_ROWS): equal ones where a divisor of k gives them, else
    ``tile_pieces`` pieces of ``tile_piece`` rows, the last one shorter, which the
    executor cuts itself (a prime k).  Returns whether k was cut (the caller then plans
    the segments again).
    """
    if plan.mode != "tile" or plan.tile is None or plan.tasks >= MIN_TILE_TASKS:
        return False
    k, kss, kds = plan.tile
    need = -(-MIN_TILE_TASKS // max(plan.tasks, 1))

    def cut_in(a: int) -> None:
        plan.outer.append((a, k // a * kss, k // a * kds))
        plan.tile = (k // a, kss, kds)

    def cut(least: int) -> bool:
        # the smallest a >= need that divides k, up to MAX_TILE_CUT * need
        for a in range(need, min(k // least, MAX_TILE_CUT * need) + 1):
            if k % a == 0:
                cut_in(a)
                return True
        return False

    if cut(MIN_TILE_ROWS):
        return True
    whole_short_rows = plan.segments == 1 and kds == plan.inner[0] * plan.width and kds <= 1024
    if not plan.l2 and plan.segment_len > 64 and not whole_short_rows:
        # No such divisor (a 371 x 371 transpose): shorter segments of the rows
        # instead, whole multiples of 64 values, so that two threads get even
        # shares (not rows kept whole for the kernels of short rows back to back).
        want = -(-MIN_TILE_TASKS // max(plan.outer_count, 1))   # segments per row
        split_segments(plan, longest=whole_tiles_share(plan.inner[0], want))
        if not (plan.dst_bytes >= PIECES_MIN_BYTES and kds % 64 != 0 and plan.segment_len <= PIECES_OVER_SEGMENTS_OF
                and min(need, k // MIN_TILE_PIECE) >= 2):
            return False
        # Into rows off line boundaries, segments this short leave each
        # task's piece of a destination row a line or so, two lines of it
        # written in part: the segments go back to what they were and k is
        # cut into pieces below instead (PIECES_OVER_SEGMENTS_OF).
        split_segments(plan)
    # Pieces of at least MIN_TILE_PIECE rows: equal ones where k has a divisor
    # that gives them, else pieces of k that the executor cuts itself
    # (tile_pieces: the last piece holds the rest; a 350003 x 45 transpose).
    ragged = plan.width in (1, 2, 4, 8) and plan.inner[0] % (16 // plan.width) != 0   # not runs (plan_runs)
    least = MIN_TILE_ROWS if whole_short_rows and ragged else MIN_TILE_PIECE
    if least < MIN_TILE_ROWS and cut(least):
        return True
    a = min(need, k // least)
    if a < 2:
        return False
    if k % a == 0:   # fewer than MIN_TILE_TASKS equal pieces (k = 14 * 258, say)
        cut_in(a)
        return True
    plan.tile_piece = -(-k // a)
    plan.tile_pieces = -(-k // plan.tile_piece)
    return True


#: Destination rows back to back, of up to 512 bytes that are not a whole number
#: of 16-byte micro-blocks (9-15 one-byte channels, say, in an NCHW to NHWC
#: gather), go through a padded tile when at least this many rows are copied in
#: one go (plan.h); fewer (small planes) take the ordinary paths.
RAGGED_MIN_ROWS = 256


#: Ragged rows back to back (see tile_through_l2) of at most this many bytes
#: never go through L2, however few there are: in one process on the same
#: buffers, alternating (2 threads), 28 unnamed 5-D and 6-D gathers and
#: scatters of 32-86 MB whose tasks are 9-224 such rows of 14-216 bytes (a
#: permutation that swaps its last two dimensions) ran 1.56x faster by
#: geometric mean in the cached tile (1.01-3.33x; 0.15-0.44 -> 0.34-0.65 of
#: the memcpy limit), NHWC to NCHW gathers into planes of 7 x 7 to 13 x 13
#: pixels (162-196 bytes, 24-64 channels) 1.01-1.21x; planes of 392 and 450
#: bytes (96 float16 and 100 int16 channels) 0.93x and 0.73x, so longer
#: rows keep RAGGED_MIN_ROWS.
L2_RAGGED_ROW = 256
#: Whole rows back to back (see tile_through_l2) are transposed from the
#: source rows a band of this many bytes of them at a time (the engine's
#: nt_contig, transpose-sse2.c), a band of whole source lines (64 bytes of
#: each row).  Rows longer than CONTIG_BAND_BYTES / (64 / width) bytes (257
#: one-byte values or more, 513 bytes of two-byte ones) leave a band less
#: than a line of each source row, and go through L2 (as one run, whole
#: lines streamed): two builds alternating, timed as the harness does (2
#: threads, 3 rounds), 6 unnamed uint8 and int16 copies of 12-40 MB so
#: planned ran 1.48-2.20x faster (uint8 480 x 80989 scattered, rows of 480
#: bytes, 4.0 -> 8.9 GB/s: 0.29 of the memcpy limit).  Four- and eight-byte
#: values, whose bands do read whole lines, ran 0.64-1.04x through L2 (11).
#: (the engine's DMLS_CONTIG_BAND_BYTES, isa.h)
CONTIG_BAND_BYTES = 16384

#: Eight-byte values into destination rows of at most this many bytes (64
#: values; rows not back to back, or they would be contiguous above) take the
#: cached tile, not the L2 buffers: in one process on the same buffers,
#: alternating (2 threads, 5-7 rounds), 23 unnamed 4-D to 6-D float64 gathers
#: and scatters of 34-87 MB so planned ran 1.18x and 1.07x faster by geometric
#: mean in two sets of 11 and 12 (0.94-1.32x, 20 faster), NHWC to NCHW float64
#: gathers into planes of 41 and 49 values 1.25x and 1.22x (of 65 and 55
#: values 0.98-0.99x); float32 ones ran 0.83-1.18x, so they keep L2.
L2_WIDE_SHORT_ROW = 512


#: Streaming tile plans whose tasks each write one run of the destination
#: (its rows back to back, of at least STAGE_TASK_MIN_ROW bytes, and at most
#: STAGE_TASK_BYTES a task: the engine's L2 buffer) transpose such a task into
#: the buffer and stream the run out, where its rows would otherwise take the
#: cached tile with ordinary stores (rows that no streaming kernel writes:
#: off line boundaries, not a whole number of micro-blocks, fewer than
#: RAGGED_MIN_ROWS): batched small transposes, NHWC to NCHW and back with
#: planes of 20-900 pixels, many of which ran at 0.45-0.7 of the memcpy limit.
#: In one process on the same buffers, alternating in a shuffled order with the
#: cached tile (2 threads, 7 rounds, the old plan against itself as a control:
#: 0.89-1.39x), three sets of 14-16 unnamed NHWC/NCHW conversions (gathers and
#: scatters, one- to eight-byte values, 10-67 MB) ran 1.05x, 1.01x and 1.14x
#: faster by geometric mean (0.93-1.55x; the set not tuned on 0.96-1.55x).
#: Copies of 9-10 MB ran 0.76-1.02x (the cached tile keeps them in the L3), so
#: only copies from transpose_stream_min() stage.
STAGE_TASK_MIN_ROW = 128
STAGE_TASK_BYTES = 5 << 16


def stage_tasks(plan: KernelPlan) -> bool:
    """Whether a tile plan's tasks go through the buffer (see STAGE_TASK_MIN_ROW)."""
    if plan.mode != "tile" or not plan.stream or plan.l2 or plan.segments != 1 or plan.tile is None:
        return False
    if plan.dst_bytes < transpose_stream_min():
        return False
    w = plan.width
    jn, _, ids = plan.inner
    _, kss, kds = plan.tile
    return (kss == w and ids == w and kds == jn * w and kds >= STAGE_TASK_MIN_ROW
            and task_k(plan) * kds <= STAGE_TASK_BYTES)


#: Tile plans through both L2 buffers whose tasks each write one destination
#: run of at most this many bytes stage the task instead (the NHWC to NCHW
#: scatters of small planes: a task of a few hundred pixels, each a short
#: row, went through the buffers chunk by chunk and was streamed out row by
#: row).  In one process on the same buffers, alternating in a shuffled order
#: (2 threads, 7 rounds, the old plan against itself as a control: 0.93-1.08x),
#: 14 unnamed NHWC/NCHW conversions of 34-69 MB with tasks of up to 32 KiB ran
#: 1.14x faster by geometric mean (0.87-2.02x; an int16 scatter of 141 channels
#: and 5 x 8 pixels from 0.53 of the memcpy limit to 2.0x that), and a set of
#: 14 with tasks of 4-180 KB 1.04x (0.91-2.09x) with this bound; tasks of 67-180
#: KB, staged, ran 0.69-0.97x, and keep the buffers.
STAGE_OVER_L2_BYTES = 32 << 10


def stages_over_l2(plan: KernelPlan) -> bool:
    """Whether a tile plan planned through L2 stages its tasks instead (STAGE_OVER_L2_BYTES)."""
    if plan.mode != "tile" or plan.tile is None:
        return False
    return task_k(plan) * plan.tile[2] <= STAGE_OVER_L2_BYTES and stage_tasks(replace(plan, l2=0))


#: One- and two-byte transposes, and wider ones whose source rows lie more
#: than CLOSE_ROW_BYTES apart, go through L2 from this many bytes (or
#: stream_min_total when that is lower, as tests set it), since the rows
#: streamed from the L2 buffers ask for their partial lines ahead (tile.c,
#: DMLS_PARTIAL_AHEAD): in one process on the same buffers, alternating (2
#: threads, 5 rounds, the old plan against itself as a control: 1.00x), 2-D
#: uint8, int16 and float16 transposes of 21-30 MB ran 1.25-1.89x faster
#: through L2 (8 of 12 unnamed copies of 16-33 MB whose plan changed), a
#: fresh 7 of 17-31 MB 1.23x by geometric mean (2-D ones 1.22-1.67x, NHWC to
#: NCHW int16 and float16 ones 0.98-1.03x); copies of 9-16 MB 1.02x
#: (0.78-1.39x, 8).  Four- and eight-byte ones, once long source rows in
#: the L2 buffers no longer went through nt_shifted: 2-D transposes and 3-D
#: to 5-D permutations of 18-31 MB 1.08-1.78x (12, 1.32x by geometric mean
#: over three sets); pixels close together (NHWC to NCHW gathers of 9-41
#: float32, uint32 and float64 channels) 0.81-1.11x keep 32 MiB.
TILE_L2_EARLY_MIN_TOTAL = 1 << 24
#: One- and two-byte ones whose source rows lie more than CLOSE_ROW_BYTES
#: apart (a 2-D transpose's) take them from 8 MiB, where they start to
#: stream (TRANSPOSE_STREAM_EIGHTHS_NARROW).  In one process on the same
#: buffers, alternating (2 threads, 3 rounds, the old plan against itself as
#: a control: 0.97-1.05x), unnamed uint8, int16 and float16 transposes of
#: 8.4-16.7 MB so planned ran 1.44x faster by geometric mean (19, 0.92-1.93x;
#: the two under 1.0 source rows of 162 and 344 bytes, which keep 16 MiB),
#: and with the rule a fresh 28 of 2-D and 3-D ones 1.52x (1.20-1.89x, none
#: slower: 6.5-8.2 -> 10-13 GB/s).
TILE_L2_FAR_NARROW_MIN_TOTAL = 8 << 20
#: (pixels of an NHWC copy: see TILE_L2_EARLY_MIN_TOTAL; tile.c's
#: DMLS_CLOSE_ROW_BYTES)
CLOSE_ROW_BYTES = 1024


def tile_through_l2(plan: KernelPlan) -> bool:
    """Whether a streaming transpose goes through L2 (plan.h): from
    stream_min_total bytes, where source and destination together are
    twice the L3, most from TILE_L2_EARLY_MIN_TOTAL (see there), and those
    with source rows far apart from where they start to stream
    (TILE_L2_WIDE_MIN_TOTAL, TILE_L2_FAR_BYTE_MIN_TOTAL,
    TILE_L2_FAR_NARROW_MIN_TOTAL).  Before
    that bound, below stream_min_total the cached tile with streaming stores
    ran 1.06x faster (geometric mean of 11 gathers and scatters of 14-23 MB,
    0.53 -> 0.57 of the memcpy limit: 40 float32 channels of 171 x 173
    pixels 0.68 -> 0.86, 40 float16 channels 0.47 -> 0.60; three rows
    slower, 2047 x 3001 float32 scattered 0.51 -> 0.42); about even at
    35-40 MB, slower from 57 MB.

    Destination rows that are neither line-aligned nor back to back take
    ordinary stores on the tile path, each paying a read for ownership;
    through L2 they are written whole, a row at a time, with streaming
    stores for their whole lines (an NHWC to NCHW int16 gather with rows
    off line boundaries measured 0.57 -> 0.80 of the memcpy limit, a
    2500 x 3100 float64 transpose 0.61 -> 0.83).  Small channel counts take
    their own path, never this one; nor do source rows (pixels) shorter than
    L2_TILE_MIN_SOURCE_ROW, whose copy to L2 is a line or less per row: the
    cached tile with ordinary stores ran 1.2-1.7x faster (NHWC to NCHW
    gathers of 36-96 MB: int16 with 12 or 24 channels 0.61 -> 1.0 and 0.82 ->
    1.0 of the memcpy limit, 12 float32 0.78 -> 0.95, 24-48 uint8 0.57-0.69 ->
    0.78-0.89).
    """
    return tile_l2_shape(plan) and plan.tile[2] % 64 != 0


def tile_l2_shape(plan: KernelPlan) -> bool:
    """Whether a streaming tile plan is one tile_through_l2 would take were
    its destination rows off line boundaries: its size, rows and runs."""
    if plan.mode != "tile" or not plan.stream or plan.tile is None:
        return False
    far = plan.inner[1] > CLOSE_ROW_BYTES
    if plan.width >= 4 and far:
        least = TILE_L2_WIDE_MIN_TOTAL
    elif far:
        least = TILE_L2_FAR_BYTE_MIN_TOTAL if plan.width == 1 else TILE_L2_FAR_NARROW_MIN_TOTAL
    elif plan.width <= 2:
        least = TILE_L2_EARLY_MIN_TOTAL
    else:
        least = stream_min_total
    if plan.dst_bytes < min(stream_min_total, least):
        return False
    _, kss, kds = plan.tile
    k = task_k(plan)
    w = plan.width
    # (Short rows back to back go out as one run: in whole micro-blocks up to
    # 1 KiB, and up to the rows whose band reads whole source lines
    # (CONTIG_BAND_BYTES); through a tile of whole micro-blocks up to 512
    # bytes otherwise, when there are RAGGED_MIN_ROWS of them or more, and
    # fewer of at most L2_RAGGED_ROW bytes take the cached tile.)
    n = plan.inner[0]
    whole = n % (16 // w) == 0
    contiguous = kds == n * w and (kds <= min(1024, CONTIG_BAND_BYTES * w // 64) if whole else
                                   kds <= L2_RAGGED_ROW or (kds <= 512 and k >= RAGGED_MIN_ROWS))
    return (k > SMALL_TILE and k * w >= L2_TILE_MIN_SOURCE_ROW and kss == w and plan.inner[2] == w
            and not contiguous and not (w == 8 and n * w <= L2_WIDE_SHORT_ROW))


def plain_transpose_tile(plan: KernelPlan) -> bool:
    """Whether a plan is a tile not through L2 whose k is contiguous in the
    source and j in the destination (a 2-D transpose, or one like it)."""
    return (plan.mode == "tile" and plan.tile is not None and not plan.l2
            and plan.tile[1] == plan.width and plan.inner[2] == plan.width)


def memory_tile_segments(plan: KernelPlan) -> bool:
    """Whether a tile plan takes MEMORY_TILE_SEGMENT values per segment:
    TRANSPOSE_FROM_MEMORY bytes or more (or streaming), source rows of a line
    or more, destination rows off line boundaries (the plain tile path of
    tile.c, not the line-aligned streaming one), no L2 buffers, and rows of at
    least four such segments."""
    if not plain_transpose_tile(plan):
        return False
    k, _, kds = plan.tile
    return ((plan.stream or plan.dst_bytes >= TRANSPOSE_FROM_MEMORY) and k * plan.width >= 64 and kds % 64 != 0
            and plan.inner[0] >= 4 * MEMORY_TILE_SEGMENT)


def tall_tile_segments(plan: KernelPlan) -> bool:
    """Whether a tile plan takes TALL_TILE_SEGMENT values per segment: one- or
    two-byte values, TALL_TILE_MIN bytes or more, not streaming and not through
    L2, source rows of more than 128 bytes, destination rows a multiple of 2 KiB
    apart."""
    if not plain_transpose_tile(plan) or plan.stream or plan.width > 2:
        return False
    return plan.inner[1] > 128 and plan.dst_bytes >= TALL_TILE_MIN and plan.tile[2] % 2048 == 0


#: A transpose into destination rows back to back of at most this many bytes
#: (pixels of an NCHW to NHWC copy) keeps its rows whole (whole_short_pixels).
WHOLE_PIXEL_BYTES = 1024


def whole_short_pixels(plan: KernelPlan) -> bool:
    """Whether a tile plan's rows of j stay whole, one segment: destination
    rows back to back (the pixels of an NCHW to NHWC copy) of at most
    WHOLE_PIXEL_BYTES, not through L2.  Threads share such a copy by pieces
    of k instead (split_tile_rows), each writing whole pixels.

    Cut into segments of 64 values, 72 float16 channels went out as tasks of
    64 channels and tasks of 8 (16 of each 144-byte pixel, on lines the other
    task writes too), neither of them rows back to back for the kernels of
    short rows: in one process on the same buffers, alternating (2 threads),
    23 NCHW to NHWC gathers and scatters of 66-700 channels (pixels of 66
    bytes to 1 KB, 5.8-80 MB), 25 measurements, ran 1.50x faster by geometric
    mean, 1.02-3.02x in 24 (a 24 MB float16 gather of 72 channels 0.21 ->
    0.44 of the memcpy limit), 0.73x once (a 700-channel uint8 gather, 1.36x
    and 1.75x in two later rounds); images of 0.6-0.7 MB in cache, whole,
    0.95-0.96x.  Only where the whole copy's k (all its images' pixels) gives
    MIN_TILE_TASKS tasks MIN_TILE_ROWS of it each (a 371 x 371 matrix keeps
    its segments), a count that cutting k into pieces or an outer dimension
    leaves as it was.
    """
    return (plan.mode == "tile" and plan.tile is not None and not plan.l2
            and plan.tile[2] == plan.inner[0] * plan.width and plan.inner[0] * plan.width <= WHOLE_PIXEL_BYTES
            and plan.outer_count * plan.tile[0] >= MIN_TILE_TASKS * MIN_TILE_ROWS)


def wide_band_segments(plan: KernelPlan) -> bool:
    """Whether a tile plan's segments take at least WIDE_BAND_BYTES of each
    destination row: two-byte values, streaming, not through L2,
    source rows more than 1 KiB apart, destination rows a multiple of 512
    bytes apart and rows of at least that many bytes."""
    if not plain_transpose_tile(plan) or not plan.stream or plan.width != 2:
        return False
    n, iss, _ = plan.inner
    return iss > 1024 and plan.tile[2] % 512 == 0 and n * plan.width >= WIDE_BAND_BYTES


#: Streaming one-byte transposes from source rows at most CLOSE_ROW_BYTES
#: apart into destination rows of whole lines (an NHWC to NCHW uint8 gather
#: into planes of 224 x 224, 256 x 256 or 56 x 64 pixels; a 2-D uint8
#: transpose from rows of under 1 KiB) take segments of this many values: the
#: line-aligned bands (tile.c) then read each task's source as one run of 16
#: bands, asking for each next band as they go, where segments of 64-128
#: values (SEGMENT_ELEMS over a few hundred channels) made a task one or two
#: bands and a run of its own: the copies of the size and shape that go
#: through L2 where their rows are off line boundaries (tile_l2_shape), whose
#: segments are as long.  Two builds side by side
#: (benchmarks/compare_builds.py, 2 threads, two passes of 3 repeats), 17
#: unnamed such gathers of 18-70 MB with 159-954 channels ran 1.40x faster by
#: geometric mean (0.97-2.21x, 16 faster; 782 channels of 173 x 64 7.4 -> 15.0
#: GB/s), 1.04-2.30x in two earlier sets (9 and 10), and 2-D transposes from
#: rows of 375-1022 bytes 1.10-2.25x (24); with the contiguous tile's rule of
#: tile.c (byte_bands), a fresh 28 of 18-65 MB (gathers, 2-D transposes, NCHW
#: to NHWC scatters) 1.52x (1.10-1.99x, all faster).  Wider values measured
#: 0.88-1.04x (12 gathers), one-byte transposes from rows further apart
#: 0.83-1.11x (22), and keep theirs.
BYTE_BAND_SEGMENT = 1024


def byte_band_segments(plan: KernelPlan) -> bool:
    """Whether a tile plan takes segments of BYTE_BAND_SEGMENT values: one-byte
    values, streaming, not through L2, source rows at most CLOSE_ROW_BYTES
    apart, destination rows of whole lines, of the shape and size that
    tile_l2_shape takes."""
    return (plan.width == 1 and not plan.l2 and tile_l2_shape(plan)
            and plan.inner[1] <= CLOSE_ROW_BYTES and plan.tile[2] % 64 == 0)


def streamed_pixel_segments(plan: KernelPlan) -> bool:
    """Whether a tile plan's segments go up to STREAM_TILE_ROW_BYTES of each
    destination row: two-byte values, streaming, not through L2, source rows
    at most STREAM_TILE_MAX_SOURCE_ROW bytes apart."""
    return (plan.mode == "tile" and plan.stream and not plan.l2 and plan.width == 2
            and plan.inner[1] <= STREAM_TILE_MAX_SOURCE_ROW)


def longest_tiles(plan: KernelPlan, upto: int, above: int, enough_tasks: bool = True) -> int:
    """The longest whole 64-value tiles of at most ``upto`` and more than
    ``above`` values whose segments give MIN_TILE_TASKS tasks (the longest of
    them at all when ``enough_tasks`` is false); 0 where none does."""
    for longer in range(upto - upto % 64, above, -64):
        if not enough_tasks or -(-plan.inner[0] // longer) * plan.outer_count >= MIN_TILE_TASKS:
            return longer
    return 0


def split_segments(plan: KernelPlan, longest: int | None = None) -> None:
    """Cut long rows into segments of about SEGMENT_ELEMS elements (tasks);
    through L2, destination runs of at least L2_TILE_RUN bytes; none longer
    than ``longest`` values when it is given."""
    inner_n = plan.inner[0]
    k = task_k(plan)
    if plan.mode == "nibble" or inner_n * k <= SEGMENT_ELEMS or whole_short_pixels(plan):
        plan.segment_len = inner_n
    else:
        low = -(-L2_TILE_RUN // plan.width // 64) * 64 if plan.l2 else 64
        plan.segment_len = min(inner_n, max(low, (SEGMENT_ELEMS // k) // 64 * 64))
        if plan.l2:  # at most as many rows as leave room for a chunk of k
            plan.segment_len = min(plan.segment_len, BLOCK_L2_ROOM // 128 // 64 * 64)
        elif byte_band_segments(plan):
            plan.segment_len = max(plan.segment_len, min(inner_n, BYTE_BAND_SEGMENT))
        elif tall_tile_segments(plan) and inner_n >= 2 * TALL_TILE_SEGMENT:
            plan.segment_len = max(plan.segment_len, TALL_TILE_SEGMENT)
        elif memory_tile_segments(plan):
            # When the rows are cut again for more tasks (split_tile_rows:
            # longest), the longest whole tiles that still give
            # MIN_TILE_TASKS of them, if any are longer than 64 values.
            cap = MEMORY_TILE_SEGMENT if longest is None else min(MEMORY_TILE_SEGMENT, longest)
            plan.segment_len = max(plan.segment_len, longest_tiles(plan, cap, 64, longest is not None))
        if wide_band_segments(plan):
            plan.segment_len = max(plan.segment_len, WIDE_BAND_BYTES // plan.width)
        if streamed_pixel_segments(plan):
            # The longest segments up to STREAM_TILE_ROW_BYTES that still
            # give MIN_TILE_TASKS tasks, if longer than those above.
            want = min(inner_n, STREAM_TILE_ROW_BYTES // plan.width)
            plan.segment_len = max(plan.segment_len, longest_tiles(plan, want, plan.segment_len))
    if longest is not None:
        plan.segment_len = min(plan.segment_len, longest)
    plan.segments = -(-inner_n // plan.segment_len)
    plan.tasks = plan.outer_count * plan.segments * plan.tile_pieces


def staged_split(dims: list[Dim], side: int):
    """Split dims (size, source, destination strides in nibbles) into staging
    blocks, or None.

    ``side`` 1: the source holds nibbles, 2: the destination does.  That side
    must be packed in some order (its strides, sorted, are running products
    of the sizes).  Returns (outer dims, block dims, block elements): every
    block is one contiguous run of nibbles of at most STAGE_ELEMS elements.
    """
    order = sorted(dims, key=lambda t: t[side], reverse=True)
    running = 1
    for n, a, b in reversed(order):
        if (a, b)[side - 1] != running:
            return None
        running *= n
    block: list[Dim] = []
    elems = 1
    i = len(order) - 1
    while i >= 0 and elems * order[i][0] <= STAGE_ELEMS:
        elems *= order[i][0]
        block.insert(0, order[i])
        i -= 1
    outer = list(order[:i + 1])
    if outer:
        # Chunk the next dimension by the largest divisor that still fits.
        n, a, b = outer[-1]
        c = STAGE_ELEMS // elems
        while c > 1 and n % c:
            c -= 1
        if c > 1:
            outer[-1] = (n // c, a * c, b * c)
            block.insert(0, (c, a, b))
            elems *= c
    return outer, block, elems


def block_runs(block: list[Dim], side: int):
    """Runs of a staged block as seen from one side (1: source, 2: destination).

    The block is laid out in the stage packed in that side's order (its dims
    sorted by that side's stride).  Returns (stage strides of each block dim,
    :class:`Runs`).
    """
    order = sorted(range(len(block)), key=lambda i: block[i][side], reverse=True)
    stage = [0] * len(block)
    running = 1
    for i in reversed(order):
        stage[i] = running
        running *= block[i][0]
    # Merge the fastest dims while they are contiguous on this side too.
    run = 1
    k = len(order) - 1
    while k >= 0 and block[order[k]][side] == run:
        run *= block[order[k]][0]
        k -= 1
    return stage, Runs(run=run, outer=[(block[i][0], stage[i], block[i][side]) for i in order[:k + 1]])


def plan_staged(split, src_nibble: bool, dst_nibble: bool, sign_extend: bool, count: int,
                extent: tuple[int, int]) -> CopyPlan:
    """A staged 4-bit copy of the blocks of ``split`` (see :func:`staged_split`)."""
    outer, block, elems = split
    # Block-relative strides: the nibble side is the staging buffer (bytes).
    bsizes = [n for n, _, _ in block]
    bsrc = [a for _, a, _ in block]
    bdst = [b for _, _, b in block]
    main = KernelPlan(mode="nibble", width=1, outer=outer, inner=(elems, 1, 1),
                      segment_len=elems, segments=1, dst_bytes=count,
                      src_nibble=src_nibble, dst_nibble=dst_nibble, sign_extend=sign_extend)
    main.tasks = main.outer_count
    plan = CopyPlan(kind="staged", main=main, src_extent=extent[0], dst_extent=extent[1])
    if src_nibble and dst_nibble:
        # Each side's nibbles go through its own stage, packed in that side's
        # order; the byte plan reorders one stage into the other.
        bsrc, plan.src_runs = block_runs(block, 1)
        bdst, plan.dst_runs = block_runs(block, 2)
        plan.kind = "staged_both"
        # Blocks start, and destination runs start and end, on even nibbles.
        plan.whole_bytes = plan.dst_runs.run % 2 == 0 and all(
            b % 2 == 0 for _, _, b in outer + plan.dst_runs.outer)
    plan.sub = plan_bytes(bsizes, bsrc, bdst, 1)
    return plan


def plan_nibbles(sizes, src_strides, dst_strides, src_nibble, dst_nibble, sign_extend, extent):
    """The plan of a 4-bit copy: staged blocks where a nibble side is packed
    in some order, else element by element."""
    count = math.prod(sizes)
    dims = [(n, a, b) for n, a, b in zip(sizes, src_strides, dst_strides) if n > 1]
    sides = []
    if src_nibble != dst_nibble:
        sides = [1 if src_nibble else 2]
    elif src_nibble:
        # Nibbles on both sides: blocks contiguous on whichever side is
        # packed in some order, unpacked and repacked run by run.
        sides = [1, 2]
    for side in sides if dims else []:
        split = staged_split(dims, side)
        if split is not None and split[2] >= STAGE_MIN_ELEMS:
            return plan_staged(split, src_nibble, dst_nibble, sign_extend, count, extent)
    merged = merge_dims(list(zip(sizes, src_strides, dst_strides))) or [(1, 1, 1)]
    main = KernelPlan(mode="nibble", width=1, outer=merged[:-1], inner=merged[-1], dst_bytes=count,
                      src_nibble=src_nibble, dst_nibble=dst_nibble, sign_extend=sign_extend)
    split_segments(main)
    return CopyPlan(kind="plain", main=main, src_extent=extent[0], dst_extent=extent[1])


#: Element-by-element plans (MODE strided: both sides' fastest dimensions
#: short and different, a 5-D or 6-D permutation of small dimensions) of
#: at least SLAB_MIN_TOTAL bytes go in slabs through a buffer instead
#: (plan_slabs), where such a plan is found.  In one process on the same
#: buffers, the two plans alternating (2 threads, 5 rounds): of unnamed
#: copies of 8-70 MB planned element by element, the 34 of two sets that
#: take slabs ran 2.08x faster by geometric mean (0.79-8.3x; a uint8
#: scatter whose last two dimensions swap 2 x 2 values 1.1 -> 6.1 GB/s), a
#: fresh 11 of 24 2.02x (1.08-5.9x, every one faster), and 16 of
#: 0.05-6 MB 3.1x (1.3-7.1x).
SLAB_COPIES = True
SLAB_MIN_TOTAL = 1 << 16
#: ... (four- and eight-byte values: whose tasks move fewer bytes than this;
#: 5 such copies with longer tasks ran 0.60-1.41x in slabs, a float64
#: scatter whose tasks of 87 x 2 rows moved 18.8 GB/s element by element 0.60x)
SLAB_WIDE_TASK_BYTES = 512
#: ... the channels: the fastest dimension of one side, of at most
#: SLAB_MAX_CHANNELS values ...
SLAB_MAX_CHANNELS = 16
#: ... slabs of at most SLAB_BYTES (within the C side's DMLS_SLAB_BYTES)
#: and at least SLAB_MIN_BYTES.  Against 128 KiB, in one process, the two
#: plans alternating (2 threads, 4 rounds): 26 unnamed copies of 8-70 MB
#: whose slabs change 1.13x faster by geometric mean (0.75-2.47x), a fresh
#: 21 1.05x (0.94-1.68x), 9 of 0.05-6 MB 1.10x; 64 KiB measured 0.96x.
SLAB_BYTES = 1 << 18
SLAB_MIN_BYTES = 1 << 12
#: ... and whose steps move at least SLAB_TASK_GAIN times the bytes a task
#: of the kernel plan moved.
SLAB_TASK_GAIN = 2


def takes_slabs(main: KernelPlan) -> bool:
    """Whether a copy's kernel plan is one that plan_slabs may replace: one
    that goes element by element, of values of four bytes or more only with
    tasks of under SLAB_WIDE_TASK_BYTES."""
    return (SLAB_COPIES and main.mode == "strided" and main.dst_bytes >= SLAB_MIN_TOTAL
            and (main.width < 4 or main.dst_bytes < SLAB_WIDE_TASK_BYTES * main.tasks))


def slab_dims(merged: list[Dim], width: int, ch: Dim, side: int) -> tuple[list[Dim], list[Dim]]:
    """(the dimensions of a slab, channels ``ch`` first; the others) for a
    copy of ``merged`` dimensions: in turn, the next fastest dimension of
    each side, the channels' side (1 source, 2 destination) first, while
    the slab stays within SLAB_BYTES; of a dimension too long for that, the
    largest part that fits (its size's largest such divisor), the rest of
    it left outside."""
    orders = [sorted(merged, key=lambda t: (t[1], t[2])), sorted(merged, key=lambda t: (t[2], t[1]))]
    slab, rest, nbytes = [ch], [d for d in merged if d is not ch], ch[0] * width
    heads, growing = [0, 0], [True, True]
    while any(growing):
        for o in (side - 1, 2 - side):
            order = orders[o]
            while heads[o] < len(order) and order[heads[o]] not in rest:
                heads[o] += 1
            if not growing[o] or heads[o] >= len(order):
                growing[o] = False
                continue
            d = order[heads[o]]
            if nbytes * d[0] <= SLAB_BYTES:
                slab.append(d)
                rest.remove(d)
                nbytes *= d[0]
                continue
            k = max((k for k in range(2, d[0]) if d[0] % k == 0 and nbytes * k <= SLAB_BYTES), default=0)
            if k:
                slab.append((k, d[1], d[2]))
                rest[rest.index(d)] = (d[0] // k, d[1] * k, d[2] * k)
                nbytes *= k
            growing[o] = False
    return slab, rest


def slab_step(q: KernelPlan) -> bool:
    """Whether a step of a slab plan moves runs: not element by element, nor
    a transpose whose rows are not contiguous on their side (a float16
    gather whose first step would have transposed rows of every other value
    ran 0.60x in slabs); and in the buffer's region only (no L2 buffers,
    no streaming stores)."""
    if q.l2 or q.stream or q.stage_tasks or (q.block is not None and (q.block.whole or q.block.join)):
        return False
    if q.mode == "tile":
        return q.tile[1] == q.width and q.inner[2] == q.width
    if q.mode == "interleave":
        return q.width in (q.inner[1], q.inner[2])
    return q.mode != "strided"


def plan_slabs(dims: list[Dim], width: int, main: KernelPlan, extent: tuple[int, int]) -> CopyPlan | None:
    """A plan of slabs through a buffer for a copy whose kernel plan ``main``
    goes element by element, or None.

    The channels are the fastest dimension of one side (of at most
    SLAB_MAX_CHANNELS values, not the other side's fastest).  Each slab (the
    channels and a few dimensions around both sides' fastest, slab_dims)
    goes through the thread's buffer with its channels as planes, each
    plane in the channels' side's order.  Channels on the destination side:
    the first step (sub) permutes the planes, the second (sub2) interleaves
    them into the destination's pixels.  Channels on the source side: the
    first pulls them apart into planes, the second permutes those.  One
    step of each has a whole plane's run on a side; the other, the
    permutation without its channels, finds longer runs than the copy had.
    Of the two sides the one whose steps take more bytes a task, where that
    is at least twice the kernel plan's."""
    merged = merge_dims(dims)
    if len(merged) < 3 or any(a == 0 or b == 0 for _, a, b in merged):
        return None
    best = None
    for side in (2, 1):
        ch = next((d for d in merged if d[side] == width), None)
        if ch is None or ch[0] > SLAB_MAX_CHANNELS or ch[3 - side] == width:
            continue
        if not any(d[3 - side] == width for d in merged):
            continue
        slab, outer = slab_dims(merged, width, ch, side)
        planes = slab[1:]
        plane = math.prod(n for n, _, _ in planes)
        if plane * ch[0] * width < SLAB_MIN_BYTES:
            continue
        # the buffer: plane after plane, each in the channels' side's order
        at: dict[int, int] = {}
        step = width
        for i in sorted(range(len(planes)), key=lambda i: planes[i][side]):
            at[i] = step
            step *= planes[i][0]
        first = [(n, a, at[i]) for i, (n, a, _) in enumerate(planes)] + [(ch[0], ch[1], step)]
        second = [(n, at[i], b) for i, (n, _, b) in enumerate(planes)] + [(ch[0], step, ch[2])]
        sub, sub2 = plan_dims(first, width), plan_dims(second, width)
        if not all(slab_step(q) for q in (sub, sub2)):
            continue
        outer = sorted(outer, key=lambda t: (t[2], t[1]), reverse=True)
        slabs = math.prod(n for n, _, _ in outer)
        nbytes = plane * ch[0] * width
        task = min(nbytes // sub.tasks, nbytes // sub2.tasks)
        if best is None or task > best[0]:
            head = KernelPlan(mode="memcpy", width=width, outer=outer, inner=(1, width, width),
                              segment_len=1, segments=1, tasks=slabs, dst_bytes=slabs * nbytes)
            reach = lambda ds_: extents([n for n, _, _ in ds_], [a // width for _, a, _ in ds_],
                                        [b // width for _, _, b in ds_], 8 * width, False, False)
            best = (task, CopyPlan(kind="slabs", main=head, src_extent=extent[0], dst_extent=extent[1],
                                   sub=sub, sub2=sub2, sub_extent=reach(first), sub2_extent=reach(second)))
    if best is None or best[0] < SLAB_TASK_GAIN * main.dst_bytes // main.tasks:
        return None
    return best[1]


def plan_copy(sizes, src_strides, dst_strides, element_bits: int, src_nibble: bool = True,
              dst_nibble: bool = True, sign_extend: bool = False) -> CopyPlan:
    """Plan a copy of ``sizes`` elements between two strided layouts.

    Strides are in elements; ``element_bits`` is 4, 8, 16, 32 or 64.  For
    4-bit types, ``src_nibble``/``dst_nibble`` say whether each side holds
    packed nibbles or one element per byte, and ``sign_extend`` widens INT4
    into bytes.  Raises ValueError for arguments no descriptor can produce.
    """
    ndim = len(sizes)
    if ndim < 1 or ndim > MAX_DIMS or len(src_strides) != ndim or len(dst_strides) != ndim:
        raise ValueError(f"plan: sizes and strides must have 1 to {MAX_DIMS} matching entries")
    if element_bits not in (4, 8, 16, 32, 64):
        raise ValueError(f"plan: element_bits is {element_bits}; expected 4, 8, 16, 32 or 64")
    sizes = [int(n) for n in sizes]
    src_strides = [int(a) for a in src_strides]
    dst_strides = [int(b) for b in dst_strides]
    if any(n < 1 for n in sizes) or any(a < 0 for a in src_strides) or any(b < 0 for b in dst_strides):
        raise ValueError("plan: sizes must be >= 1 and strides >= 0")
    # Extents stay exact Python ints: a plan whose extent exceeds every
    # possible buffer is refused by the range check before any memory is
    # touched.
    extent = extents(sizes, src_strides, dst_strides, element_bits, src_nibble, dst_nibble)
    if element_bits == 4:
        return _settle_l2_lines(plan_nibbles(sizes, src_strides, dst_strides, bool(src_nibble),
                                             bool(dst_nibble), bool(sign_extend), extent))
    width = element_bits // 8
    dims = list(zip(sizes, [a * width for a in src_strides], [b * width for b in dst_strides]))
    main = plan_dims(dims, width)
    slabs = plan_slabs(dims, width, main, extent) if takes_slabs(main) else None
    if slabs is not None:
        return _settle_l2_lines(slabs)
    plan = CopyPlan(kind="plain", main=main, src_extent=extent[0], dst_extent=extent[1])
    cut = split_for_block(main, dims, width)
    if cut is not None:
        plan.main, plan.rest, plan.rest_src, plan.rest_dst, rest_dims = cut
        plan.rest_extent = extents([n for n, _, _ in rest_dims], [a // width for _, a, _ in rest_dims],
                                   [b // width for _, _, b in rest_dims], element_bits, src_nibble, dst_nibble)
    return _settle_l2_lines(plan)


def _settle_l2_lines(plan: CopyPlan) -> CopyPlan:
    """Set l2_lines on each kernel plan of ``plan``, once their L2 modes and
    groups are final."""
    for m in (plan.main, plan.rest, plan.sub, plan.sub2):
        if m is not None:
            m.l2_lines = l2_lines(m)
    return plan


def _l2_chunk(m: KernelPlan) -> tuple[int, int]:
    """Values of j and of k per L2 chunk of a plan that goes through L2 (else (0, 0))."""
    if not m.l2:
        return 0, 0
    if m.block is not None:
        return block_chunks(m.width, m.block.j_elems, m.block.k_elems, in_place=m.l2 == 2, lines=m.l2_lines)
    assert m.tile is not None
    return block_chunks(m.width, m.segment_len, task_k(m), tile=True, in_place=l2_reads_in_place(m.inner[1]),
                        lines=m.l2_lines)


def describe(plan: CopyPlan) -> dict:
    """A dict describing the plan (for tests and the benchmark)."""
    m = plan.main
    if plan.kind == "slabs":
        # main's outer dimensions are the slabs; sub and sub2 copy one
        return {**describe(replace(plan, kind="plain")), "mode": "slabs",
                "sub": describe(CopyPlan("plain", plan.sub, 0, 0)),
                "sub2": describe(CopyPlan("plain", plan.sub2, 0, 0))}
    info = {
        "mode": "staged" if plan.kind != "plain" else m.mode,
        "width": m.width,
        "outer": list(m.outer),
        "inner": tuple(m.inner),
        "tile": tuple(m.tile) if m.tile is not None and m.mode in ("tile", "interleave", "strided", "memcpy") else None,
        "tile_pieces": (m.tile_pieces, m.tile_piece) if m.tile_pieces > 1 else None,
        "tasks": m.tasks,
        "segment": m.segment_len,
        "stream": bool(m.stream),
        "l2": ("none", "source", "both")[m.l2],
        "stage_tasks": bool(m.stage_tasks),
        "l2_chunk": _l2_chunk(m),
        "l2_lines": m.l2_lines,
        "both_nibbles": plan.kind == "staged_both",
        "whole_bytes": bool(plan.whole_bytes),
        "rest": None if plan.rest is None else {"mode": plan.rest.mode, "src": plan.rest_src,
                                                "dst": plan.rest_dst},
    }
    if m.block is not None:
        info["block"] = {"j": list(m.block.j), "k": list(m.block.k),
                         "staged": (bool(m.block.stage_src), bool(m.block.stage_dst)),
                         "lines": m.block.lines, "whole": bool(m.block.whole),
                         "next": bool(m.block.next), "dst_ahead": bool(m.block.dst_ahead),
                         "dst_pieces": bool(m.block.dst_pieces), "far": bool(m.block.far),
                         "join": m.block.join}
    return info
