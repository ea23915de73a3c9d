"""Build script: the engine extension from its Cython bridge and C sources.

All Cython compiler directives live here, in one place.  dmlstride._engine is
dmlstride/_engine.pyx (the typed bridge) compiled together with every C file
in dmlstride/src (the kernels, the thread pool, the output allocator).

Build switches (environment variables):

* DMLSTRIDE_NO_THREADS=1: a single-threaded engine (as on platforms without
  pthreads);
* DMLSTRIDE_NO_SIMD=1: the generic kernels only (no SSE2/SSSE3 variants);
* DMLSTRIDE_EXTRA_CFLAGS / DMLSTRIDE_EXTRA_LDFLAGS: extra compiler and linker
  flags (the sanitizer build uses them).

The wheel targets the baseline of the platform (no -march=native): on x86-64
the SSE2 kernels are always compiled in, SSSE3 ones are chosen at run time.
"""

import glob
import os
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

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
extra_compile += os.environ.get("DMLSTRIDE_EXTRA_CFLAGS", "").split()
extra_link += os.environ.get("DMLSTRIDE_EXTRA_LDFLAGS", "").split()
# NumPy >= 2 at run time: its whole C API (the memory handler API needs 1.22).
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("NPY_TARGET_VERSION", "NPY_2_0_API_VERSION")]
if os.environ.get("DMLSTRIDE_NO_THREADS"):
    macros.append(("DMLSTRIDE_NO_THREADS", "1"))
if os.environ.get("DMLSTRIDE_NO_SIMD"):
    macros.append(("DMLSTRIDE_NO_SIMD", "1"))

C_SOURCES = sorted(glob.glob(os.path.join("dmlstride", "src", "*.c")))

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
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=COMPILER_DIRECTIVES,
    ),
)
