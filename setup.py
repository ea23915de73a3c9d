"""Build script: cythonizes the private kernel modules.

All Cython compiler directives live here, in one place.  The kernels split
large copies over a small pthread pool; DMLSTRIDE_NO_THREADS=1 builds a
single-threaded engine (as on platforms without pthreads).
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

# The conversion kernels (dmlstride/src/convert*.c, quant*.c): their own extension.
CONVERT_SOURCES = sorted(glob.glob("dmlstride/src/convert*.c") + glob.glob("dmlstride/src/quant*.c"))

extensions = [
    Extension(
        "dmlstride._engine",
        ["dmlstride/_engine.pyx"],
        include_dirs=[np.get_include()],
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

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=COMPILER_DIRECTIVES,
    ),
)
