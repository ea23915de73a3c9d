"""Build script: the engine extension from its Cython bridge and C sources.

All Cython compiler directives live here, in one place.  dmlstride._engine is
dmlstride/_engine.pyx (the typed bridge) compiled together with every C file
in dmlstride/src (the kernels, the thread pool, the output allocator).

Build switches (environment variables):

* DMLSTRIDE_NO_THREADS=1: a single-threaded engine (as on platforms without
  pthreads);
* DMLSTRIDE_NO_SIMD=1: the generic kernels only (no SSE2/SSSE3/AVX2 variants);
* DMLSTRIDE_EXTRA_CFLAGS / DMLSTRIDE_EXTRA_LDFLAGS: extra compiler and linker
  flags (the sanitizer build uses them), added last;
* DMLSTRIDE_DEBUG=1: keep debug information (release builds carry none);
* DMLSTRIDE_BUILD_JOBS=N: how many C files compile at once (default: one per
  CPU; the engine is some fifty files, so a two-core build takes about half
  the time of a serial one).

The wheel targets the baseline of the platform (no -march=native): on x86-64
the SSE2 kernels are always compiled in, SSSE3 and AVX2 ones are chosen at run time.
"""

import glob
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILER_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "initializedcheck": False,
    "cdivision": True,
    "embedsignature": True,
}


if sys.platform == "win32":
    extra_compile, extra_link = ["/O2"], []
else:
    extra_compile, extra_link = ["-O3", "-fno-strict-aliasing", "-pthread"], ["-pthread"]
    if os.environ.get("DMLSTRIDE_DEBUG"):
        extra_compile.append("-g")  # a debug build keeps its symbols and debug information
    else:
        # A release build carries no debug information (Python's own CFLAGS add -g) ...
        extra_compile.append("-g0")
        if sys.platform.startswith("linux"):
            extra_link.append("-s")  # ... and no symbol table beyond the exported ones.
extra_compile += os.environ.get("DMLSTRIDE_EXTRA_CFLAGS", "").split()
extra_link += os.environ.get("DMLSTRIDE_EXTRA_LDFLAGS", "").split()
# NumPy >= 2 at run time: its whole C API (the memory handler API needs 1.22).
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("NPY_TARGET_VERSION", "NPY_2_0_API_VERSION")]
if os.environ.get("DMLSTRIDE_NO_THREADS"):
    macros.append(("DMLSTRIDE_NO_THREADS", "1"))
if os.environ.get("DMLSTRIDE_NO_SIMD"):
    macros.append(("DMLSTRIDE_NO_SIMD", "1"))

# The conversion kernels (dmlstride/src/convert*.c, quant*.c): their own extension.
CONVERT_OWN = sorted(glob.glob("dmlstride/src/convert*.c") + glob.glob("dmlstride/src/quant*.c"))
# Everything else under dmlstride/src: the engine.
C_SOURCES = sorted(set(glob.glob("dmlstride/src/*.c")) - set(CONVERT_OWN))
# (The conversions run on the engine's thread pool and scratch memory, which
# _convert.pyx imports from _engine.)
CONVERT_SOURCES = CONVERT_OWN

extensions = [
    Extension(
        "dmlstride._engine",
        ["dmlstride/_engine.pyx", *C_SOURCES],
        include_dirs=[np.get_include()],
        depends=sorted(glob.glob(os.path.join("dmlstride", "src", "*.h"))),
        define_macros=macros,
        extra_compile_args=extra_compile,
        extra_link_args=extra_link,
    ),
    Extension(
        "dmlstride._convert",
        ["dmlstride/_convert.pyx", *CONVERT_SOURCES],
        include_dirs=[np.get_include()],
        depends=sorted(glob.glob("dmlstride/src/convert*.h")),
        define_macros=macros,
        # A multiply then an add, never fused: results match numpy's two roundings.
        extra_compile_args=[*extra_compile, "-ffp-contract=off"] if sys.platform != "win32" else extra_compile,
        extra_link_args=extra_link,
    ),
]


class BuildExt(build_ext):
    """Links without a run path: the engine needs none, and a wheel must not carry one.

    Some Python builds put ``-Wl,-rpath,<their lib folder>`` in the shared-object
    link command; it would end up in the wheel as the build machine's path.
    """

    def build_extensions(self) -> None:
        linker = getattr(self.compiler, "linker_so", None)
        if linker:
            self.compiler.linker_so = [arg for arg in linker if not arg.startswith("-Wl,-rpath")]
        if self.compiler.compiler_type == "unix":
            jobs = int(os.environ.get("DMLSTRIDE_BUILD_JOBS") or os.cpu_count() or 1)
            if jobs > 1:
                self.compiler.compile = _parallel_compile(self.compiler, jobs)
        super().build_extensions()


def _parallel_compile(compiler, jobs):
    """The unix compiler's ``compile``, with one extension's C files compiled ``jobs`` at a time.

    The same steps as distutils' own ``CCompiler.compile`` (its set-up, then one
    ``_compile`` per object), only spread over threads; each file is still one
    compiler process with the same arguments, and the first failure is raised.
    """

    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                extra_preargs=None, extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj):
            if obj in build:
                src, ext = build[obj]
                compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for _ in pool.map(one, objects):
                pass
        return objects

    return compile


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=cythonize(
        extensions,
        compiler_directives=COMPILER_DIRECTIVES,
    ),
)
