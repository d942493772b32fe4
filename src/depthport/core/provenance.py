"""Provenance of a report: package versions, the machine, the command line."""

from __future__ import annotations

import platform
import shlex
import sys

from .. import __version__

PACKAGES = ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer", "executorch", "onnxruntime",
            "transformers", "depth-anything-3")


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "depthport": __version__}
    for pkg in PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def machine() -> dict:
    """CPU model, cores, architecture, the SIMD features that matter to XNNPACK, and the OS."""
    from .machine import machine_info

    return machine_info()


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed: 'depthport ' and ``argv`` (default: this process's arguments)."""
    return shlex.join(["depthport", *(sys.argv[1:] if argv is None else argv)])
