"""The command line at a closed pipe, and ``--layout`` given as an axis order for any rank."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dmlstride
from dmlstride.cli import main

# 4096 elements with stride 4: drawn in full, a picture of about 220 kB, far more than a pipe holds.
BIG = ["describe", "--dtype", "uint8", "--sizes", "4096", "--strides", "4", "--max-elements", "4096"]


def _env() -> dict[str, str]:
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(dmlstride.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def test_output_bigger_than_a_pipe_holds(tmp_path):
    """The premise of the pipe tests: the output cannot all fit in the pipe before it closes."""
    # From another folder, so that a source checkout in the working directory does not shadow the package.
    done = subprocess.run([sys.executable, "-m", "dmlstride", *BIG], cwd=tmp_path, env=_env(), capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) > 3 * 65536  # a Linux pipe holds 64 KiB by default


@pytest.mark.parametrize(
    "args, statuses",
    [
        (BIG, {1}),
        (["size", "--dtype", "uint8", "--sizes", "3"], {1}),
        (["--help"], {0, 1}),  # argparse itself ignores a failed write of the help text
    ],
)
def test_closed_pipe_ends_quietly(tmp_path, args, statuses):
    """stdout is a real pipe whose reading end is closed before anything is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "dmlstride", *args], cwd=tmp_path, env=_env(),
                              stdout=write_end, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert done.stderr == b""
    assert done.returncode in statuses


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("head") is None, reason="needs sh and head")
def test_head_reads_one_line_and_the_rest_is_dropped_quietly(tmp_path):
    command = " ".join([f'"{sys.executable}"', "-m", "dmlstride", *BIG]) + " | head -1"
    done = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.stdout == (
        "BufferTensorDesc(UINT8, sizes=[4096], strides=[4], total_tensor_size_in_bytes=16384)\n"
    )
    assert done.stderr == ""


def test_an_open_pipe_still_gets_everything(tmp_path, capsys):
    proc = subprocess.Popen([sys.executable, "-m", "dmlstride", *BIG], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, b"")
    assert main(BIG) == 0
    assert out.decode() == capsys.readouterr().out


# -- --layout as an axis order ---------------------------------------------------------------


def _field(out: str, name: str) -> str:
    for line in out.split("\n"):
        if line.startswith(name + ":"):
            return line[len(name) + 1 :].strip()
    raise AssertionError(f"no {name!r} line in {out!r}")


def _numpy_strides(sizes: list[int], order: list[int], dtype: str) -> list[int]:
    """Element strides of a numpy array stored with ``order`` (slowest to fastest) as its memory order."""
    stored = np.empty([sizes[axis] for axis in order], dtype=dtype)
    logical = stored.transpose(np.argsort(order))
    assert list(logical.shape) == sizes
    return [s // stored.itemsize for s in logical.strides]


@pytest.mark.parametrize("rank", [1, 2, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("seed", range(3))
def test_layout_axis_order_matches_numpy(capsys, rank, seed):
    rng = np.random.default_rng(1000 * rank + seed)
    sizes = [int(n) for n in rng.integers(1, 5, size=rank)]
    order = [int(a) for a in rng.permutation(rank)]
    argv = ["describe", "--dtype", "float16", "--sizes", ",".join(map(str, sizes)),
            "--layout", ",".join(map(str, order))]
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    expected = _numpy_strides(sizes, order, "float16")
    assert _field(out, "effective strides") == str(expected)
    assert _field(out, "strides") == str(expected)


def test_the_issue_example(capsys):
    code = main(["describe", "--dtype", "uint8", "--sizes", "2,3,4,5,6,7", "--layout", "5,4,3,2,1,0"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    # axis 0 fastest: strides 1, 2, 2*3, 2*3*4, 2*3*4*5, 2*3*4*5*6
    assert _field(out, "strides") == "[1, 2, 6, 24, 120, 720]"
    assert _field(out, "packed") == "yes"


def test_axis_order_with_broadcast_and_spaces(capsys):
    code = main(["describe", "--dtype", "uint8", "--sizes", "2,3,4,5,6,7",
                 "--layout", " 0, 1, 2, 3, 5, 4", "--broadcast", "0,1,0,0,0,0"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    # a broadcast dimension takes no room: lay out C as size 1, then give it stride 0
    expected = _numpy_strides([2, 1, 4, 5, 6, 7], [0, 1, 2, 3, 5, 4], "uint8")
    expected[1] = 0
    assert _field(out, "strides") == str(expected)


def test_letters_still_work_where_the_rank_has_them(capsys):
    by_letters = main(["describe", "--dtype", "float32", "--sizes", "1,2,3,4", "--layout", "NHWC"])
    letters_out = capsys.readouterr().out
    by_axes = main(["describe", "--dtype", "float32", "--sizes", "1,2,3,4", "--layout", "0,2,3,1"])
    assert (by_letters, by_axes) == (0, 0)
    assert capsys.readouterr().out == letters_out


@pytest.mark.parametrize(
    "layout, message",
    [
        ("ABCDEF", "--layout 'ABCDEF': a rank-6 tensor has no dimension letters; give its axes from "
                   "slowest to fastest in memory as comma-separated indices, e.g. 0,1,2,3,4,5"),
        ("5,4,3", "--layout '5,4,3' lists 3 axes; expected 6, each axis 0..5 once, from slowest to "
                  "fastest in memory"),
        ("0", "--layout '0' lists 1 axis; expected 6, each axis 0..5 once, from slowest to fastest in memory"),
        ("5,4,3,2,1,1", "--layout '5,4,3,2,1,1' is not an order of the axes 0..5; expected each axis "
                        "exactly once, from slowest to fastest in memory"),
        ("5,4,3,2,1,6", "--layout '5,4,3,2,1,6' is not an order of the axes 0..5; expected each axis "
                        "exactly once, from slowest to fastest in memory"),
        ("5,4,3,2,1,-0", None),
        ("5,4,3,2,1,x", "--layout '5,4,3,2,1,x' is not a comma-separated list of integers"),
        ("5,4,,3,2,1", "--layout '5,4,,3,2,1' is not a comma-separated list of integers"),
    ],
)
def test_bad_axis_orders(capsys, layout, message):
    code = main(["describe", "--dtype", "uint8", "--sizes", "2,3,4,5,6,7", "--layout", layout])
    out, err = capsys.readouterr()
    if message is None:  # "-0" is the integer 0: a valid order
        assert code == 0 and err == ""
        return
    assert (code, out) == (2, "")
    assert err.startswith("dmlstride: error: " + message)
    assert err.count("\n") == 1
