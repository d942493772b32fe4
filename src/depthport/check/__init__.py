"""GPU-delegation checks for .tflite files: static rules with their sources, and the real accelerator."""

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
