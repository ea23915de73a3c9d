"""The error raised when ``import dmlstride`` finds the package without its compiled engine."""

from __future__ import annotations

import importlib.machinery
from pathlib import Path

BUILD_IN_PLACE = "python setup.py build_ext --inplace"
INSTALL = "pip install ."


def _built_engines(folder: Path) -> list[Path]:
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return sorted(p for p in folder.glob("_engine*") if any(p.name == "_engine" + s for s in suffixes))


def engine_import_error(exc: ImportError) -> ImportError:
    """An ``ImportError`` that says why ``dmlstride._engine`` did not load and what to do.

    The usual cause is starting Python in a source checkout: its ``dmlstride``
    folder comes first on ``sys.path`` and shadows an installed dmlstride, but
    holds no compiled engine unless it was built in place.
    """
    folder = Path(__file__).resolve().parent
    built = _built_engines(folder)
    if not built:
        return ImportError(
            f"dmlstride's compiled engine (dmlstride._engine) is not built in {folder}. "
            "This is usually a source checkout that Python found first because it was started in "
            "the repository's root folder, where the source folder shadows an installed dmlstride. "
            f"Install the package ({INSTALL}) and run Python from another directory, "
            f"or build the engine in place ({BUILD_IN_PLACE})."
        )
    return ImportError(
        f"dmlstride's compiled engine {built[0]} exists but could not be loaded ({exc}). "
        f"It may have been built for another Python or platform: rebuild it ({BUILD_IN_PLACE}), "
        f"or install the package ({INSTALL}) and run Python from another directory."
    )
