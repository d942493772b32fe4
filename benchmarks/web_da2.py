"""Depth Anything V2 in the browser and as a dynamic-shape ONNX: the figures of `--targets web,web-onnx,onnx-dynamic`.

    flock /tmp/depthport-heavy.lock python benchmarks/web_da2.py [--size 518x686] [--fast-shaders] [--json out.json]

One export (random weights by default) verified in headless Chromium (Debian's chromium, WebGPU on its SwiftShader
adapter): LiteRT.js and onnxruntime-web on WASM at the full size against transformers; WebGPU FP32 and FP16 on a
small re-export of the same model (SwiftShader emulates the GPU on the CPU), against the same file on WASM, with
depthport's FP16 predictions beside the FP16 run; the time per inference of each backend (SwiftShader times are
not GPU times); the dynamic ONNX against transformers at three shapes. Prints one table; the export folder keeps
report.json, report.html (with the page screenshots) and the card.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import add_run_args, run_setup, timed
from depthport.core.report_model import BrowserRun, Comparison, Parity, Report, load_report
from rich.console import Console
from rich.table import Table


def pooled(section) -> float | None:
    """A section's pooled rel. L2 (a file's parity, a browser run's comparison), or None where it holds no figures."""
    return section.rel_l2_pooled if isinstance(section, (Parity, Comparison)) else None


def rows(report: Report) -> list[tuple]:
    """(what, backend, shape, figure, limit, verdict, time) per measured figure."""
    out = []
    for art in report.artifacts:
        if art.browser:
            runs = art.browser.backends
            wasm = runs.get("wasm", BrowserRun())
            out.append((art.file, "WASM vs transformers", "x".join(map(str, wasm.shape)), pooled(art.parity), 2e-6,
                        art.verdict("parity").state, wasm.time))
            for name, check in (("webgpu-fp32", "webgpu_fp32"), ("webgpu-fp16", "webgpu_fp16")):
                run, verdict = runs.get(name), art.verdict(check)
                if not run:
                    out.append((art.file, name, "-", None, None, verdict.state, None))
                    continue
                fp16 = run.fp16
                label = name + " vs CPU" + (f" (FP16 {fp16.mode}; predicted storage {fp16.predicted.storage:.3g}, "
                                           f"arithmetic {fp16.predicted.arithmetic:.3g})" if fp16 else "")
                out.append((art.file, label, "x".join(map(str, run.shape)), pooled(run.vs_cpu),
                            verdict.thresholds.get("rel_l2_vs_cpu"), verdict.state, run.time))
        if isinstance(art.shapes_parity, dict):
            _, _, h, w = art.input_shape
            out.append((art.file, "vs transformers", f"{h}x{w}", pooled(art.parity), 2e-6,
                        art.verdict("parity").state, None))
            for hw, entry in art.shapes_parity.items():
                out.append((art.file, "vs transformers", hw, entry.rel_l2_pooled, 2e-6, entry.gate.state, None))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(parser, "518x686", "/tmp/depthport-bench/web", 1, 1)
    parser.add_argument("--targets", default="web,web-onnx,onnx-dynamic")
    parser.add_argument("--images", help="folder of verification images (default: the 6 built-in ones)")
    parser.add_argument("--fast-shaders", action="store_true", help="Chromium without WebGPU's workgroup zeroing")
    args = parser.parse_args()
    console = Console()
    hw, spec, weights, work = run_setup(args)
    from depthport.pipeline import ExportOptions, StageOptions, parse_targets, run_export

    opts = ExportOptions(model=spec.id, weights=weights, input_hw=hw, out_dir=work / "out",
                         targets=parse_targets(args.targets), command="benchmarks/web_da2.py",
                         stages=StageOptions(images=args.images, threads=args.threads, skip={"ledger", "bench"},
                                             web_fast_shaders=args.fast_shaders))
    data = timed(console, f"export {spec.id} {hw[0]}x{hw[1]} -> {args.targets}", lambda: run_export(opts))
    report = load_report(data)
    table = Table(title=f"{spec.id} {hw[0]}x{hw[1]}, {'random' if weights.random else 'published'} weights, "
                        f"rel. L2 (pooled over {len(report.verify.images)} images)")
    for col in ("file", "what", "shape", "rel L2", "limit", "verdict", "ms first / median (where)"):
        table.add_column(col, overflow="fold")
    for file, what, shape, value, limit, state, t in rows(report):
        when = "-" if t is None or t.first_ms is None else (
            f"{t.first_ms:.0f} / " + ("-" if t.median_ms is None else f"{t.median_ms:.0f}") + f" ({t.label})")
        table.add_row(file, what, shape, "-" if value is None else f"{value:.3e}", "-" if limit is None else f"{limit:g}",
                      state, when)
    console.print(table)
    for art in report.artifacts:
        console.print(f"{art.file}: {art.status} ({art.status_reason})")
    console.print(f"report: {opts.out_dir / 'report.html'}")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1, default=str))


if __name__ == "__main__":
    main()
