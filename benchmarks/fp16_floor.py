"""FP16 against its floor: PyTorch half precision, depthport's fp16 .pte measured, and the FP16 predictions.

For one model and shape (random weights unless --weights), on scikit-image's astronaut, camera and chelsea, each
against the upstream model in FP32:
- PyTorch eager in half precision (the upstream model ``.half()`` on the CPU, whose kernels accumulate in FP32):
  the FP16 floor;
- depthport's ``xnnpack-fp16`` .pte as ExecuTorch runs it here, labelled with what this CPU computes (FP16
  arithmetic with avx512_fp16 / ARMv8.2, else FP16 storage only);
- the predictions of the same file's form: XNNPACK's f16 kernels on ARM (``accumulate="xnnpack-arm"``: subnormals
  flushed) and on x86 with avx512_fp16 ("xnnpack"), a GPU under its default FP16 precision ("fp16"), FP16 tensors
  with FP32 accumulation ("fp32");
- with ``--ledger``: the FP16 error ledger of the ARM XNNPACK prediction (what keeping each part in FP32 buys);
- the calibration figures measured on FP16 arithmetic (``depthport.fp16.calibration``) when they match;
- with ``--arm64``: the .pte measured on an emulated ARMv8.2-A CPU with FP16 arithmetic instead of this CPU
  (``depthport.runtimes.arm64``; ``benchmarks/arm64/setup.sh`` builds it), FP16 accumulation confirmed by a
  sentinel file in the same run;
- with ``--record`` where the file was computed in FP16 arithmetic (avx512_fp16, ARMv8.2, ``--arm64``): the
  measured row written into the package's ``calibration.json`` (replacing the entry for the same model, target, shape,
  weights and hardware), so that machines without FP16 arithmetic check the prediction against it
  (tests/export/test_executorch.py for the tiny configs).

    python benchmarks/fp16_floor.py [--model da2-small] [--size 518x686] [--target xnnpack-fp16-split]
                                    [--fp16-safe] [--split-k 16] [--ledger] [--no-pte] [--arm64] [--record]
                                    [--time ROUNDS] [--predict xnnpack,fp16]
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import platform
import tempfile
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from depthport.build import build
from depthport.check.fp16_compute import fp16_arithmetic_here, xnnpack_fp16_form
from depthport.core.images import builtin_image
from depthport.core.machine import describe, machine_info
from depthport.core.metrics import image_metrics, summarize
from depthport.core.report_model import Machine, load
from depthport.core.schema import Fp16ArithmeticJson
from depthport.export.executorch import FORMS, backend_form, lower_xnnpack, write_pte
from depthport.export.targets import FP16_PTE_TARGETS
from depthport.fp16 import simulate_fp16
from depthport.fp16.calibration import CALIBRATION, load_calibration, matching, target_of, write_calibration
from depthport.fp16.ledger import fp16_ledger
from depthport.preprocess import parse_size, to_tensor
from depthport.quiet import native_stderr_muted
from depthport.reference import reference_model
from depthport.rewrites import default_rewrites
from depthport.runtimes import load_runner
from depthport.runtimes.arm64 import run_pte

ARM64_HARDWARE = "arm64 neonfp16arith (qemu)"
X86_HARDWARE = "x86 avx512_fp16"

IMAGES = ("astronaut", "camera", "chelsea")
ARM_PREDICTED = "predicted: XNNPACK f16 kernels on ARM (subnormals flushed)"
X86_PREDICTED = "predicted: XNNPACK f16 kernels on x86 avx512_fp16"
PREDICTIONS = {"xnnpack-arm": ARM_PREDICTED, "xnnpack": X86_PREDICTED, "fp16": "predicted: GPU default FP16",
               "fp32": "predicted: FP16 tensors, FP32 accumulation"}


def depth(out) -> np.ndarray:
    out = out.get("predicted_depth") if isinstance(out, dict) else out
    return np.asarray(out.detach().double() if torch.is_tensor(out) else out, np.float64).reshape(-1)


def figures(outputs: list[np.ndarray], refs: list[np.ndarray]) -> dict:
    per = [image_metrics(a, b) for a, b in zip(outputs, refs)]
    out = summarize(per)
    out["per_image_rel_l2"] = [m["rel_l2"] for m in per]
    out["finite"] = all(bool(np.isfinite(a).all()) for a in outputs)
    return out


def record(console: Console, args, built, measured: dict, found: dict) -> None:
    """Replace (or add) this model, shape and weights' entry in calibration.json with the measured figures."""
    arithmetic = Fp16ArithmeticJson(found)
    if not arithmetic.arithmetic:
        console.print(f"[red]not recorded: {arithmetic.reason}[/]")
        return
    info = load(Machine, machine_info(args.threads))
    entry = {
        "what": f"depthport {args.target} .pte run by ExecuTorch's XNNPACK in FP16 arithmetic, against the upstream "
                "model in FP32",
        "target": args.target,
        "form": FORMS[args.target],
        "cpu": f"{info.cpu}, {info.cores} cores",
        "isa": sorted(f for f, on in (info.isa or {}).items() if on),
        "versions": {"depthport": provenance_commit(), "torch": torch.__version__,
                     "executorch": importlib.metadata.version("executorch")},
        "model": args.model, "weights": built.weights.source, "size": list(parse_size(args.size)),
        "images": list(args.images),
        "worst": {"rel_l2": max(measured["per_image_rel_l2"]), "pearson": measured["pearson_worst"],
                  "delta125": measured["delta125_worst"]},
        "per_image": {"rel_l2": dict(zip(args.images, measured["per_image_rel_l2"]))},
        "hardware": found["hardware"],
        "source": "python benchmarks/fp16_floor.py --model {} --size {}{}{} --record".format(
            args.model, args.size, "" if args.target == "xnnpack-fp16" else f" --target {args.target}",
            " --arm64" if args.arm64 else ""),
    }
    if args.arm64:
        entry["cpu"] = f"{arithmetic.reason}; host {info.cpu}, {info.cores} cores"
        entry["isa"] = ["asimdhp", "fphp"]
        entry["versions"]["qemu"] = found["qemu"]
        entry["versions"]["runtime"] = "executorch 1.5.1 and torch 2.13.0 aarch64 wheels (PyPI), in the emulator"
    key = ("model", "size", "weights", "hardware")
    kept = [c for c in load_calibration()
            if [c.get(k) for k in key] + [target_of(c)] != [entry[k] for k in key] + [args.target]]
    write_calibration(kept + [entry])
    console.print(f"recorded in {CALIBRATION}")


def qemu_version() -> str:
    import shutil
    import subprocess

    qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64") or "qemu-aarch64"
    return subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.split("\n")[0]


def provenance_commit() -> str:
    import subprocess

    try:
        return "main " + subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="da2-small")
    ap.add_argument("--size", default="518x686")
    ap.add_argument("--weights", default="random")
    ap.add_argument("--fp16-safe", action="store_true", help="build with both FP16 guards (--fp16-safe)")
    ap.add_argument("--target", default="xnnpack-fp16", choices=FP16_PTE_TARGETS,
                    help="the fp16 .pte target whose file is measured and whose form is predicted")
    ap.add_argument("--split-k", type=int, help="the target's form with reductions in chunks of N (export.split_k)")
    ap.add_argument("--ledger", action="store_true")
    ap.add_argument("--no-pte", action="store_true", help="skip the measured .pte")
    ap.add_argument("--time", type=int, metavar="ROUNDS",
                    help="with a split form: time it, xnnpack-fp16 and xnnpack-fp32 (the first, the ratios' base), "
                         "interleaved, ROUNDS rounds")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--predict", type=lambda v: tuple(m for m in v.split(",") if m), default=tuple(PREDICTIONS),
                    help=f"comma-separated prediction modes (default all: {','.join(PREDICTIONS)}; '' for none)")
    ap.add_argument("--images", type=lambda v: tuple(n for n in v.split(",") if n), default=IMAGES,
                    help=f"comma-separated built-in images (default {','.join(IMAGES)}; --record keeps all three)")
    ap.add_argument("--arm64", action="store_true",
                    help="measure the .pte on the emulated ARMv8.2-A CPU with FP16 arithmetic (benchmarks/arm64)")
    ap.add_argument("--record", action="store_true",
                    help="write the measured row into depthport/fp16/calibration.json (FP16-arithmetic runs only)")
    args = ap.parse_args()
    if set(args.predict) - set(PREDICTIONS):
        ap.error(f"--predict: unknown mode(s) {', '.join(sorted(set(args.predict) - set(PREDICTIONS)))}")
    if args.record and (args.no_pte or args.fp16_safe or args.split_k or args.images != IMAGES):
        ap.error("--record keeps a registered target's file measured on the three images: drop --no-pte, "
                 "--fp16-safe, --split-k, --images")
    torch.set_num_threads(args.threads)
    console = Console(width=200)
    hw = parse_size(args.size)
    built = build(args.model, hw, args.weights,
                  rewrites=default_rewrites(fp16_safe=("norm", "attention") if args.fp16_safe else ()))
    found = {**fp16_arithmetic_here(), "hardware": X86_HARDWARE if platform.machine() in ("x86_64", "AMD64")
             else "arm64 neonfp16arith"}
    console.print(f"machine: {describe(machine_info(args.threads))}; {Fp16ArithmeticJson(found).reason}")
    console.print(f"{args.model} {args.size}, weights {built.weights.source}, rewrites {', '.join(built.rewrites)}")
    normalize = "fold_input_normalization" not in built.rewrites
    xs = [torch.from_numpy(to_tensor(builtin_image(n), hw, normalize=normalize)) for n in args.images]
    upstream = reference_model(built.spec, built.weights).eval()
    floor = "PyTorch eager .half() (FP32 accumulation): the floor"
    with torch.no_grad():
        refs = [depth(upstream(x)) for x in xs]
        try:
            halves = [depth(upstream.half()(x.half())) for x in xs]
        except RuntimeError as exc:  # e.g. depth_anything_3 mixes dtypes inside its head
            console.print(f"upstream .half() fails ({str(exc).splitlines()[0]}): the floor row is depthport's model")
            floor = "depthport eager .half() (FP32 accumulation): the floor"
            halves = [depth(copy.deepcopy(built.model).half()(x.half())) for x in xs]
    rows = {floor: figures(halves, refs)}
    if not args.no_pte:
        with native_stderr_muted():
            options = FORMS[args.target] if args.split_k is None else {**FORMS[args.target], "split_k": args.split_k}
            module, _ = backend_form(built.model, **options)
            manager, _ = lower_xnnpack(module, torch.zeros(1, 3, *hw))
            path = write_pte(manager, Path(tempfile.mkdtemp()) / "xnnpack_fp16.pte")
            if args.arm64:
                run = run_pte(path, [(x.numpy(),) for x in xs], threads=args.threads)
                measured = [depth(torch.from_numpy(o)) for o in run.outputs]
                found = {"arithmetic": run.arithmetic, "reason": run.description, "hardware": ARM64_HARDWARE,
                         "mode": "ARMv8.2 FP16 arithmetic, emulated" if run.arithmetic else "NOT FP16 arithmetic",
                         "qemu": qemu_version()}
                console.print(f"{run.description} ({run.seconds:.0f} s for {len(xs)} images)")
            else:
                runner = load_runner(path, threads=args.threads)
                measured = [depth(runner.run(x.numpy())) for x in xs]
        measured_label = f"{args.target} .pte measured ({Fp16ArithmeticJson(found).mode})"
        rows[measured_label] = figures(measured, refs)
        if args.time and options.get("split_k"):
            from depthport.bench import Entry, time_interleaved

            with native_stderr_muted():
                files = {}
                for label in ("xnnpack-fp32", "xnnpack-fp16"):
                    other, _ = backend_form(built.model, **FORMS["fp32" if label == "xnnpack-fp32" else label])
                    files[label] = write_pte(lower_xnnpack(other, torch.zeros(1, 3, *hw))[0],
                                             path.with_name(f"{label}.pte"))
                files[args.target] = path
                entries = [Entry(label, load_runner(f, threads=args.threads), xs[0].numpy())
                           for label, f in files.items()]
                timed = time_interleaved(entries, args.time)
            console.print(f"latency on this CPU ({Fp16ArithmeticJson(found).mode}), median ms over interleaved rounds: "
                          + ", ".join(f"{r['label']} {r['median']:.1f} (x{r['ratio']['paired']:.3f} paired)"
                                      for r in timed))
    form = xnnpack_fp16_form(built.model, args.split_k, target=args.target)
    for mode, label in PREDICTIONS.items():
        if mode not in args.predict:
            continue
        with console.status(label):
            p = simulate_fp16(form, xs, accumulate=mode)
        rows[label] = {**p.figures, "per_image_rel_l2": [m["rel_l2"] for m in p.per_image], "finite": "-",
                       "overflow": ", ".join(f"{e.layer} ({e.op})" for e in p.events[:2]) or "-"}
    table = Table(title=f"FP16 vs upstream FP32 ({', '.join(args.images)})")
    for col in ("run", "rel L2 pooled", "rel L2 per image", "Pearson worst", "δ<1.25 worst", "finite", "overflow"):
        table.add_column(col)
    for label, f in rows.items():
        table.add_row(label, f"{f['rel_l2_pooled']:.3e}", " ".join(f"{v:.2e}" for v in f["per_image_rel_l2"]),
                      f"{f['pearson_worst']:.6f}", f"{f['delta125_worst']:.4f}", str(f["finite"]), f.get("overflow", "-"))
    console.print(table)
    for hardware, predicted in ((X86_HARDWARE, X86_PREDICTED), (ARM64_HARDWARE, ARM_PREDICTED)):
        cal = matching(args.model, hw, built.weights.source, hardware=hardware, target=args.target,
                       form=FORMS[args.target])
        if cal is None or args.fp16_safe or args.split_k or predicted not in rows:
            continue
        pred = rows[predicted]
        ratio = max(pred["per_image_rel_l2"]) / cal["worst"]["rel_l2"]
        console.print(f"calibration ({hardware}: {cal['cpu']}, {cal['versions']}): measured worst rel L2 "
                      f"{cal['worst']['rel_l2']:.3g}, delta {cal['worst']['delta125']:.4g}; predicted worst "
                      f"{max(pred['per_image_rel_l2']):.3g}, delta {pred['delta125_worst']:.4g}: "
                      f"ratio {ratio:.2f} (within 1.5x: {1 / 1.5 <= ratio <= 1.5})")
    if args.record:
        record(console, args, built, rows[measured_label], found)
    if args.ledger:
        ledger = fp16_ledger(form, xs, accumulate="xnnpack-arm", progress=lambda m: console.print(m))
        lt = Table(title=f"FP16 error ledger (XNNPACK prediction on ARM, baseline rel L2 "
                         f"{ledger['baseline']['rel_l2']:.3e})")
        for col in ("kept in FP32", "modules", "rel L2", "δ<1.25 worst", "share removed"):
            lt.add_column(col)
        for r in ledger["rows"]:
            lt.add_row(r["group"], str(r["modules"]), f"{r['rel_l2']:.3e}", f"{r['delta125_worst']:.4f}",
                       f"{100 * r['share_removed']:.1f} %")
        console.print(lt)


if __name__ == "__main__":
    main()
