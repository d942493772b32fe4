"""Where depthport keeps what it downloads or builds once and reuses across runs (SwiftShader, the web runtimes,
the arm64 emulator, the GEMM probe's models): ``${XDG_CACHE_HOME:-~/.cache}/depthport/NAME``. Temporary files go
to ``scratch`` instead, and are removed at exit."""

from __future__ import annotations

import os
from pathlib import Path


def cache_folder(name: str, override: str | None = None) -> Path:
    """The cache folder ``name``, or the path in the environment variable ``override`` when it is set."""
    if override and os.environ.get(override):
        return Path(os.environ[override])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "depthport" / name
