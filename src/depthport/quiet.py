"""Silence the native libraries' log lines (absl, LiteRT, XNNPACK) that go straight to file descriptor 2."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GLOG_minloglevel", "3")


@contextlib.contextmanager
def native_stderr_muted(enabled: bool = True):
    """Route fd 2 to a temporary file for the block; Python's own sys.stderr writes are restored after."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def mute_native_stderr_for_exit() -> None:
    """Point fd 2 at /dev/null for the rest of the process: the runtimes' teardown lines (LiteRT logs
    "DestroyAccelerator" at INFO level while the interpreter shuts down) then do not trail a command's output."""
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
