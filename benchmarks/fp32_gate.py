"""The FP32 gate against float64, from data: the ratio of each correct FP32 file and of each planted defect.

For every model id (real configurations, random weights) at one shape, exports the FP32 .tflite (LiteRT, XNNPACK
CPU) and the FP32 .pte (ExecuTorch XNNPACK) and prints ``fp64_error_ratio``: the file's error against the upstream
model in float64 over upstream PyTorch float32's own. Then, on the .tflite, the planted defects of
``depthport.verify.planted``. The gate (``verify.gates.DEFAULTS["fp32"]["fp64_error_ratio"]``) must pass every
correct file and refuse every defect that moves the output beyond FP32 rounding. Ratios depend on the CPU's
kernels (AVX2 vs AVX-512): the machine is printed.

    python benchmarks/fp32_gate.py [--models da2-small,da3-small] [--size 518x686] [--images 3] [--no-defects]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from depthport.build import build, resolve_weights
from depthport.core.images import builtin_set
from depthport.core.machine import describe, machine_info
from depthport.core.schema import ParityJson
from depthport.export.executorch import FORMS, backend_form, lower_xnnpack, write_pte
from depthport.export.litert import export_tflite
from depthport.preprocess import parse_size
from depthport.quiet import native_stderr_muted
from depthport.registry import MODELS
from depthport.verify.gates import DEFAULTS
from depthport.verify.planted import BELOW_FP32_NOISE, DEFECTS
from depthport.verify import make_references, verify_file


def ratio(path: Path, refs, threads: int) -> float:
    record, _, _ = verify_file(path, refs, threads)
    return ParityJson(record).fp64_error_ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", help="comma-separated ids (default: every registered id but the tiny test configs)")
    ap.add_argument("--size", help="one shape for every id (default: each id's default shape)")
    ap.add_argument("--images", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-defects", action="store_true")
    args = ap.parse_args()
    import torch

    console = Console(width=200)
    ids = args.models.split(",") if args.models else [i for i, s in MODELS.items() if not s.hidden]
    gate = DEFAULTS["fp32"]["fp64_error_ratio"]
    images = builtin_set()[: args.images]
    console.print(f"machine: {describe(machine_info(args.threads))}; torch {torch.__version__}; gate {gate:g}x; "
                  f"{args.size or 'default shapes'}, {len(images)} images, random weights")
    table = Table(title="fp64_error_ratio (file vs float64 / upstream FP32 vs float64)")
    for col in ("model", "file", "ratio", "gate"):
        table.add_column(col)
    work = Path(tempfile.mkdtemp(prefix="depthport-fp32-gate-"))
    for model_id in ids:
        spec = MODELS[model_id]
        hw = parse_size(args.size) if args.size else spec.default_hw
        weights = resolve_weights(spec, "random")
        built = build(spec, hw, weights)
        refs = make_references(spec, weights, hw, None, True, images, args.threads, fp64=True)
        with native_stderr_muted():
            files = {"litert-fp32": export_tflite(built.model, hw, work / f"{model_id}.tflite")}
            manager, _ = lower_xnnpack(backend_form(built.model, **FORMS["fp32"])[0], torch.zeros(1, 3, *hw))
            files["xnnpack-fp32"] = write_pte(manager, work / f"{model_id}.pte")
            if not args.no_defects:
                for name, make in DEFECTS.items():
                    files[name] = export_tflite(make(spec, hw, weights), hw, work / f"{model_id}_{name}.tflite")
        for name, path in files.items():
            r = ratio(path, refs, args.threads)
            planted = name in DEFECTS
            expect = ("below FP32 noise" if name in BELOW_FP32_NOISE else "must fail") if planted else "must pass"
            ok = (r <= gate) != planted or name in BELOW_FP32_NOISE
            table.add_row(model_id, name, f"{r:.3f}", f"{'pass' if r <= gate else 'FAIL'} ({expect})"
                          + ("" if ok else "  <-- WRONG"))
            console.print(f"{model_id} {name}: {r:.3f}")
    console.print(table)


if __name__ == "__main__":
    main()
