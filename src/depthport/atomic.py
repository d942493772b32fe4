"""Write-then-rename, so a failed step never leaves a half-written artifact behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike):
    """Yields a temporary path beside ``final``; renamed onto it only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".part", dir=final.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(final: str | os.PathLike, text: str) -> None:
    with atomic_path(final) as tmp:
        tmp.write_text(text)


def write_bytes(final: str | os.PathLike, data: bytes) -> None:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)
