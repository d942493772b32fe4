"""Integration snippets for the exported files, with their real names, shapes and preprocessing."""

from __future__ import annotations

import numpy as np

MEAN, STD = "0.485f, 0.456f, 0.406f", "0.229f, 0.224f, 0.225f"


def _normalized(report: dict) -> bool:
    return "folded" not in report.get("normalization", "")


def _meaning(report: dict) -> str:
    """What the output values are, in words (from the model spec, through report.json)."""
    return {"depth": "depth up to scale (larger = farther)"}.get(report.get("output_space", ""),
                                                                 "relative inverse depth (larger = nearer)")


def gpu_precision(report: dict, art: dict) -> tuple[str, str]:
    """("FP32" | "FP16", why): FP16 only when the FP16-compute prediction passed on every verification image."""
    from .schema import PASS

    check = (art.get("checks") or {}).get("fp16_compute") or {}
    images = set((art.get("fp16_compute") or {}).get("images", []))
    verified = set((report.get("verify") or {}).get("images", []))
    if check.get("state") == PASS and verified and verified <= images:
        return "FP16", f"FP16 compute was predicted within tolerance on all {len(verified)} verification images"
    if check.get("state") == PASS:
        return "FP32", "the FP16-compute prediction did not cover every verification image"
    why = "; ".join(check.get("reasons", [])) or "the FP16-compute prediction was not measured"
    return "FP32", f"FP16 compute is not proven safe for this file ({why})"


def kotlin_litert(report: dict, art: dict) -> str:
    _, _, h, w = art["input_shape"]
    precision, why = gpu_precision(report, art)
    gpu_options = ("CompiledModel.Options(Accelerator.GPU).apply {\n"
                   f"        // GPU precision set explicitly: {precision}, because {why}\n"
                   f"        gpuOptions = CompiledModel.GpuOptions(precision = CompiledModel.GpuOptions.Precision.{precision})\n    }}")
    norm = (f"        val mean = floatArrayOf({MEAN}); val std = floatArrayOf({STD})\n"
            "        input[c * plane + i] = (rgb[c] / 255f - mean[c]) / std[c]" if _normalized(report)
            else "        input[c * plane + i] = rgb[c] / 255f")
    return f"""```kotlin
// LiteRT CompiledModel on the GPU: {art['file']} takes [1, 3, {h}, {w}] float32 NCHW, returns {art['output_shape']}
val model = CompiledModel.create(context.assets, "{art['file']}",
    {gpu_options}, null)
val inputs = model.createInputBuffers(); val outputs = model.createOutputBuffers()
val bmp = Bitmap.createScaledBitmap(photo, {w}, {h}, true)   // stretch to the export shape (no letterbox)
val plane = {h} * {w}; val input = FloatArray(3 * plane)
for (i in 0 until plane) {{
    val p = bmp.getPixel(i % {w}, i / {w}); val rgb = floatArrayOf(Color.red(p) * 1f, Color.green(p) * 1f, Color.blue(p) * 1f)
    for (c in 0 until 3) {{
{norm}
    }}
}}
inputs[0].writeFloat(input)
model.run(inputs, outputs)
val depth = outputs[0].readFloat()   // {h * w} values, row-major: {_meaning(report)}
```"""


def python_snippet(report: dict, art: dict) -> str:
    _, _, h, w = art["input_shape"]
    pre = ("x = (np.asarray(img, np.float32) / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]"
           if _normalized(report) else "x = np.asarray(img, np.float32) / 255")
    common = f"""import numpy as np
from PIL import Image

img = Image.open("photo.jpg").convert("RGB").resize(({w}, {h}), Image.BICUBIC)
{pre}
x = np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)   # [1, 3, {h}, {w}]
"""
    name = art["file"]
    if name.endswith(".tflite"):
        run = f"""from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.cpu_options import CpuOptions
from ai_edge_litert.hardware_accelerator import HardwareAccelerator
from ai_edge_litert.options import Options

model = CompiledModel.from_file("{name}", options=Options(HardwareAccelerator.CPU, cpu_options=CpuOptions(num_threads=4)))
inp, out = model.create_input_buffers(0), model.create_output_buffers(0)
inp[0].write(x)
model.run_by_index(0, inp, out)
depth = np.asarray(out[0].read({int(np.prod(art['output_shape']))}, np.float32)).reshape({tuple(art['output_shape'])})"""
    elif name.endswith(".pte"):
        run = f"""import torch
from executorch.runtime import Runtime

program = Runtime.get().load_program("{name}")
depth = program.load_method("forward").execute([torch.from_numpy(x)])[0].numpy()"""
    else:
        run = f"""import onnxruntime as ort

session = ort.InferenceSession("{name}", providers=["CPUExecutionProvider"])
depth = session.run(None, {{session.get_inputs()[0].name: x}})[0]"""
    return f"```python\n{common}{run}\n```"


def swift_executorch(report: dict, art: dict) -> str:
    _, _, h, w = art["input_shape"]
    backend = art.get("backend", "xnnpack")
    precision = ("Core ML computes in float16, fixed at export (compute_precision float16)" if backend == "coreml"
                 else f"XNNPACK on the CPU computes in the file's own precision ({art.get('precision', 'fp32')}); "
                      "no GPU precision applies")
    return f"""```swift
// ExecuTorch on iOS: {art['file']} takes [1, 3, {h}, {w}] float32, ImageNet-normalised RGB
// Precision, stated explicitly: {precision}
import ExecuTorch

let module = Module(filePath: Bundle.main.path(forResource: "{art['file'].rsplit('.', 1)[0]}", ofType: "pte")!)
try module.load("forward")
let input = Tensor<Float>(pixels, shape: [1, 3, {h}, {w}])   // pixels: (rgb / 255 - mean) / std, planar RGB
let depth = try Tensor<Float>(module.forward(input))           // {art['output_shape']}: {_meaning(report)}
```"""


def snippets(report: dict) -> list[tuple[str, str]]:
    """(title, markdown code block) for each shipped file kind: one per runtime, the first file of each."""
    out, seen = [], set()
    for art in report.get("artifacts", []):
        if art.get("status", "unverified") == "not shipped":
            continue
        kind = art["file"].rsplit(".", 1)[-1]
        if kind in seen:
            continue
        seen.add(kind)
        if kind == "tflite":
            out.append((f"Android (Kotlin, LiteRT GPU): {art['file']}", kotlin_litert(report, art)))
        if kind == "pte":
            out.append((f"iOS (Swift, ExecuTorch): {art['file']}", swift_executorch(report, art)))
        out.append((f"Python: {art['file']}", python_snippet(report, art)))
    return out

