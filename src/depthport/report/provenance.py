"""Provenance of a report: package versions, the machine, the command line."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path

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


def machine() -> dict[str, str | int]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count() or 0, "os": platform.platform()}


def command_line() -> str:
    return shlex.join(["depthport", *sys.argv[1:]])
