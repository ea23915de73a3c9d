"""Typing: stubs beside every compiled module, a py.typed marker, and mypy --strict on user code.

mypy checks small user scripts against the package under test, the way a
user's type checker sees an installed, typed package (errors inside the
package itself are not the user's and are not reported).
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import dmlstride

PACKAGE_DIR = Path(dmlstride.__file__).resolve().parent


def compiled_modules() -> list[str]:
    """Names of the extension modules shipped in the package folder."""
    names = []
    for path in sorted(PACKAGE_DIR.iterdir()):
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if path.name.endswith(suffix):
                names.append(path.name[: -len(suffix)])
                break
    return names


def test_py_typed_marker():
    assert (PACKAGE_DIR / "py.typed").is_file()


def test_there_is_a_compiled_engine():
    assert "_engine" in compiled_modules()


@pytest.mark.parametrize("name", compiled_modules())
def test_every_compiled_module_has_a_stub_declaring_its_public_names(name):
    stub = PACKAGE_DIR / f"{name}.pyi"
    assert stub.is_file(), f"{name} has no {stub.name} beside it"
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    declared = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
        elif isinstance(node, ast.Assign):
            declared.update(t.id for t in node.targets if isinstance(t, ast.Name))
    module = importlib.import_module(f"dmlstride.{name}")
    public = {n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))}
    assert public - declared == set(), f"{stub.name} does not declare {sorted(public - declared)}"
    public_declared = {n for n in declared if not n.startswith("_")}
    assert public_declared - set(dir(module)) == set(), f"{stub.name} declares missing {sorted(public_declared - set(dir(module)))}"


# --------------------------------------------------------------------------------------
# mypy --strict on user code


def _in_site_packages(path: Path) -> bool:
    roots = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    return any(str(path).startswith(str(Path(r).resolve())) for r in roots)


@pytest.fixture(scope="module")
def run_mypy(tmp_path_factory):
    work = tmp_path_factory.mktemp("mypy")
    cache = work / "cache"
    env = dict(os.environ)
    env.pop("MYPYPATH", None)
    if not _in_site_packages(PACKAGE_DIR):
        # an uninstalled checkout: let mypy find the package where it was imported from
        env["MYPYPATH"] = str(PACKAGE_DIR.parent)

    def run(source: str) -> tuple[int, list[str]]:
        script = work / "user_code.py"
        script.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
             "--hide-error-context", "--show-error-codes", "--cache-dir", str(cache), script.name],
            cwd=work, env=env, capture_output=True, text=True, timeout=300,
        )
        assert "error: Cannot find implementation or library stub" not in proc.stdout, proc.stdout
        return proc.returncode, proc.stdout.splitlines()

    return run


def _revealed(lines: list[str]) -> dict[int, str]:
    out = {}
    for line in lines:
        m = re.match(r".*user_code\.py:(\d+): note: Revealed type is \"(.*)\"$", line)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def _errors(lines: list[str]) -> dict[int, str]:
    out = {}
    for line in lines:
        m = re.match(r".*user_code\.py:(\d+): error: (.*)$", line)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


USER_CODE = """
import array
from typing import Any

import numpy as np
import numpy.typing as npt
import dmlstride
from dmlstride import BufferTensorDesc, DescriptorError, copy_tensor, gather, scatter, view

desc = BufferTensorDesc("float32", [2, 3], strides=[5, 1])
packed = BufferTensorDesc(dmlstride.TensorDataType.FLOAT32, (2, 3))
buf = bytearray(64)
out: npt.NDArray[np.float32] = np.empty((2, 3), dtype=np.float32)
reveal_type(gather(buf, desc))
reveal_type(gather(b"x" * 64, desc, offset=16, out=out, check_alignment=False))
reveal_type(scatter(np.zeros((2, 3), np.float32), desc, buf, offset=0))
reveal_type(copy_tensor(buf, desc, bytearray(64), packed, src_offset=0, dst_offset=16))
reveal_type(view(memoryview(buf), desc, offset=16))
reveal_type(desc.sizes)
reveal_type(desc.strides)
reveal_type(desc.effective_strides)
reveal_type(desc.total_tensor_size_in_bytes)
reveal_type(desc.guaranteed_base_offset_alignment)
reveal_type(desc.has_overlap)
reveal_type(desc.data_type)
reveal_type(dmlstride.get_num_threads())
reveal_type(dmlstride.set_num_threads(2))
reveal_type(dmlstride.set_output_cache(1 << 28))
reveal_type(dmlstride.output_cache_info())
src = dmlstride.view_source(np.zeros((4, 4), np.float32)[:, :2])
reveal_type(src.offset)
reveal_type(src.desc)
reveal_type(dmlstride.numpy_dtype("int4"))
a: np.ndarray[Any, Any] = gather(buf, desc)
f32: npt.NDArray[np.float32] = gather(src.buffer, src.desc, offset=src.offset, out=out)
spellings = [
    BufferTensorDesc(np.float16, [2]),
    BufferTensorDesc(np.dtype("f4"), [2]),
    BufferTensorDesc(np.dtype(np.int64), [2]),
    BufferTensorDesc("UINT8", [2]),
    BufferTensorDesc("f8", [2]),
    BufferTensorDesc(float, [2]),
    BufferTensorDesc(5, [2]),
]
size: int = dmlstride.calc_buffer_tensor_size(dmlstride.TensorDataType.INT4, [9])
bits: int = dmlstride.element_bits("int4") + dmlstride.element_bytes(np.uint16)
copy_tensor(np.zeros(16, np.uint8), desc, memoryview(buf), packed)
scatter([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], desc, buf)
gather(array.array("f", [0.0] * 16), desc)
shape: tuple[int, ...] = desc.sizes
total: int = desc.total_tensor_size_in_bytes
overlap: bool = desc.has_overlap
threads: int = dmlstride.get_num_threads()
try:
    scatter(a, desc, buf)
except DescriptorError as exc:
    message: str = str(exc)
"""

EXPECTED_REVEALS = [
    r"numpy\.ndarray\[.*\]",
    # out= gives its own type back (float32, however this numpy's stubs spell it)
    r"numpy\.ndarray\[.*numpy\.dtype\[numpy\.(float32|floating\[.*_32Bit\])\]\]",
    r"None",
    r"None",
    r"numpy\.ndarray\[.*\]",
    r"(builtins\.)?tuple\[(builtins\.)?int, \.\.\.\]",
    r"(builtins\.)?tuple\[(builtins\.)?int, \.\.\.\] \| None|Union\[(builtins\.)?tuple\[(builtins\.)?int, \.\.\.\], None\]",
    r"(builtins\.)?tuple\[(builtins\.)?int, \.\.\.\]",
    r"(builtins\.)?int",
    r"(builtins\.)?int",
    r"(builtins\.)?bool",
    r"dmlstride\.(datatypes\.)?TensorDataType",
    r"(builtins\.)?int",
    r"None",
    r"(builtins\.)?int",
    r"(builtins\.)?tuple\[(builtins\.)?int, (builtins\.)?int\]",
    r"(builtins\.)?int",
    r"dmlstride\.(descriptor\.)?BufferTensorDesc",
    r"numpy\.dtype\[Any\]",
]


def test_user_code_type_checks_strictly_with_real_types(run_mypy):
    status, lines = run_mypy(USER_CODE)
    assert _errors(lines) == {}, "\n".join(lines)
    assert status == 0, "\n".join(lines)
    revealed = _revealed(lines)
    assert len(revealed) == len(EXPECTED_REVEALS), "\n".join(lines)
    for (line, got), pattern in zip(sorted(revealed.items()), EXPECTED_REVEALS):
        assert got != "Any", f"line {line}: the API is untyped here"
        assert re.fullmatch(pattern, got), f"line {line}: revealed {got!r}, expected {pattern!r}"


MISUSE = """
import numpy as np
from dmlstride import BufferTensorDesc, copy_tensor, gather, scatter, view, view_source

desc = BufferTensorDesc("float32", [2, 3])
buf = bytearray(64)
ok = gather(buf, desc)
a: int = gather(buf, desc)
b: str = desc.total_tensor_size_in_bytes
gather(buf, desc, offset="16")
scatter(np.zeros((2, 3)), desc, buf, offset=1.5)
c: int = scatter(np.zeros((2, 3)), desc, buf)
view(buf)
copy_tensor(buf, desc, buf)
gather(buf, desc, 16)
desc.sizes = (1, 2)
e: bool = desc.sizes
f: str = view(buf, desc)
g: bool = desc.has_overlap + ""
gather(buf, desc, out=[1.0])
gather(None, desc)
scatter(np.zeros((2, 3)), desc, "abc")
copy_tensor(buf, desc, [0] * 64, desc)
view(3, desc)
BufferTensorDesc("float31", [2])
BufferTensorDesc(np.complex64, [2])
BufferTensorDesc(2.5, [2])
BufferTensorDesc(None, [2])
view_source(buf)
h: str = gather(buf, desc, out=np.empty((2, 3), np.float32))
"""


def test_misuse_is_reported(run_mypy):
    status, lines = run_mypy(MISUSE)
    assert status != 0
    errors = _errors(lines)
    source_lines = textwrap.dedent(MISUSE).lstrip().splitlines()
    first = next(i for i, text in enumerate(source_lines, 1) if text.startswith("a: int"))
    expected = set(range(first, len(source_lines) + 1))
    assert set(errors) == expected, "\n".join(lines)
    # the two calls of the issue: a None buffer and a str buffer are not buffers
    none_buffer = source_lines.index("gather(None, desc)") + 1
    str_buffer = source_lines.index('scatter(np.zeros((2, 3)), desc, "abc")') + 1
    assert "gather" in errors[none_buffer] and "None" in errors[none_buffer], errors[none_buffer]
    assert '"str"' in errors[str_buffer] and "Buffer" in errors[str_buffer], errors[str_buffer]


def test_the_data_type_literal_holds_only_accepted_spellings():
    """Every string a type checker accepts is accepted at run time, and every DirectML name is in it."""
    from typing import get_args

    from dmlstride._typing import DataTypeName

    names = get_args(DataTypeName)
    assert len(set(names)) == len(names)
    for name in names:
        assert dmlstride.data_type(name) is not dmlstride.TensorDataType.UNKNOWN, name
    for t in dmlstride.TensorDataType:
        if t is not dmlstride.TensorDataType.UNKNOWN:
            assert t.name in names and t.name.lower() in names
    assert "unknown" not in names and "UNKNOWN" not in names


def test_the_engine_stub_is_what_mypy_sees(run_mypy):
    status, lines = run_mypy(
        """
        from dmlstride import _engine
        reveal_type(_engine.get_num_threads())
        reveal_type(_engine.have_threads())
        reveal_type(_engine.Plan([2, 3], [3, 1], [1, 2], 32).describe())
        """
    )
    assert _errors(lines) == {}, "\n".join(lines)
    revealed = [t for _, t in sorted(_revealed(lines).items())]
    assert len(revealed) == 3, "\n".join(lines)
    assert re.fullmatch(r"(builtins\.)?int", revealed[0])
    assert re.fullmatch(r"(builtins\.)?bool", revealed[1])
    assert revealed[2] != "Any" and "dict" in revealed[2]


CONVERT_CODE = """
import numpy as np
import numpy.typing as npt
import dmlstride
from dmlstride import BufferTensorDesc, convert, dequantize, gather, quantize

nhwc = BufferTensorDesc.from_layout("uint8", [1, 3, 4, 4], "NHWC")
buf = bytearray(64)
reveal_type(gather(buf, nhwc, dtype="float32", scale=[0.1, 0.2, 0.3], bias=-1.0, axis=1))
reveal_type(convert(buf, nhwc, bytearray(256), BufferTensorDesc("float32", [1, 3, 4, 4]), scale=0.5))
reveal_type(quantize(np.zeros((1, 3, 4, 4), np.float32), nhwc, buf, 0.5, 3, axis=1, block_size=0))
reveal_type(dequantize(buf, nhwc, np.ones(3, np.float32), np.zeros(3, np.uint8), dtype="float16"))
out: npt.NDArray[np.float32] = np.empty((1, 3, 4, 4), np.float32)
reveal_type(dequantize(buf, nhwc, 0.5, out=out))
gather(buf, nhwc, dtype=np.float16, scale=2)
"""


def test_the_conversion_api_type_checks(run_mypy):
    status, lines = run_mypy(CONVERT_CODE)
    assert _errors(lines) == {}, "\n".join(lines)
    revealed = [t for _, t in sorted(_revealed(lines).items())]
    assert len(revealed) == 5, "\n".join(lines)
    assert re.fullmatch(r"numpy\.ndarray\[.*\]", revealed[0])
    assert revealed[1] == "None" and revealed[2] == "None"
    assert re.fullmatch(r"numpy\.ndarray\[.*floating.*\]", revealed[3]), revealed[3]
    assert re.fullmatch(r"numpy\.ndarray\[.*(float32|_32Bit).*\]", revealed[4]), revealed[4]


def test_conversion_misuse_is_reported(run_mypy):
    status, lines = run_mypy(
        """
        from dmlstride import BufferTensorDesc, convert, dequantize, quantize
        d = BufferTensorDesc("int8", [4])
        quantize([1.0] * 4, d, bytearray(16), 0.5, axis="1")
        dequantize(bytearray(16), d, 0.5, dtype="float31")
        convert(bytearray(16), d, bytearray(16), d, 0.5)
        """
    )
    assert status != 0
    assert set(_errors(lines)) == {3, 4, 5}, "\n".join(lines)
