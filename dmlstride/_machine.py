"""What the planner needs to know of the machine it runs on.

Private module.  The size of the last-level (L3) cache, as the operating
system reports it: some of the planner's bounds between copying through the
caches and streaming to memory depend on it (see ``_planner.SMALL_L3``);
and the processor's vendor, family and model, where one kind of copy was
measured to stream slowly on one processor (see
``_planner.NT_ALIASED_ROWS_SLOW``).
"""

from __future__ import annotations

import os

#: Where Linux describes the processors (vendor_id, cpu family, model, ...).
CPUINFO = "/proc/cpuinfo"
#: Where Linux describes the caches of the first CPU (index0, index1, ...,
#: each with its ``level`` and ``size``).
CPU0_CACHES = "/sys/devices/system/cpu/cpu0/cache"

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_cache_size(text: str) -> int:
    """Bytes of a cache size as Linux writes it ("32768K", "1M", "512"); 0
    where the text is not one.

    >>> parse_cache_size("32768K")
    33554432
    >>> parse_cache_size("n/a")
    0
    """
    text = text.strip().upper()
    unit = text[-1:] if text[-1:] in ("K", "M", "G") else ""
    digits = text[:-1] if unit else text
    if not digits.isdigit():
        return 0
    return int(digits) * _UNITS[unit]


def l3_cache_bytes(caches: str = CPU0_CACHES) -> int:
    """The size of the first CPU's level-3 cache in bytes, as the system
    reports it (a virtual machine reports what its host tells it), or 0
    where there is none or it cannot be read (another operating system)."""
    try:
        entries = sorted(e for e in os.listdir(caches) if e.startswith("index"))
    except OSError:
        return 0
    for entry in entries:
        try:
            with open(os.path.join(caches, entry, "level")) as f:
                level = f.read().strip()
            if level != "3":
                continue
            with open(os.path.join(caches, entry, "size")) as f:
                return parse_cache_size(f.read())
        except OSError:
            continue
    return 0


def cpu_signature(cpuinfo: str = CPUINFO) -> tuple[str, int, int] | None:
    """(vendor, family, model) of the first processor, as Linux lists it
    ("AuthenticAMD", 25, 1 for an AMD EPYC 7003), or None where it cannot be
    read (another operating system, a field missing).

    >>> import os, tempfile
    >>> with tempfile.NamedTemporaryFile("w", delete=False) as f:
    ...     _ = f.write("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n")
    >>> cpu_signature(f.name)
    ('AuthenticAMD', 25, 17)
    >>> os.unlink(f.name)
    """
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                if not line.strip():
                    if fields:
                        break       # the first processor's entry ends
                    continue
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return None
    vendor, family, model = fields.get("vendor_id"), fields.get("cpu family", ""), fields.get("model", "")
    if not vendor or not family.isdigit() or not model.isdigit():
        return None
    return vendor, int(family), int(model)
