"""Depth Anything V2 from an official `.pth` checkpoint: export, fp32 gate and parity against the official computation.

Writes random weights for the model as an official-format checkpoint (fused qkv, `pretrained.` / `depth_head.` names,
the MAE mask token included), exports LiteRT FP32 through `depthport.pipeline.run_export` and prints the fp32 gate
verdict and the parity figures against the reference the export chose (for official checkpoints: the official
DINOv2 position-embedding resampling, `(n + 0.1) / 37`). For contrast it also measures the same file against
transformers' own resampling, which is a different model away from 518x518.

    python benchmarks/official_reference_da2.py [--model da2-small] [--size 518x686] [--no-fp64] [--work DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from depthport.build import resolve_weights
from depthport.pipeline import ExportOptions, StageOptions, run_export
from depthport.preprocess import parse_size, to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import TransformersReference
from depthport.registry import get_spec
from depthport.runtimes import load_runner
from depthport.core.images import builtin_set
from depthport.core.metrics import pooled_rel_l2
from depthport.core.report_model import Parity, load_report
from depthport.core.schema import FAIL
from depthport.weights.formats import OFFICIAL


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="da2-small", help="model id (da2-tiny for a dry run)")
    ap.add_argument("--size", default="518x686")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-fp64", action="store_true", help="skip the float64 reference (and fp64_error_ratio)")
    ap.add_argument("--work", help="folder for the checkpoint and the export (default: a temporary folder)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec, hw = get_spec(args.model), parse_size(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        random = resolve_weights(spec, "random")
        state = OFFICIAL.from_depthport(random.state)
        state["pretrained.mask_token"] = torch.zeros(1, random.state["encoder.cls_token"].shape[-1])
        pth = work / f"{spec.id.replace('-', '_')}_official.pth"
        torch.save(state, pth)
        req = ExportOptions(model=spec.id, weights=str(pth), input_hw=hw, out_dir=work / "out",
                            targets=("litert-fp32",),
                            command=f"python benchmarks/official_reference_da2.py --size {args.size}",
                            stages=StageOptions(threads=args.threads, no_fp64=args.no_fp64,
                                                skip={"ledger", "bench", "report", "card"}))
        t0 = time.perf_counter()
        with native_stderr_muted():
            report = load_report(run_export(req))
        seconds = time.perf_counter() - t0
        [art] = report.artifacts
        parity, gate = art.parity, art.verdict("parity")
        print(f"== {spec.id} {hw[0]}x{hw[1]}, random weights written as an official .pth ({len(state)} keys)")
        print(f"export + verify: {seconds:.0f} s; position-embedding formula: {report.pos_embed_formula}")
        print(f"reference: {report.verify.reference}")
        print(f"images: {len(report.verify.images)} ({report.verify.image_source})")
        print(f"fp32 gate: {'PASS' if gate.ok else 'FAIL' if gate.state == FAIL else 'NOT JUDGED'}"
              f" (thresholds {gate.thresholds}){'; ' + gate.reason if gate.reasons else ''}")
        if isinstance(parity, Parity):
            for key in ("rel_l2_pooled", "pearson_worst", "max_abs", "fp64_error_ratio", "upstream_fp32_vs_fp64"):
                value = getattr(parity, key)
                if value is not None:
                    print(f"  tflite vs official computation, {key}: "
                          + (f"{value:.9f}" if key.startswith("pearson") else f"{value:.3e}"))
            if isinstance(parity.vs_eager, Parity):
                print(f"  tflite vs depthport eager, rel_l2_pooled: {parity.vs_eager.rel_l2_pooled:.3e}")
        loaded = resolve_weights(spec, str(pth))
        plain = TransformersReference(spec, loaded)
        pairs = []
        with native_stderr_muted():
            runner = load_runner(work / "out" / art.file, threads=args.threads)
            for _, image in builtin_set():
                x = to_tensor(image, hw)
                with torch.no_grad():
                    pairs.append((runner.run(x), plain(torch.from_numpy(x)).numpy()))
        print(f"contrast: the same file vs transformers' own resampling (not the weights' upstream), "
              f"rel_l2_pooled {pooled_rel_l2(pairs):.3e}")


if __name__ == "__main__":
    main()
