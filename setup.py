"""Build script: cythonizes the private kernel modules.

All Cython compiler directives live here, in one place.  The kernels split
large copies over a small pthread pool; DMLSTRIDE_NO_THREADS=1 builds a
single-threaded engine (as on platforms without pthreads).  Release builds
carry no debug information; DMLSTRIDE_DEBUG=1 builds with it.
DMLSTRIDE_EXTRA_CFLAGS and DMLSTRIDE_EXTRA_LDFLAGS are added last.
"""

import os
import sys

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

extensions = [
    Extension(
        "dmlstride._engine",
        ["dmlstride/_engine.pyx"],
        include_dirs=[np.get_include()],
        define_macros=macros,
        extra_compile_args=extra_compile,
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
        super().build_extensions()


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=cythonize(
        extensions,
        compiler_directives=COMPILER_DIRECTIVES,
    ),
)
