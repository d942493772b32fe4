"""check: GPU-delegation rules as data, the static checker, the real accelerator run, the delegation verdict of a
lowered ExecuTorch program (``delegation``) and the check stage; what a browser's WebGPU run says about the GPU
(``webgpu_verdict``: on the GPU or not, FP16 storage or arithmetic). Layer 5, above export (the files it checks),
below verify: may import core, runtimes, fp16, build and export; not verify, bench, report, pipeline or cli."""

from depthport.check.gpu_runtime import parse_rejected_ops, run_gpu_check
from depthport.check.rules import RULES, Rule
from depthport.check.static import Violation, check_static
from depthport.check.verdict import check_tflite

__all__ = ["RULES", "Rule", "Violation", "check_static", "check_tflite", "parse_rejected_ops", "run_gpu_check"]
