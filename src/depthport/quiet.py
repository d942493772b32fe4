"""Silence the native libraries' log lines (absl, LiteRT, XNNPACK) that go straight to file descriptor 2, and send
those printed to file descriptor 1 there instead."""

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


@contextlib.contextmanager
def native_stdout_to_stderr():
    """Route fd 1 to fd 2 for a native call that prints its log lines to stdout (LiteRT's GPU accelerator prints
    'INFO: Failed to load OpenCL library ...' there while it looks for a GPU API): they join the other log lines on
    stderr, which ``native_stderr_muted`` silences and ``-v`` shows, and stdout keeps the command's own output."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def mute_native_stderr_for_exit() -> None:
    """Point fd 2 at /dev/null for the rest of the process: the runtimes' teardown lines (LiteRT logs
    "DestroyAccelerator" at INFO level while the interpreter shuts down) then do not trail a command's output."""
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
