"""The machine facts the planner reads (dmlstride._machine), from a made-up
cache description as Linux lays it out."""

import pytest

from dmlstride import _machine, _planner


@pytest.mark.parametrize("text,expect", [
    ("32768K\n", 32 << 20), ("1M", 1 << 20), ("2G", 2 << 30), ("512", 512), ("48k", 48 << 10),
    ("", 0), ("K", 0), ("n/a", 0), ("-4K", 0), ("1.5M", 0),
])
def test_cache_sizes_as_linux_writes_them(text, expect):
    assert _machine.parse_cache_size(text) == expect


def _caches(root, entries):
    # entries: (level, size) per index directory; None for a file left out.
    for i, (level, size) in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir()
        if level is not None:
            (d / "level").write_text(f"{level}\n")
        if size is not None:
            (d / "size").write_text(f"{size}\n")
    return str(root)


def test_the_l3_is_the_level_3_entry(tmp_path):
    root = _caches(tmp_path, [(1, "48K"), (1, "32K"), (2, "2048K"), (3, "266240K")])
    assert _machine.l3_cache_bytes(root) == 266240 << 10


def test_no_l3_or_no_description_reads_0(tmp_path):
    for sub in "abc":
        (tmp_path / sub).mkdir()
    assert _machine.l3_cache_bytes(_caches(tmp_path / "a", [])) == 0
    assert _machine.l3_cache_bytes(_caches(tmp_path / "b", [(1, "32K"), (2, "1024K")])) == 0
    assert _machine.l3_cache_bytes(str(tmp_path / "missing")) == 0
    # an entry without its level or size is passed over
    assert _machine.l3_cache_bytes(_caches(tmp_path / "c", [(None, "8M"), (3, None), (3, "16M")])) == 16 << 20


def test_the_planner_reads_its_profile_from_the_l3():
    assert _planner.L3_BYTES == _machine.l3_cache_bytes()
    assert _planner.SMALL_L3 == (0 < _planner.L3_BYTES <= _planner.SMALL_L3_MAX_BYTES)
    for name, (small, large) in _planner.L3_BOUNDS.items():
        assert _planner.l3_bound(name, small_l3=True) == small
        assert _planner.l3_bound(name, small_l3=False) == large
        # a small L3 keeps copies in cache up to larger sizes, takes tall
        # block tiles for more widths, keeps one line of k a chunk where a
        # large one takes two (rows a multiple of 128 bytes apart), asks
        # for pixel bands into L1 where a large one asks into L2, keeps
        # broadcast rows of up to 4 KiB from streaming, and never streams
        # fills, which a large one streams, nor blocks of 4-32 KiB that are
        # one run of long rows, which a large one streams whole (0: off), and
        # streams whole the blocks of short rows that a large one keeps in
        # place (0: off), and streams copies whose rows lie apart from fewer
        # bytes, and one- and two-byte tiles whose rows alias from fewer
        # bytes, and blocks whole from fewer bytes (that L3 is shared)
        ascending = ("BLOCK_TALL_TILE_MIN_WIDTH", "L2_PHASE_LINES", "BAND_ASKS_L2", "FILL_STREAMS",
                     "BLOCK_WHOLE_ONE_RUN_MIN", "BLOCK_WHOLE_SHORT_ROW_BYTES", "COPY_STREAM_ROWS_EIGHTHS",
                     "TILE_STREAM_NARROW_ALIASED_SIXTEENTHS", "BLOCK_WHOLE_EIGHTHS")
        assert (small <= large) if name in ascending else (small >= large), name
    assert _planner.l3_bound("L2_PHASE_LINES", small_l3=True) == 1


_AMD = "processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: {model}\nmodel name\t: AMD EPYC\n\n"


def test_the_processor_is_the_first_entry_of_cpuinfo(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(_AMD.format(n=0, model=1) + _AMD.format(n=1, model=17))
    assert _machine.cpu_signature(str(path)) == ("AuthenticAMD", 25, 1)
    path.write_text("\n" + _AMD.format(n=0, model=17))        # a blank line first
    assert _machine.cpu_signature(str(path)) == ("AuthenticAMD", 25, 17)
    path.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n")
    assert _machine.cpu_signature(str(path)) == ("GenuineIntel", 6, 85)


@pytest.mark.parametrize("text", [
    "",                                                            # nothing
    "processor\t: 0\ncpu family\t: 25\nmodel\t\t: 1\n",            # no vendor
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\n",   # no family
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: x\n",
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\nmodel\t\t: 1\n",  # model in the next entry
])
def test_no_signature_where_cpuinfo_lacks_it(tmp_path, text):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    assert _machine.cpu_signature(str(path)) is None
    assert _machine.cpu_signature(str(tmp_path / "missing")) is None


@pytest.mark.parametrize("signature,slow", [
    (("AuthenticAMD", 25, 1), True),       # EPYC 7003 (Zen 3)
    (("AuthenticAMD", 25, 15), True),
    (("AuthenticAMD", 25, 17), False),     # EPYC 9004 (Zen 4)
    (("AuthenticAMD", 25, 97), False),
    (("AuthenticAMD", 23, 49), False),     # Zen 2
    (("GenuineIntel", 6, 85), False),
    (None, False),
])
def test_streams_to_aliased_rows_are_slow_on_zen_3_epyc_only(signature, slow):
    assert _planner._slow_aliased_streams(signature) is slow
