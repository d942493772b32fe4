"""Prompt Depth Anything on LiteRT (#25, first part): the two-input export form against transformers'
PromptDepthAnythingForDepthEstimation at the default shape and one other, the FP32 .tflite (named inputs ``image``
and ``prompt``) against the export form on LiteRT's CPU, its op count and GPU rules statically at full size, and
the real LiteRT GPU accelerator (SwiftShader): compiled GPU-only at full size, run and compared at a small shape.

    python benchmarks/prompt_da.py [--model prompt-da-small] [--size 756x1008] [--prompt-size 192x256]
        [--other 1008x756:256x192] [--small 126x168] [--weights random|REPO|PATH] [--json FILE]

The prompts are synthetic (``core.prompts.synthetic_prompt``: a seeded, smooth metric depth of 0.5 to 4.5 m at the
prompt shape), not LiDAR: they test the arithmetic, not accuracy. Random weights unless --weights names a
checkpoint. `depthport export prompt-da-small` runs the whole pipeline; this script adds the transformers parity at
a second shape and the GPU accelerator at full size.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from depthport.build import build, resolve_weights
from depthport.check.gpu_runtime import run_gpu_check
from depthport.check.static import check_static
from depthport.core.images import builtin_image
from depthport.core.machine import describe, machine_info
from depthport.core.report_model import dump
from depthport.core.prompts import synthetic_prompt
from depthport.export.litert import export_tflite
from depthport.preprocess import parse_size
from depthport.quiet import native_stderr_muted
from depthport.registry import get_spec

IMAGES = ("astronaut", "camera", "chelsea")


def rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def pairs(spec, hw, prompt_hw):
    return [(name, torch.from_numpy(spec.preprocess(builtin_image(name), hw)),
             torch.from_numpy(synthetic_prompt(prompt_hw, seed)[None, None])) for seed, name in enumerate(IMAGES)]


def eager_vs_reference(spec, weights, reference, hw, prompt_hw) -> tuple[torch.nn.Module, list, dict]:
    model = build(spec, hw, weights, prompt_hw=prompt_hw).model
    data, errors = pairs(spec, hw, prompt_hw), {}
    with torch.no_grad():
        for name, x, p in data:
            errors[name] = rel_l2(model(x, p), reference(x, p))
    return model, data, errors


def litert_vs_eager(path: Path, model, data, threads: int) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(str(path), num_threads=threads)
    runner = interpreter.get_signature_runner()
    out = {"inputs": interpreter.get_signature_list()["serving_default"]["inputs"], "rel_l2": {}}
    with torch.no_grad():
        for name, x, p in data:
            (y,) = runner(image=x.numpy(), prompt=p.numpy()).values()
            out["rel_l2"][name] = rel_l2(y, model(x, p))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="prompt-da-small")
    ap.add_argument("--size", help="image HxW (default: the model's)")
    ap.add_argument("--prompt-size", help="prompt HxW (default: the model's, ARKit 192x256)")
    ap.add_argument("--other", default="1008x756:256x192", help="the second shape, IMAGE:PROMPT (default: portrait)")
    ap.add_argument("--small", default="126x168", help="image shape of the GPU accelerator's numerical run")
    ap.add_argument("--weights", default="random")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()

    spec = get_spec(args.model)
    hw = parse_size(args.size) if args.size else spec.default_hw
    prompt_hw = parse_size(args.prompt_size, multiple=1) if args.prompt_size else spec.prompt_hw
    other_hw, other_prompt = (parse_size(s, multiple=m) for s, m in zip(args.other.split(":"), (14, 1)))
    weights = resolve_weights(spec, args.weights)
    info = machine_info(args.threads)
    print(f"{spec.id}: weights {weights.source}{'  (RANDOM WEIGHTS: arithmetic only)' if weights.random else ''}; "
          f"{describe(info)}")
    reference = spec.arch.reference(spec, weights)
    figures = {"model": spec.id, "weights": weights.source, "random_weights": weights.random, "machine": info}

    for label, (ihw, phw) in {"default": (hw, prompt_hw), "other": (other_hw, other_prompt)}.items():
        t0 = time.perf_counter()
        model, data, errors = eager_vs_reference(spec, weights, reference, ihw, phw)
        figures[f"eager_vs_transformers_{label}"] = {"image_hw": list(ihw), "prompt_hw": list(phw), "rel_l2": errors}
        print(f"export form vs transformers at {ihw[0]}x{ihw[1]}, prompt {phw[0]}x{phw[1]}: max rel L2 "
              f"{max(errors.values()):.2e} ({', '.join(f'{k} {v:.2e}' for k, v in errors.items())}); "
              f"{time.perf_counter() - t0:.0f} s")
        if label == "default":
            default_model, default_data = model, data

    with tempfile.TemporaryDirectory(prefix="prompt-da-") as tmp:
        path = Path(tmp) / f"{spec.id.replace('-', '_')}_fp32.tflite"
        t0 = time.perf_counter()
        with native_stderr_muted():
            export_tflite(default_model, hw, path)
        convert_s = time.perf_counter() - t0
        violations = check_static(path)
        from depthport.core.tflite_graph import graph_summary

        summary = graph_summary(path)
        severities = Counter(v.severity for v in violations)
        with native_stderr_muted():
            lite = litert_vs_eager(path, default_model, default_data, args.threads)
        figures["litert_fp32"] = {"convert_s": round(convert_s, 1), "op_count": summary["op_count"],
                                  "ops": summary["op_histogram"], "max_tensor_rank": summary["max_tensor_rank"],
                                  "static_errors": severities.get("error", 0),
                                  "static_warnings": severities.get("warning", 0),
                                  "static_rules": sorted({f"{v.op}:{v.rule}:{v.severity}" for v in violations}),
                                  **lite}
        print(f"LiteRT FP32 {hw[0]}x{hw[1]}: {summary['op_count']} ops, max rank {summary['max_tensor_rank']}, "
              f"inputs {lite['inputs']}, converted in {convert_s:.0f} s; GPU rules: {severities.get('error', 0)} "
              f"errors, {severities.get('warning', 0)} warnings; vs export form max rel L2 "
              f"{max(lite['rel_l2'].values()):.2e}")
        full = run_gpu_check(path, compare=False)
        small_hw = parse_size(args.small)
        small = Path(tmp) / "small.tflite"
        with native_stderr_muted():
            export_tflite(build(spec, small_hw, weights, prompt_hw=prompt_hw).model, small_hw, small)
        numeric = run_gpu_check(small)
        figures["gpu_accelerator"] = {
            "full_size": {"fully_delegated": full.fully_delegated, "rejected_ops": dump(full.rejected_ops),
                          "note": full.note},
            "small": {"fully_delegated": numeric.fully_delegated, "rejected_ops": dump(numeric.rejected_ops),
                      "rel_l2_vs_cpu": numeric.rel_l2_vs_cpu, "numeric_ok": numeric.numeric_ok, "note": numeric.note},
            "small_hw": list(small_hw)}
        print(f"GPU accelerator ({full.vulkan or 'no Vulkan'}): full size fully delegated = "
              f"{full.fully_delegated} ({full.note}); {small_hw[0]}x{small_hw[1]}: {numeric.note}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
