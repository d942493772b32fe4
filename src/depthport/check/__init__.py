"""check: GPU-delegation rules as data, the static checker, the real accelerator run and the check stage; what a
browser's WebGPU run says about the GPU (``browser``: on the GPU or not, FP16 storage or arithmetic).
May import export (files to check) and report.schema; not verify, bench, pipeline or cli."""

from depthport.check.gpu_runtime import parse_rejected_ops, run_gpu_check
from depthport.check.rules import RULES, Rule
from depthport.check.static import Violation, check_static
from depthport.check.swiftshader import VulkanSetup, VulkanUnavailable, find_vulkan, install_swiftshader
from depthport.check.tflite_graph import Graph, OpInfo, TensorInfo, TfliteReadError, graph_summary, read_graph
from depthport.check.verdict import check_tflite

__all__ = [
    "RULES", "Graph", "OpInfo", "Rule", "TensorInfo", "TfliteReadError", "Violation", "VulkanSetup",
    "VulkanUnavailable", "check_static", "check_tflite", "find_vulkan", "graph_summary", "install_swiftshader",
    "parse_rejected_ops", "read_graph", "run_gpu_check",
]
