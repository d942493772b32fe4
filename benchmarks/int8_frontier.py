"""INT8 recipes for Depth Anything V2 Small at 518x686: speed against error, and against what the CPU allows.

From depthport's FP32 .tflite (built with the exact rewrites, or reused from --work), ai-edge-quantizer makes one
file per recipe (``RECIPES``): dynamic-range INT8 with more or fewer ops left float, and full-integer (static)
INT8 on all ops or on the matrix products only, calibrated on images that are not the evaluation images
(``CALIBRATION``). Then, in one process:
- accuracy over the 6 built-in images at the export shape: pooled rel. L2 and worst delta<1.25 against the
  upstream PyTorch reference (transformers, same weights), the gates of issue 16 beside them;
- latency: every file and the GEMM probe's three chains (FP32, dynamic and static INT8) timed in the same
  interleaved rounds (``depthport.bench.time_interleaved``); each recipe's speed-up over the FP32 file is the
  median of the per-round ratios, and "share of the probe's gain" is (speed-up - 1) / (probe gain - 1), against
  the probe chain of the same kind (dynamic or static);
- which op types each file runs in INT8 (read from its graph).
A file whose input is INT8 (full-integer recipes quantize the graph input) is fed the image quantized with the
input tensor's own scale and zero point, inside the timed call, as an app would.

    flock /tmp/depthport-heavy.lock .venv/bin/python benchmarks/int8_frontier.py [--reuse] [--json F]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from common import add_run_args, run_setup, time_rounds, timed
from depthport.core.report_model import Probe, load

console = Console(width=180)
REL_L2_GATE, DELTA_GATE, SHARE_GATE = 0.015, 0.99, 0.90
# Images for calibration, none of them an evaluation image (depthport.core.images.BUILTIN); all ship in the
# scikit-image wheel. The right view of the stereo pair is a different photograph from the left one we evaluate on.
CALIBRATION = ("motorcycle_right", "clock", "coins", "brick", "grass", "gravel", "page", "moon")
MATMULS = ("FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV")
QUANTIZER_NAME = {"TRANSPOSE_CONV": "CONV_2D_TRANSPOSE"}  # ai-edge-quantizer's name for the op


def calibration_images():
    from PIL import Image
    from skimage import data

    for name in CALIBRATION:
        array = data.stereo_motorcycle()[1] if name == "motorcycle_right" else getattr(data, name)()
        yield name, Image.fromarray(np.asarray(array, np.uint8)).convert("RGB")


def _static_manager(ops: tuple[str, ...] | None):
    from ai_edge_quantizer import qtyping, recipe_manager

    manager = recipe_manager.RecipeManager()
    names = [qtyping.TFLOperationName.ALL_SUPPORTED] if ops is None else [qtyping.TFLOperationName(QUANTIZER_NAME.get(op, op)) for op in ops]
    for name in names:
        manager.add_static_config(regex=".*", operation_name=name, activation_num_bits=8, weight_num_bits=8)
    return manager


def static_recipe(ops: tuple[str, ...] | None = None, keep_float: str | None = None) -> list[dict]:
    rules = _static_manager(ops).get_quantization_recipe()
    if keep_float:
        rules.append({"regex": keep_float, "operation": "*", "algorithm_key": "no_quantize"})
    return rules


def dynamic_fc_static_bmm() -> list[dict]:
    """Dynamic INT8 where XNNPACK can (weights: FC, convs), full-integer on the attention BATCH_MATMULs."""
    from depthport.export.litert_variants import INT8_KEEP_FLOAT, int8_recipe

    rules = int8_recipe(None)
    rules += _static_manager(("BATCH_MATMUL",)).get_quantization_recipe()
    rules.append({"regex": INT8_KEEP_FLOAT, "operation": "*", "algorithm_key": "no_quantize"})
    return rules


def recipes():
    """label -> (kind of probe gain it is measured against, recipe rules or a maker taking the FP32 path)."""
    from depthport.export.litert_variants import INT8_KEEP_FLOAT, int8_recipe, make_int8

    return {
        "dynamic, depthport (litert-int8)": ("int8_dynamic", make_int8),
        "dynamic, all ops": ("int8_dynamic", int8_recipe(None)),
        "dynamic, head convs too": ("int8_dynamic", int8_recipe(r"ScaleNorm|Resize")),
        "dynamic + static attention matmuls": ("int8_static", dynamic_fc_static_bmm()),
        "static, all ops": ("int8_static", static_recipe()),
        "static, depthport's float list": ("int8_static", static_recipe(keep_float=INT8_KEEP_FLOAT)),
        "static, matrix products only": ("int8_static", static_recipe(MATMULS, INT8_KEEP_FLOAT)),
    }


class Calibrator:
    """Calibration statistics of the FP32 file over ``CALIBRATION``, collected once and shared by the recipes."""

    def __init__(self, fp32: Path, hw):
        self.fp32, self.hw, self.result = fp32, hw, None

    def data(self) -> dict:
        from ai_edge_litert.interpreter import Interpreter

        from depthport.preprocess import to_tensor

        runner = Interpreter(model_path=str(self.fp32)).get_signature_runner()
        name = next(iter(runner.get_input_details()))
        return {"serving_default": [{name: to_tensor(image, self.hw)} for _, image in calibration_images()]}

    def __call__(self, quantizer):
        if self.result is None:
            self.result = timed(console, f"calibration on {len(CALIBRATION)} images",
                                lambda: quantizer.calibrate(self.data(), num_threads=2))
        return self.result


def make_file(rules, fp32: Path, calibrator: Calibrator, static: bool) -> bytes:
    if callable(rules):
        return rules(fp32)
    from ai_edge_quantizer import quantizer

    q = quantizer.Quantizer(str(fp32), rules)
    calibration = calibrator(quantizer.Quantizer(str(fp32), static_recipe())) if static else None
    result = q.quantize(calibration, enable_progress_bar=False, enable_progress_report=False)
    return bytes(result.quantized_model)


class QuantizedIORunner:
    """The probe's runner (LiteRT CompiledModel on the CPU, the file's own input/output dtypes) for a whole model
    whose input or output may be INT8: the float image is quantized with the input's scale and zero point, and the
    output dequantized, inside ``run``."""

    runtime = "litert-compiled"

    def __init__(self, path: Path, threads: int):
        from ai_edge_litert.interpreter import Interpreter

        from depthport.bench.probe import ChainRunner

        self._chain = ChainRunner(path, threads)
        self.input_shape = self._chain.input_shape
        details = Interpreter(model_path=str(path))
        self._in, self._out = details.get_input_details()[0], details.get_output_details()[0]

    def run(self, x: np.ndarray) -> np.ndarray:
        if self._in["dtype"] != np.float32:
            scale, zero = self._in["quantization"]
            info = np.iinfo(self._in["dtype"])
            x = np.clip(np.round(x / scale) + zero, info.min, info.max)
        y = self._chain.run(x)
        if self._out["dtype"] != np.float32:
            scale, zero = self._out["quantization"]
            y = (y.astype(np.float32) - zero) * scale
        return y


def int8_ops(path: Path) -> dict[str, str]:
    """op type -> "int8 n/m" for the matrix-product op types of the file (an op counts as INT8 when its first
    input is an integer tensor: static, or a dynamic-range op reading a quantized weight)."""
    from depthport.core.tflite_graph import read_graph

    total, integer = Counter(), Counter()
    for op in read_graph(path).ops:
        if op.name not in MATMULS:
            continue
        total[op.name] += 1
        if any(t.dtype in ("INT8", "INT16") for t in op.present_inputs):
            integer[op.name] += 1
    return {name: f"{integer[name]}/{total[name]}" for name in total}


def accuracy(files: dict[str, Path], reference, hw, threads: int) -> dict[str, dict]:
    from depthport.preprocess import to_tensor
    from depthport.quiet import native_stderr_muted
    from depthport.core.images import builtin_set
    from depthport.core.metrics import image_metrics, summarize

    images = builtin_set()
    xs = [to_tensor(image, hw) for _, image in images]
    with torch.no_grad():
        refs = [np.asarray(reference(torch.from_numpy(x))).reshape(hw) for x in xs]
    out = {}
    with native_stderr_muted():
        for label, path in files.items():
            runner = QuantizedIORunner(path, threads)
            out[label] = summarize([image_metrics(np.asarray(runner.run(x)).reshape(hw), r) for x, r in zip(xs, refs)])
    return out


def latency(files: dict[str, Path], hw, args) -> tuple[list[dict], dict]:
    from depthport.bench import Entry
    from depthport.bench.probe import FULL, probe_entries, summarize as probe_summary
    from depthport.preprocess import to_tensor
    from depthport.quiet import native_stderr_muted
    from depthport.core.images import builtin_image

    x = to_tensor(builtin_image("chelsea"), hw)
    with native_stderr_muted():
        entries = probe_entries(FULL, args.threads)
        entries += [Entry(label, QuantizedIORunner(path, args.threads), x) for label, path in files.items()]
    records = time_rounds(console, entries, args)
    return records, probe_summary(FULL, records, args.threads)


def fallback_share(path: Path, threads: int) -> str:
    """LiteRT's profiler on ``path`` (2 runs): the op types XNNPACK did not take and their share of the time."""
    from depthport.bench.profile import profile_tflite

    prof = profile_tflite(path, threads=threads, runs=2, warmup=1)
    if "error" in prof:
        return f"profiler: {prof['error']}"
    left = [t for t in prof["by_type"] if " " not in t["type"]]  # TFLite kernels: op type names, no spaces
    if not left:
        return "every op on XNNPACK"
    return ", ".join(f"{t['type']} x{t['ops']} {t['pct']:.0f} %" for t in left)


def fp32_file(args, spec, weights, hw, work: Path) -> Path:
    path = work / f"{spec.id.replace('-', '_')}_fp32.tflite"
    if not path.exists():
        from depthport.build import build
        from depthport.export.litert import export_tflite
        from depthport.rewrites import default_rewrites

        built = build(spec, hw, weights, rewrites=default_rewrites("exact"))
        timed(console, "depthport FP32 .tflite", lambda: export_tflite(built.model, hw, path))
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_args(p, size="518x686", work="/tmp/depthport-roofline-da2", warmup=1, iters=2)
    p.add_argument("--reuse", action="store_true", help="keep INT8 files already made in --work")
    p.add_argument("--only", help="comma-separated recipe labels (default: all)")
    p.add_argument("--profile", action="store_true",
                   help="also profile each INT8 file: the ops XNNPACK leaves to TFLite's kernels, share of the time")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    from depthport.bench import paired_ratio
    from depthport.core.machine import describe, machine_info
    from depthport.reference import reference_model
    from depthport.core.provenance import versions

    hw, spec, weights, work = run_setup(args)
    fp32 = fp32_file(args, spec, weights, hw, work)
    calibrator = Calibrator(fp32, hw)
    chosen = recipes()
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    files, kinds = {"FP32": fp32}, {}
    for i, (label, (kind, rules)) in enumerate(chosen.items()):
        path = work / f"int8_frontier_{i}.tflite"
        if not (args.reuse and path.exists()):
            data = timed(console, f"quantize: {label}",
                         lambda rules=rules, kind=kind: make_file(rules, fp32, calibrator, kind == "int8_static"))
            path.write_bytes(data)
        files[label], kinds[label] = path, kind
    acc = timed(console, "accuracy on the 6 built-in images", lambda: accuracy(files, reference_model(spec, weights), hw,
                                                                                  args.threads))
    records, probe_json = latency(files, hw, args)
    probe = load(Probe, probe_json)
    by_label = {r["label"]: r for r in records}

    table = Table(title=f"INT8 frontier: {spec.id} {hw[0]}x{hw[1]}, {'random' if weights.random else args.weights} "
                        f"weights, CPU {args.threads} threads, {args.rounds} interleaved rounds x {args.iters}")
    for col in ("recipe", "MB", "INT8 ops (FC / BMM / CONV)", "rel L2 pooled", "δ<1.25 worst", "median ms",
                "speed-up vs FP32", "probe gain", "share of gain", "gates"):
        table.add_column(col)
    rows = []
    for label, path in files.items():
        rec, fig = by_label[label], acc[label]
        speedup = paired_ratio(by_label["FP32"], rec)
        gain = probe.int8_gain[kinds[label]].paired if label in kinds else None
        share = (speedup - 1) / (gain - 1) if gain and gain > 1 else None  # no gain to realise otherwise
        ops = int8_ops(path)
        ok = fig["rel_l2_pooled"] <= REL_L2_GATE and fig["delta125_worst"] >= DELTA_GATE
        rows.append({"recipe": label, "file": str(path), "mb": path.stat().st_size / 1e6, "int8_ops": ops,
                     "rel_l2_pooled": fig["rel_l2_pooled"], "delta125_worst": fig["delta125_worst"],
                     "median_ms": rec["median"], "speedup_vs_fp32": speedup, "probe_kind": kinds.get(label),
                     "probe_gain": gain, "share_of_gain": share, "accuracy_gates": ok})
        table.add_row(label, f"{path.stat().st_size / 1e6:.2f}",
                      " / ".join(ops.get(k, "-") for k in ("FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D")),
                      f"{fig['rel_l2_pooled']:.3%}", f"{fig['delta125_worst']:.4f}", f"{rec['median']:.0f}",
                      f"{speedup:.3f}", f"{gain:.3f} ({kinds[label].removeprefix('int8_')})" if gain else "-",
                      f"{share:.0%}" if share is not None else ("none to realise" if gain else "-"),
                      "-" if label == "FP32" else ("[green]within[/]" if ok else "[red]outside[/]"))
    console.print(table)
    if args.profile:
        for label, path in files.items():
            if label != "FP32":
                text = timed(console, f"profile {label}", lambda path=path: fallback_share(path, args.threads))
                console.print(f"  not on XNNPACK: {text}")
                next(r for r in rows if r["recipe"] == label)["not_on_xnnpack"] = text
    for kind, g in probe.int8_gain.items():
        console.print(f"probe {kind}: {g.paired:.3f}x over the FP32 chain (paired), FP32 chain "
                      f"{probe.peak_gmac_per_s:.1f} GMAC/s")
    console.print(f"gates: pooled rel L2 <= {REL_L2_GATE:.1%}, worst δ<1.25 >= {DELTA_GATE}, share of the probe's gain "
                  f">= {SHARE_GATE:.0%}; calibration images: {', '.join(CALIBRATION)} (scikit-image)")
    machine = machine_info(args.threads)
    console.print(f"machine: {describe(machine)}")
    console.print(f"versions: {versions()}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "probe": probe_json, "latency": records,
                                               "machine": machine, "versions": versions(),
                                               "calibration": CALIBRATION}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
