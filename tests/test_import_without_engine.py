"""``import dmlstride`` from a folder whose ``dmlstride`` has no compiled engine says what to do.

Each case runs a fresh interpreter in a temporary copy of the package folder, the way a
user who starts Python in the repository's root folder (before building) would.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dmlstride

PACKAGE = Path(dmlstride.__file__).resolve().parent


def _source_copy(root: Path) -> Path:
    """A copy of the package's Python files (no compiled module) under ``root``."""
    target = root / "dmlstride"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.c"))
    assert not [p for p in target.iterdir()
                if any(p.name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)]
    return target


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args", [("-c", "import dmlstride"), ("-m", "dmlstride", "--help")])
def test_missing_engine_says_what_to_do(tmp_path, args):
    copy = _source_copy(tmp_path)
    done = _python(tmp_path, *args)
    assert done.returncode == 1
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: dmlstride's compiled engine (dmlstride._engine) is not built in ")
    assert str(copy) in last
    for advice in ("pip install .", "python setup.py build_ext --inplace", "another directory"):
        assert advice in last
    assert "circular import" not in done.stderr
    assert "partially initialized" not in done.stderr


def test_an_engine_that_does_not_load_is_named(tmp_path):
    copy = _source_copy(tmp_path)
    broken = copy / ("_engine" + importlib.machinery.EXTENSION_SUFFIXES[0])
    broken.write_bytes(b"not a shared library")
    done = _python(tmp_path, "-c", "import dmlstride")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: dmlstride's compiled engine {broken} exists but could not be loaded (")
    assert "python setup.py build_ext --inplace" in last
    assert "circular import" not in done.stderr


def test_the_real_package_imports_from_its_own_folder(tmp_path):
    """The control: with its engine, the same import works."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE.parent), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", "import dmlstride; print(dmlstride.__file__)"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent == PACKAGE
