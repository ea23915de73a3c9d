"""The command line: ``dmlstride describe`` / ``dmlstride size``, in process and as ``python -m``."""

import os
import subprocess
import sys

import pytest

import dmlstride
from dmlstride import BufferTensorDesc
from dmlstride.cli import main

NHWC = ["describe", "--dtype", "float32", "--sizes", "1,1,3,5"]


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def field(out, name):
    """The value printed after ``name:`` on its own line of describe's output."""
    for line in out.split("\n"):
        if line.startswith(name + ":"):
            return line[len(name) + 1 :].strip()
    raise AssertionError(f"no {name!r} line in {out!r}")


# -- describe -------------------------------------------------------------------------


def test_describe_nhwc_layout(capsys):
    code, out, err = run(capsys, [*NHWC, "--layout", "NHWC"])
    assert (code, err) == (0, "")
    lines = out.split("\n")
    # NHWC strides of {1, 1, 3, 5}: N = 3*5*1 = 15, C = 1, H = 5*1 = 5, W = 1; 15 floats = 60 bytes
    assert lines[0] == (
        "BufferTensorDesc(FLOAT32, sizes=[1, 1, 3, 5], strides=[15, 1, 5, 1], total_tensor_size_in_bytes=60)"
    )
    assert field(out, "sizes") == "[1, 1, 3, 5]"
    assert field(out, "strides") == "[15, 1, 5, 1]"
    assert field(out, "effective strides") == "[15, 1, 5, 1]"
    assert field(out, "total size") == "60 bytes"
    assert field(out, "minimum size") == "60 bytes"
    assert field(out, "layout") == "NHWC"
    assert (field(out, "packed"), field(out, "padded"), field(out, "broadcast"), field(out, "overlap")) == (
        "yes",
        "no",
        "no",
        "no",
    )
    assert "logical view:\nA B C D E\nF G H I J\nK L M N O\n" in out
    assert "value:  A B C D E F G H I J K L M N O\n" in out
    picture = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 1, 5, 1]).explain()
    assert out.endswith("\n\n" + picture + "\n")


def test_describe_strides_gives_the_same_output_as_the_layout(capsys):
    by_layout = run(capsys, [*NHWC, "--layout", "NHWC"])
    by_strides = run(capsys, [*NHWC, "--strides", "15,1,5,1"])
    assert by_strides == by_layout


def test_describe_implicit_strides(capsys):
    code, out, _ = run(capsys, NHWC)
    assert code == 0
    assert "strides=" not in out.split("\n")[0]
    assert field(out, "strides") == "none (packed, implicit)"
    assert field(out, "effective strides") == "[15, 15, 5, 1]"
    assert field(out, "layout") == "NCHW"


def test_describe_padded_and_broadcast(capsys):
    code, out, _ = run(capsys, ["describe", "--dtype", "uint8", "--sizes", "2,3", "--strides", "5,1"])
    assert code == 0
    assert (field(out, "packed"), field(out, "padded"), field(out, "layout")) == ("no", "yes", "none")
    # last offset 1*5 + 2 = 7 -> 8 bytes, already a multiple of 4
    assert field(out, "minimum size") == "8 bytes"
    assert "value:  A B C x x D E F x x\n" in out

    code, out, _ = run(capsys, ["describe", "--dtype", "float16", "--sizes", "2,3", "--strides", "0,1"])
    assert code == 0
    assert (field(out, "broadcast"), field(out, "overlap")) == ("yes", "yes")
    assert field(out, "minimum size") == "8 bytes"  # FLOAT16 {2, 3} strides {0, 1} -> 8
    assert "logical view:\nA B C\nA B C\n" in out
    assert "repeats: A at offset 0 is read by 2 elements (0, 0), (1, 0)" in out


@pytest.mark.parametrize("broadcast", ["C", "c", "0,1,0,0"])
def test_describe_layout_with_broadcast(capsys, broadcast):
    # calculate_strides("NCHW", [2, 3, 4, 5], broadcast C) == (20, 0, 5, 1)
    code, out, _ = run(
        capsys, ["describe", "--dtype", "float16", "--sizes", "2,3,4,5", "--layout", "NCHW", "--broadcast", broadcast]
    )
    assert code == 0
    assert field(out, "strides") == "[20, 0, 5, 1]"
    assert field(out, "broadcast") == "yes"


def test_describe_broadcast_without_layout_is_row_major(capsys):
    code, out, _ = run(capsys, ["describe", "--dtype", "uint8", "--sizes", "2,3", "--broadcast", "H"])
    assert code == 0
    assert field(out, "strides") == "[0, 1]"


def test_describe_row_pitch(capsys):
    # 3 one-byte elements per row, rows rounded up to 4 bytes: H stride 4
    code, out, _ = run(capsys, ["describe", "--dtype", "uint8", "--sizes", "2,3", "--layout", "HW", "--row-pitch", "4"])
    assert code == 0
    assert field(out, "strides") == "[4, 1]"
    assert "value:  A B C x D E F x\n" in out


def test_describe_total_size_and_alignment(capsys):
    code, out, _ = run(
        capsys, ["describe", "--dtype", "float32", "--sizes", "2,3", "--total-size", "64", "--alignment", "16"]
    )
    assert code == 0
    assert out.split("\n")[0] == (
        "BufferTensorDesc(FLOAT32, sizes=[2, 3], total_tensor_size_in_bytes=64, guaranteed_base_offset_alignment=16)"
    )
    assert field(out, "total size") == "64 bytes"
    assert field(out, "minimum size") == "24 bytes"
    assert field(out, "alignment") == "16 bytes"


def test_describe_huge_tensor_is_summarised(capsys):
    code, out, _ = run(capsys, ["describe", "--dtype", "float32", "--sizes", "65535,65535"])
    assert code == 0
    assert field(out, "element count") == "4294836225"
    assert "too large to draw in full" in out
    assert len(out.split("\n")) < 60


def test_describe_max_elements(capsys):
    argv = ["describe", "--dtype", "uint8", "--sizes", "2,3"]
    assert "too large" not in run(capsys, argv)[1]
    assert "too large" in run(capsys, [*argv, "--max-elements", "5"])[1]


# -- size -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        # (65536 * 65536 + 65535 + 1) * 4 bytes, exactly (DirectML's helper wraps to 262144)
        (["--dtype", "float32", "--sizes", "65537,65536", "--strides", "65536,1"], "17180131328"),
        (["--dtype", "uint32", "--sizes", "2,3", "--strides", "6,2"], "44"),  # (6 + 4 + 1) * 4
        (["--dtype", "float32", "--sizes", "1,1,3,5"], "60"),
        (["--dtype", "int4", "--sizes", "9"], "8"),  # 36 bits -> 5 bytes -> 8
        (["--dtype", "INT4", "--sizes", " 5 "], "4"),
    ],
)
def test_size_prints_only_the_integer(capsys, args, expected):
    assert run(capsys, ["size", *args]) == (0, expected + "\n", "")


# -- errors: one line, status 2 ----------------------------------------------------------

BAD = {
    "bad dtype": ["size", "--dtype", "float33", "--sizes", "2,3"],
    "unknown dtype": ["size", "--dtype", "unknown", "--sizes", "2,3"],
    "zero size": ["size", "--dtype", "float32", "--sizes", "2,0"],
    "non-integer size": ["size", "--dtype", "float32", "--sizes", "2,x"],
    "float size": ["describe", "--dtype", "float32", "--sizes", "2.5"],
    "too many dims": ["describe", "--dtype", "float32", "--sizes", "1,1,1,1,1,1,1,1,1"],
    "strides length": ["describe", "--dtype", "float32", "--sizes", "2,3", "--strides", "1"],
    "unknown layout": ["describe", "--dtype", "float32", "--sizes", "1,1,3,5", "--layout", "NCWZ"],
    "layout rank": ["describe", "--dtype", "float32", "--sizes", "2,3", "--layout", "NHWC"],
    "size over 2**32-1": ["size", "--dtype", "uint8", "--sizes", "4294967296"],
    "count over 2**32-1": ["describe", "--dtype", "uint8", "--sizes", "65536,65536"],
    "negative stride": ["size", "--dtype", "float32", "--sizes", "2,3", "--strides=-1,1"],
    "negative stride, separate": ["size", "--dtype", "float32", "--sizes", "2,3", "--strides", "-1,1"],
    "empty sizes": ["size", "--dtype", "float32", "--sizes", ""],
    "empty entry": ["size", "--dtype", "float32", "--sizes", "2,,3"],
    "missing dtype": ["describe", "--sizes", "2,3"],
    "missing sizes": ["size", "--dtype", "float32"],
    "missing value": ["size", "--dtype", "float32", "--sizes"],
    "no command": [],
    "unknown command": ["shape", "--dtype", "float32", "--sizes", "2"],
    "unknown option": ["size", "--dtype", "float32", "--sizes", "2", "--frobnicate"],
    "layout and strides": ["describe", "--dtype", "float32", "--sizes", "2,3", "--layout", "HW", "--strides", "3,1"],
    "broadcast and strides": ["describe", "--dtype", "uint8", "--sizes", "2,3", "--strides", "0,1", "--broadcast", "H"],
    "bad broadcast letter": ["describe", "--dtype", "float32", "--sizes", "2,3", "--broadcast", "Q"],
    "broadcast length": ["describe", "--dtype", "float32", "--sizes", "2,3", "--broadcast", "1,0,0"],
    "total size too small": ["describe", "--dtype", "float32", "--sizes", "2,3", "--total-size", "20"],
    "total size not an integer": ["describe", "--dtype", "float32", "--sizes", "2,3", "--total-size", "lots"],
    "alignment not a power of two": ["describe", "--dtype", "float32", "--sizes", "2,3", "--alignment", "12"],
    "row pitch not whole elements": ["describe", "--dtype", "float32", "--sizes", "2,3", "--row-pitch", "6"],
    "max elements zero": ["describe", "--dtype", "float32", "--sizes", "2,3", "--max-elements", "0"],
    "size over 2**64 bytes": [
        "size", "--dtype", "float64", "--sizes", "4294967295,4294967295", "--strides", "4294967295,4294967295",
    ],
}


@pytest.mark.parametrize("argv", list(BAD.values()), ids=list(BAD))
def test_bad_arguments_give_one_line_and_status_2(capsys, argv):
    code, out, err = run(capsys, argv)
    assert code == 2
    assert out == ""
    assert err.startswith("dmlstride: error: ")
    assert err.endswith("\n") and err.count("\n") == 1
    assert len(err) > len("dmlstride: error: ") + 5
    assert "Traceback" not in err


def test_error_messages_name_the_problem(capsys):
    assert "sizes[1] is 0" in run(capsys, BAD["zero size"])[2]
    assert "--strides" in run(capsys, BAD["layout and strides"])[2]
    assert "--dtype" in run(capsys, BAD["missing dtype"])[2]
    assert "'2,x'" in run(capsys, BAD["non-integer size"])[2]
    assert "strides[0] is -1" in run(capsys, BAD["negative stride"])[2]


def test_help_exits_0(capsys):
    code, out, _ = run(capsys, ["--help"])
    assert code == 0
    assert "describe" in out and "size" in out
    code, out, _ = run(capsys, ["describe", "--help"])
    assert code == 0
    options = ("--dtype", "--sizes", "--strides", "--layout", "--broadcast", "--row-pitch", "--total-size", "--alignment")
    for option in options:
        assert option in out
    assert run(capsys, ["size", "-h"])[0] == 0


def test_version(capsys):
    assert run(capsys, ["--version"]) == (0, f"dmlstride {dmlstride.__version__}\n", "")


# -- python -m dmlstride, in a fresh interpreter -------------------------------------------


def python_m(tmp_path, *args):
    """Run ``python -m dmlstride`` from an unrelated directory, importing this dmlstride."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(dmlstride.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "dmlstride", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_python_m_size(tmp_path):
    done = python_m(tmp_path, "size", "--dtype", "float32", "--sizes", "65537,65536", "--strides", "65536,1")
    assert (done.returncode, done.stdout, done.stderr) == (0, "17180131328\n", "")


def test_python_m_describe(tmp_path):
    done = python_m(tmp_path, "describe", "--dtype", "float32", "--sizes", "1,1,3,5", "--layout", "NHWC")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("BufferTensorDesc(FLOAT32, sizes=[1, 1, 3, 5], strides=[15, 1, 5, 1]")
    assert "layout:            NHWC" in done.stdout
    assert "value:  A B C D E F G H I J K L M N O" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("describe", "--dtype", "float32", "--sizes", "0,3"),
        ("size", "--dtype", "nope", "--sizes", "3"),
        ("describe", "--dtype", "float32"),
    ],
)
def test_python_m_errors(tmp_path, args):
    done = python_m(tmp_path, *args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("dmlstride: error: ")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_python_m_help(tmp_path):
    done = python_m(tmp_path, "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: dmlstride")
