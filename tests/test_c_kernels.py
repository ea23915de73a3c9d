"""The C-level kernel tests (tests/c/test_kernels.c), built with the system C compiler.

The driver is compiled against the engine's C sources in this checkout
(dmlstride/src) and compares every kernel with a reference loop in C; see
the driver for what it covers.  It is built twice: with the default
instruction sets and with DMLSTRIDE_NO_SIMD (the generic kernels only, as on
other architectures).  Skipped only when no C compiler or no C sources are at
hand (an installed wheel without the repository checkout).
"""

import subprocess
import sys
from pathlib import Path

import pytest

from ccompiler import c_compiler

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "dmlstride" / "src"
DRIVER = ROOT / "tests" / "c" / "test_kernels.c"


def _compiler():
    cc = c_compiler()
    if not SRC.is_dir():
        pytest.skip(f"the C sources are not in this checkout ({SRC})")
    return cc


def kernel_sources():
    """Every C source of the engine except the numpy output allocator (it needs Python)."""
    return sorted(str(p) for p in SRC.glob("*.c") if p.name != "alloc.c" and not _conversion(p))


def conversion_sources():
    """The conversion kernels' C sources (their own extension)."""
    return sorted(str(p) for p in SRC.glob("*.c") if _conversion(p))


def _conversion(p: Path) -> bool:
    return p.name.startswith(("convert", "quant"))


@pytest.mark.skipif(sys.platform == "win32", reason="the driver uses pthreads")
@pytest.mark.parametrize("flags", [[], ["-DDMLSTRIDE_NO_SIMD"]], ids=["simd", "no-simd"])
def test_c_kernels(flags, tmp_path):
    cc = _compiler()
    exe = tmp_path / "test_kernels"
    build = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", *flags,
                            "-I", str(SRC), str(DRIVER), *kernel_sources(), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " 0 failures" in run.stdout
    if flags:
        assert "highest isa level 0" in run.stdout


def test_no_kernel_frame_takes_more_than_a_few_kib_of_stack(tmp_path):
    # Staging buffers live in the per-thread scratch arena: a copy on a thread
    # with a small stack (threading.stack_size) must not overflow it.
    cc = _compiler()
    probe = subprocess.run([cc, "-fstack-usage", "-x", "c", "-c", "-", "-o", str(tmp_path / "p.o")],
                           input="int f(void) { return 0; }\n", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{cc} has no -fstack-usage")
    frames = []
    for src in kernel_sources() + conversion_sources():
        obj = tmp_path / (Path(src).stem + ".o")
        build = subprocess.run([cc, "-O3", "-fstack-usage", "-pthread", "-c", src, "-o", str(obj)],
                               capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert build.returncode == 0, build.stderr
        for line in obj.with_suffix(".su").read_text().splitlines():
            where, size, kind = line.rsplit("\t", 2)
            frames.append((int(size), where, kind))
    assert frames
    assert max(frames)[0] <= 2048, sorted(frames)[-5:]
    assert not [f for f in frames if "dynamic" in f[2] and "bounded" not in f[2]]
