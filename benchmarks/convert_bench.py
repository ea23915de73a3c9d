"""Convert while moving: dmlstride against numpy and, when importable, OpenCV, ONNX Runtime and PyTorch.

Three cases, like for like (preallocated outputs wherever the peer allows
one, the same thread count for every library):

1. ``image``: uint8 NHWC 16x3x224x224 to float32 NCHW with per-channel scale
   and bias.  numpy: its two-pass equivalent (a transposed multiply into the
   output, then an add); PyTorch: ``permute``, ``float`` (a copy into the
   preallocated output), ``mul_``, ``add_``.  OpenCV's
   ``cv2.dnn.blobFromImages`` has a scalar scale and a per-channel mean, so its
   column times dmlstride on that closest equivalent.
2. ``int4``: a 4096 x 4096 INT4 weight, blocks of 32 along each row,
   dequantized to float16 and to float32.  numpy: unpack the nibbles,
   sign-extend, subtract and multiply block-wise; ONNX Runtime: a
   DequantizeLinear model (opset 21) on its CPU provider, output bound to a
   preallocated array.
3. ``half``: float32 NHWC 16x3x224x224 to float16 NCHW.  numpy: one
   ``copyto`` from the transposed view; PyTorch: ``copy_`` from the permuted
   tensor.

Every result is checked against numpy's before timing.  Timing is run.py's
(``timing.py``): a sample is back-to-back calls lasting at least 10 ms, each
contestant gives one sample per repeat, in an order shuffled every repeat;
the report gives the median time per call with the spread (min-max of the
samples) and the ratio peer / dmlstride (above 1: dmlstride is faster).  With
``--single-calls`` a sample is one call instead, so each contestant finds the
caches as the previous one left them.  The machine's noise affects all
columns alike.

Run: ``python benchmarks/convert_bench.py [--threads N] [--repeats R] [--quick] [--single-calls]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported

import numpy as np  # noqa: E402

try:
    import dmlstride as ds
except ImportError:  # not installed: use the package beside this folder (an in-place build)
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    import dmlstride as ds

from timing import calls_per_sample, interleaved  # noqa: E402  (this script's folder is on sys.path)

MIN_SAMPLE_NS = 10_000_000  # a timing sample: back-to-back calls lasting at least this (as run.py)

def _optional(name: str) -> Any:
    try:
        return __import__(name)
    except Exception:  # noqa: BLE001 - a peer that fails to import is simply absent
        return None


# ------------------------------------------------------------------------- the cases


class Case:
    def __init__(self, name: str, target: str) -> None:
        self.name = name
        self.target = target
        self.runs: dict[str, Callable[[], Any]] = {}
        #: peer -> the dmlstride contestant its ratio is taken against
        self.against: dict[str, str] = {}

    def add_base(self, run_ds: Callable[[], Any], run_np: Callable[[], Any], out_ds: np.ndarray,
                 out_np: np.ndarray) -> None:
        """dmlstride and numpy, after checking that they give the same bytes."""
        run_ds()
        run_np()
        assert out_ds.tobytes() == out_np.tobytes(), "dmlstride and numpy differ"
        self.runs["dmlstride"] = run_ds
        self.runs["numpy"] = run_np
        self.against["numpy"] = "dmlstride"


def image_case(n: int, threads: int, torch: Any, cv2: Any) -> Case:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(n, 224, 224, 3), dtype=np.uint8)
    sizes = [n, 3, 224, 224]
    nhwc = ds.BufferTensorDesc.from_layout("uint8", sizes, "NHWC")
    mean = np.array([123.675, 116.28, 103.53])
    std = np.array([58.395, 57.12, 57.375])
    scale = (1 / std).astype(np.float32)
    bias = (-mean / std).astype(np.float32)
    out_ds = np.empty(sizes, np.float32)
    out_np = np.empty(sizes, np.float32)
    s3, b3 = scale[:, None, None], bias[:, None, None]

    case = Case(f"image: uint8 NHWC {n}x3x224x224 -> float32 NCHW, per-channel scale and bias",
                "dmlstride >= 5x numpy, >= 1.5x OpenCV, >= 1.0x PyTorch")

    def run_ds() -> None:
        ds.gather(img, nhwc, dtype="float32", scale=scale, bias=bias, axis=1, out=out_ds)

    def run_np() -> None:
        np.multiply(img.transpose(0, 3, 1, 2), s3, out=out_np)
        np.add(out_np, b3, out=out_np)

    case.add_base(run_ds, run_np, out_ds, out_np)

    if torch is not None:
        t_img = torch.from_numpy(img)
        t_out = torch.empty(sizes, dtype=torch.float32)
        t_s = torch.from_numpy(s3.copy())
        t_b = torch.from_numpy(b3.copy())

        def run_torch() -> None:
            t_out.copy_(t_img.permute(0, 3, 1, 2))   # .float() into the preallocated output
            t_out.mul_(t_s).add_(t_b)

        run_torch()
        assert np.allclose(t_out.numpy(), out_np, rtol=1e-6, atol=1e-5), "PyTorch differs"
        case.runs["PyTorch"] = run_torch
        case.against["PyTorch"] = "dmlstride"

    if cv2 is not None:
        images = list(img)
        sf = float(1 / 57.5)
        mean_t = tuple(float(m) for m in mean)
        out_cv = np.empty(sizes, np.float32)
        bias_cv = (-mean * sf).astype(np.float32)

        def run_ds_cv() -> None:
            ds.gather(img, nhwc, dtype="float32", scale=sf, bias=bias_cv, axis=1, out=out_cv)

        def run_cv() -> Any:
            return cv2.dnn.blobFromImages(images, sf, (224, 224), mean_t, False, False)

        run_ds_cv()
        blob = run_cv()
        assert blob.shape == tuple(sizes)
        assert np.allclose(blob, out_cv, rtol=1e-5, atol=1e-4), "OpenCV differs"
        case.runs["dmlstride (scalar scale)"] = run_ds_cv
        case.runs["OpenCV"] = run_cv
        case.against["OpenCV"] = "dmlstride (scalar scale)"
    return case


def _int4_model(onnx: Any, rows: int, cols: int, block: int, packed: np.ndarray, scales: np.ndarray,
                out_type: int) -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor("x", TensorProto.INT4, [rows, cols], packed.tobytes(), raw=True)
    s = helper.make_tensor("s", out_type, list(scales.shape), scales.tobytes(), raw=True)
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=1, block_size=block)
    y = helper.make_tensor_value_info("y", out_type, [rows, cols])
    graph = helper.make_graph([node], "dq", [], [y], initializer=[x, s])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString()


def int4_case(rows: int, cols: int, threads: int, dtype: str, onnx: Any, ort: Any) -> Case:
    block = 32
    rng = np.random.default_rng(1)
    values = rng.integers(-8, 8, size=(rows, cols), dtype=np.int8)
    nib = values.astype(np.uint8) & 0xF
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
    np_dtype = np.float16 if dtype == "float16" else np.float32
    scales = (rng.uniform(0.001, 0.1, size=(rows, cols // block))).astype(np_dtype)
    desc = ds.BufferTensorDesc("int4", [rows, cols])
    out_ds = np.empty((rows, cols), np_dtype)
    out_np = np.empty((rows, cols), np_dtype)
    s32 = scales.astype(np.float32)
    case = Case(f"int4: {rows}x{cols} INT4, blocks of {block} -> {dtype}",
                "dmlstride >= 1.0x ONNX Runtime, >= 5x numpy")

    def run_ds() -> None:
        ds.dequantize(packed, desc, scales, axis=1, block_size=block, dtype=dtype, out=out_ds)

    unpacked = np.empty((rows, cols), np.int8)

    def run_np() -> None:
        lo = (packed & 0xF).view(np.int8)
        hi = (packed >> 4).view(np.int8)
        unpacked[:, 0::2] = lo
        unpacked[:, 1::2] = hi
        sext = (unpacked ^ 8) - 8                       # sign-extend the nibbles
        y = sext.reshape(rows, cols // block, block).astype(np.float32) * s32[:, :, None]
        np.copyto(out_np, y.reshape(rows, cols), casting="same_kind")

    case.add_base(run_ds, run_np, out_ds, out_np)

    if onnx is not None and ort is not None:
        from onnx import TensorProto

        out_type = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.FLOAT
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # no constant folding
        sess = ort.InferenceSession(_int4_model(onnx, rows, cols, block, packed, scales, out_type), so,
                                    providers=["CPUExecutionProvider"])
        out_ort = np.empty((rows, cols), np_dtype)
        binding = sess.io_binding()
        binding.bind_output("y", "cpu", 0, np_dtype, [rows, cols], out_ort.ctypes.data)

        def run_ort(keep: np.ndarray = out_ort) -> None:   # (keeps the bound output alive)
            sess.run_with_iobinding(binding)

        run_ort()
        assert np.array_equal(out_ort, out_np), "ONNX Runtime differs"
        case.runs["ONNX Runtime"] = run_ort
        case.against["ONNX Runtime"] = "dmlstride"
    return case


def half_case(n: int, threads: int, torch: Any) -> Case:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((n, 224, 224, 3)).astype(np.float32) * 100
    sizes = [n, 3, 224, 224]
    nhwc = ds.BufferTensorDesc.from_layout("float32", sizes, "NHWC")
    out_ds = np.empty(sizes, np.float16)
    out_np = np.empty(sizes, np.float16)
    case = Case(f"half: float32 NHWC {n}x3x224x224 -> float16 NCHW", "dmlstride >= 4x numpy, >= 1.0x PyTorch")

    def run_ds() -> None:
        ds.gather(x, nhwc, dtype="float16", out=out_ds)

    def run_np() -> None:
        np.copyto(out_np, x.transpose(0, 3, 1, 2), casting="same_kind")

    case.add_base(run_ds, run_np, out_ds, out_np)
    if torch is not None:
        t_x = torch.from_numpy(x)
        t_out = torch.empty(sizes, dtype=torch.float16)

        def run_torch() -> None:
            t_out.copy_(t_x.permute(0, 3, 1, 2))

        run_torch()
        assert t_out.numpy().tobytes() == out_np.tobytes(), "PyTorch differs"
        case.runs["PyTorch"] = run_torch
        case.against["PyTorch"] = "dmlstride"
    return case


# ------------------------------------------------------------------------- timing


def measure(case: Case, repeats: int, min_sample_ns: int) -> dict[str, list[float]]:
    """Seconds per call of each contestant, one sample per repeat (see timing.py)."""
    for fn in case.runs.values():   # warm-up
        fn()
    number = {name: calls_per_sample(fn, min_sample_ns) if min_sample_ns else 1
              for name, fn in case.runs.items()}
    samples = interleaved(case.runs, number, repeats)
    return {name: [t / 1e9 for t in ts] for name, ts in samples.items()}


def report(case: Case, times: dict[str, list[float]]) -> list[str]:
    lines = [case.name, f"  target: {case.target}"]
    med = {name: statistics.median(ts) for name, ts in times.items()}
    for name, ts in times.items():
        line = f"  {name:<26} {med[name] * 1e3:9.2f} ms  (min {min(ts) * 1e3:.2f}, max {max(ts) * 1e3:.2f})"
        if name in case.against:
            ref = case.against[name]
            line += f"   {med[name] / med[ref]:6.2f}x vs {ref}"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every library (default 2)")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved repeats per contestant")
    parser.add_argument("--quick", action="store_true", help="small sizes: a correctness and smoke run")
    parser.add_argument("--cases", default="image,int4,half", help="comma-separated subset of image,int4,half")
    parser.add_argument("--single-calls", action="store_true",
                        help="time one call per sample, each contestant finding the caches as the previous "
                             "one left them (default: back-to-back calls lasting 10 ms, as run.py does)")
    args = parser.parse_args(argv)

    torch = _optional("torch")
    cv2 = _optional("cv2")
    onnx = _optional("onnx")
    ort = _optional("onnxruntime")
    ds.set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    if cv2 is not None:
        cv2.setNumThreads(args.threads)
    n = 2 if args.quick else 16
    side = 256 if args.quick else 4096
    repeats = 3 if args.quick else args.repeats
    peers = [name for name, mod in (("PyTorch", torch), ("OpenCV", cv2), ("ONNX Runtime", ort)) if mod is not None]
    print(f"threads: {args.threads}, repeats: {repeats}, peers: {', '.join(peers) or 'none'}"
          f"{'  (quick: small sizes, no verdicts)' if args.quick else ''}")
    wanted = args.cases.split(",")
    cases = []
    if "image" in wanted:
        cases.append(image_case(n, args.threads, torch, cv2))
    if "int4" in wanted:
        cases.append(int4_case(side, side, args.threads, "float16", onnx, ort))
        cases.append(int4_case(side, side, args.threads, "float32", onnx, ort))
    if "half" in wanted:
        cases.append(half_case(n, args.threads, torch))
    for case in cases:
        times = measure(case, repeats, 0 if args.single_calls else MIN_SAMPLE_NS)
        print("\n".join(report(case, times)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
