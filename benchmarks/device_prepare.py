"""Prepares the GPU-machine run here, on the full venv: the GPU machine reaches no package registry and has neither
litert-torch nor ai-edge-litert, so everything it needs travels in one git-ignored folder that ``run`` carries.

    python benchmarks/device_prepare.py [--small] [--sets plain,safe,stress,stress_safe] [--out .device-in]

Writes:
- ``common/``: ``litert.tar.xz`` (ai-edge-litert's wheel for the machine's Python, without the parts a
  CompiledModel does not load: the AOT compiler, vendor plugins, the converter), the Vulkan loader's .deb
  (``libvulkan1``, which the GPU accelerator dlopens), the input (scikit-image's chelsea, preprocessed to the shape)
  and ``machine.json`` (where the predictions were made).
- one folder per FP16-study set: the plain export, ``--fp16-safe``, ``--weights stress`` and both, each exported
  (litert-fp32 and litert-fp16, ``--images`` chelsea, check stage only) with its FP16-compute prediction
  (``fp16_compute``: rel. L2 against FP32, overflow ops, the FP32-accumulation mode) and the two files' outputs on
  this CPU. Only the FP16-storage file travels (half the bytes; under FP16 compute the GPU rounds an FP32 file's
  weights to FP16 anyway) beside the FP32 file's output, the reference that the prediction is measured against.

A call of ``run`` carries at most 64 MiB: da2-small's FP16 file (50 MB) and the runtime (about 15 MB) fit once,
so the full size sends one set per call (``carry: [".device-in/common", ".device-in/plain"]``); ``--small``
(da2-tiny, 56x70) fits all sets in one call.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from depthport.core.machine import machine_info
from depthport.core.provenance import versions
from depthport.core.report_model import dump, load_report
from depthport.core.schema import read_report

SETS = {"plain": ("random", False), "safe": ("random", True), "stress": ("stress", False),
        "stress_safe": ("stress", True)}
MODES = {"full": ("da2-small", "518x686"), "small": ("da2-tiny", "56x70")}
GPU_MACHINE_PYTHON = "3.12"  # its python3 (KINDS.md); --python changes it, e.g. to test the runtime here
# The wheel's members a CompiledModel never loads: the AOT compiler binary and its Python, vendor (NPU) plugins,
# the converter and calibration wrappers, the GenAI ops.
DROP = ("ai_edge_litert/tools/apply_plugin_main", "ai_edge_litert/aot/", "ai_edge_litert/vendors/",
        "ai_edge_litert/_pywrap_litert_converter", "ai_edge_litert/_pywrap_tfl_calibration",
        "ai_edge_litert/_pywrap_tensorflow_lite_calibration", "ai_edge_litert/pywrap_genai_ops")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def litert_runtime(common: Path, scratch: Path, python: str) -> dict:
    """ai-edge-litert (the version installed here) for the GPU machine's Python, trimmed, as one tar.xz."""
    version = versions().get("ai-edge-litert")
    wheels = scratch / f"wheels-{python}"
    platform = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels), "--only-binary=:all:",
                    "--no-deps", "--implementation", "cp", "--python-version", python, *platform,
                    f"ai-edge-litert=={version}", "backports.strenum"], check=True)
    tar_path = common / "litert.tar.xz"
    kept = dropped = 0
    with tarfile.open(tar_path, "w:xz") as tar:
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    if info.is_dir() or info.filename.startswith(DROP):
                        dropped += info.file_size if not info.is_dir() else 0
                        continue
                    data = z.read(info)
                    member = tarfile.TarInfo(info.filename)
                    member.size, member.mode = len(data), 0o755 if info.filename.endswith(".so") else 0o644
                    tar.addfile(member, io.BytesIO(data))
                    kept += len(data)
    return {"ai-edge-litert": version, "python": python, "bytes_kept": kept, "bytes_dropped": dropped,
            "tar_bytes": tar_path.stat().st_size}


def vulkan_loader(common: Path, scratch: Path) -> str | None:
    """The Debian/Ubuntu ``libvulkan1`` package (the GPU machine may lack the loader); None when apt can't fetch."""
    lists = scratch / "apt-lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    opts = ["-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64", f"-oDir::State::Lists={lists}"]
    try:
        subprocess.run(["apt-get", *opts, "update", "-qq"], check=True, capture_output=True, timeout=300)
        subprocess.run(["apt-get", *opts, "download", "libvulkan1"], check=True, capture_output=True,
                       cwd=common, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return None
    debs = sorted(common.glob("libvulkan1_*.deb"))
    return debs[-1].name if debs else None


def chelsea(hw: tuple[int, int]) -> np.ndarray:
    import skimage.data
    from PIL import Image

    from depthport.preprocess import to_tensor

    return to_tensor(Image.fromarray(skimage.data.chelsea()), hw, normalize=True)


def export_set(name: str, model: str, size: str, images: Path, scratch: Path, dest: Path, small: bool,
               xnnpack: bool = False) -> dict:
    """One set's export (check stage only), its prediction, its files' outputs on this CPU; what travels goes to
    ``dest``: the input (``x.npz``), the FP32 file's output, and the files (``.xz`` at full size). ``xnnpack``
    adds an ``xnnpack-fp16`` export for its prediction of XNNPACK's f16 kernels (``prediction_xnnpack``), which
    the machine's CPU checks with LiteRT's forced FP16 inference where it has FP16 arithmetic. The predictions go
    into ``set.json`` as core.report_model's ``Fp16Prediction`` (``dump``), which device_run.py reads back (``load``).
    """
    import lzma

    from depthport.quiet import native_stderr_muted
    from depthport.runtimes import load_runner

    weights, safe = SETS[name]
    out = scratch / f"export-{name}"
    targets = "litert-fp32,litert-fp16" + (",xnnpack-fp16" if xnnpack else "")
    cmd = [sys.executable, "-m", "depthport.cli", "export", model, "--size", size, "--weights", weights,
           "--targets", targets, "--images", str(images), "--out", str(out),
           "--skip", "ledger,verify,bench,report,card", *(["--fp16-safe"] if safe else [])]
    log = subprocess.run(cmd, capture_output=True, text=True)
    (dest / "export.log").write_text(log.stdout + log.stderr)
    report = load_report(read_report(out / "report.json"))
    stem = model.replace("-", "_")
    found = {s: sorted(out.rglob(f"{stem}_{s}.tflite")) for s in ("fp32", "fp16")}
    if not found["fp32"] or not found["fp16"]:
        raise RuntimeError(f"{name}: export exited {log.returncode} without both files; see {dest / 'export.log'}")
    pred = next((a.fp16_compute for a in report.artifacts if a.fp16_compute), None)
    pred_xnnpack = next((a.fp16_arithmetic.prediction for a in report.artifacts
                         if a.target == "xnnpack-fp16" and a.fp16_arithmetic), None)
    x = None
    outputs = {}
    with native_stderr_muted():
        for s in ("fp32", "fp16"):
            runner = load_runner(found[s][0], threads=2)
            x = chelsea(tuple(runner.input_shape[-2:])) if x is None else x
            outputs[s] = np.asarray(runner.run(x), dtype=np.float32)
    np.savez_compressed(dest / "x.npz", x=x)
    carried = ("fp32", "fp16") if small else ("fp16",)
    files = {}
    for s in carried:
        name_s = f"{name}_{s}.tflite"
        data = found[s][0].read_bytes()
        stored = name_s if small else name_s + ".xz"
        (dest / stored).write_bytes(data if small else lzma.compress(data, preset=6))
        np.save(dest / f"cpu_{s}_file.npy", outputs[s])
        files[s] = {"file": name_s, "stored": stored, "sha256": hashlib.sha256(data).hexdigest()}
    np.save(dest / "cpu_fp32_file.npy", outputs["fp32"])
    entry = {"set": name, "weights": weights, "fp16_safe": safe, "model": model, "size": size, "files": files,
             "export_exit": log.returncode, "prediction": dump(pred), "prediction_xnnpack": dump(pred_xnnpack),
             "input": "x.npz", "cpu_outputs": {f"{s}_file": f"cpu_{s}_file.npy" for s in ("fp32", *carried)}}
    (dest / "set.json").write_text(json.dumps(entry, indent=2, default=str) + "\n")
    overflow = [o.op for o in pred.overflow_ops][:3] if pred else None
    print(f"{name}: predicted FP16-compute rel. L2 {pred.rel_l2 if pred else None}, overflow {overflow}, "
          f"files {', '.join(f['file'] for f in files.values())}", flush=True)
    return entry


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="default .device-in, with --small .device-in-small")
    p.add_argument("--small", action="store_true", help="da2-tiny at 56x70, both files per set")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--no-xnnpack", action="store_true",
                   help="no xnnpack-fp16 export (its prediction of XNNPACK's FP16 arithmetic) per set")
    p.add_argument("--no-runtime", action="store_true", help="keep common/ as it is (runtime, loader)")
    p.add_argument("--python", default=GPU_MACHINE_PYTHON, help="the Python the runtime's wheel is for")
    args = p.parse_args()
    model, size = MODES["small" if args.small else "full"]
    out = Path(args.out or (".device-in-small" if args.small else ".device-in"))
    common, scratch = out / "common", out.parent / f"{out.name}-scratch"
    for d in (common, scratch):
        d.mkdir(parents=True, exist_ok=True)
    images = scratch / "images"
    images.mkdir(exist_ok=True)
    import skimage.data
    from PIL import Image

    Image.fromarray(skimage.data.chelsea()).save(images / "chelsea.png")
    info = {"machine": machine_info(), "versions": versions(), "model": model, "size": size}
    before = common / "machine.json"
    if args.no_runtime and before.exists():
        info |= {k: v for k, v in json.loads(before.read_text()).items() if k in ("runtime", "vulkan_deb")}
    else:
        info["runtime"] = litert_runtime(common, scratch, args.python)
        info["vulkan_deb"] = vulkan_loader(common, scratch)
    (common / "machine.json").write_text(json.dumps(info, indent=2, default=str) + "\n")
    for name in args.sets.split(","):
        dest = out / name
        dest.mkdir(parents=True, exist_ok=True)
        export_set(name, model, size, images, scratch, dest, args.small, not args.no_xnnpack)
    sizes = {str(f.relative_to(out)): f.stat().st_size for f in sorted(out.rglob("*")) if f.is_file()}
    print(json.dumps(sizes, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
