"""Build script: cythonizes the private kernel modules.

All Cython compiler directives live here, in one place.  OpenMP is used when
the compiler supports it; without it the kernels run single-threaded.
"""

import os
import sys
import tempfile
import subprocess

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


def _openmp_flags():
    """Return (compile_args, link_args) for OpenMP, or empty lists if unavailable."""
    if os.environ.get("DMLSTRIDE_NO_OPENMP") or sys.platform == "win32":
        return [], []
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as fh:
            fh.write("#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n")
        try:
            subprocess.run(
                [cc, "-fopenmp", src, "-o", os.path.join(tmp, "t")],
                check=True,
                capture_output=True,
            )
        except (OSError, subprocess.CalledProcessError):
            return [], []
    return ["-fopenmp"], ["-fopenmp"]


omp_compile, omp_link = _openmp_flags()
extra_compile = ["-O3", "-fno-strict-aliasing"] + omp_compile
extra_compile += os.environ.get("DMLSTRIDE_EXTRA_CFLAGS", "").split()
extra_link = omp_link + os.environ.get("DMLSTRIDE_EXTRA_LDFLAGS", "").split()

extensions = [
    Extension(
        "dmlstride._engine",
        ["dmlstride/_engine.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
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
