"""Child process of the runtime check: compile on the LiteRT GPU accelerator only, then compare with the CPU.

Run as ``python -m depthport.check.gpu_worker --model M.tflite --out result.json [...]`` with the Vulkan
environment already set (it must be in place before the accelerator library loads). The result file is
rewritten after each stage, so a parent that kills this process on timeout still sees how far it got.
LiteRT's own log (rejected ops, selected adapter) goes to stderr for the parent to parse.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from depthport.core.metrics import pearson, rel_l2
from depthport.runtimes.litert_options import compiled_options

SIGNATURE = 0


def _write(out: Path, result: dict) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out)


def _compile(path: str, gpu: bool, enforce_f32: bool):
    """GPU only (no CPU fallback), or the CPU with every core."""
    from ai_edge_litert.compiled_model import CompiledModel

    options = compiled_options("gpu" if gpu else "cpu", "fp32" if enforce_f32 else "fp16", os.cpu_count() or 1)
    return CompiledModel.from_file(path, options=options)


def _random_inputs(model, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs matching the first signature: normal floats, small ints, random bools."""
    rng = np.random.default_rng(seed)
    key = list(model.get_signature_list())[SIGNATURE]
    arrays = {}
    for name, info in model.get_input_tensor_details(key).items():
        shape = tuple(info["shape"])
        if any(d < 0 for d in shape):
            raise ValueError(f"input '{name}' has a dynamic shape {list(shape)}")
        dtype = np.dtype(info["dtype"])
        if dtype.kind == "f":
            arrays[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            arrays[name] = rng.random(shape) < 0.5
        else:
            arrays[name] = rng.integers(0, 2, shape).astype(dtype)
    return arrays


def _run(model, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    key = list(model.get_signature_list())[SIGNATURE]
    in_bufs = model.create_input_buffers(SIGNATURE)
    out_bufs = model.create_output_buffers(SIGNATURE)
    for buf, name in zip(in_bufs, model.get_input_tensor_details(key)):
        buf.write(inputs[name])
    model.run_by_index(SIGNATURE, in_bufs, out_bufs)
    outs = []
    for buf, info in zip(out_bufs, model.get_output_tensor_details(key).values()):
        outs.append(buf.read(int(np.prod(info["shape"])), np.dtype(info["dtype"])))
    return outs


def compare(gpu: list[np.ndarray], cpu: list[np.ndarray]) -> tuple[float, float]:
    """Relative L2 ||gpu-cpu||/||cpu|| and Pearson r over all outputs concatenated (``verify.metrics``)."""
    a = np.concatenate([x.astype(np.float64).ravel() for x in gpu])
    b = np.concatenate([x.astype(np.float64).ravel() for x in cpu])
    if a.shape != b.shape:
        raise ValueError(f"GPU output size {a.size} != CPU output size {b.size}")
    return rel_l2(a, b), pearson(a, b)


def _numeric(path: str, model, enforce_f32: bool, seed: int) -> dict:
    inputs = _random_inputs(model, seed)
    start = time.perf_counter()
    gpu_out = _run(model, inputs)
    gpu_s = time.perf_counter() - start
    cpu_out = _run(_compile(path, gpu=False, enforce_f32=enforce_f32), inputs)
    rel, corr = compare(gpu_out, cpu_out)
    return {"file": path, "input_shapes": {k: list(v.shape) for k, v in inputs.items()},
            "rel_l2": rel, "pearson": corr, "gpu_run_s": round(gpu_s, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--numeric-file")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--allow-fp16", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    enforce_f32 = not args.allow_fp16
    result: dict = {"stage": "compile"}
    _write(args.out, result)
    start = time.perf_counter()
    try:
        model = _compile(args.model, gpu=True, enforce_f32=enforce_f32)
    except RuntimeError as exc:
        result.update(stage="done", compiled=False, error=str(exc), compile_s=round(time.perf_counter() - start, 3))
        _write(args.out, result)
        return 0
    result.update(compiled=True, fully_accelerated=model.is_fully_accelerated(),
                  compile_s=round(time.perf_counter() - start, 3))
    if args.compare:
        result["stage"] = "numeric"
        _write(args.out, result)
        path = args.numeric_file or args.model
        try:
            target = _compile(path, gpu=True, enforce_f32=enforce_f32) if args.numeric_file else model
            result["numeric"] = _numeric(path, target, enforce_f32, args.seed)
        except (RuntimeError, ValueError) as exc:
            result["numeric"] = {"file": path, "error": str(exc)}
    result["stage"] = "done"
    _write(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
