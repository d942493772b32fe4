"""depthport's own errors, each shown as one line on stderr with exit status 2 (bad input, cannot check), and
the one-line text of any error for a report."""

from __future__ import annotations

import errno
import re


class InputError(ValueError):
    """Bad user input: shown as one line, exit status 2."""


class NotPerInput(InputError):
    """Bad input that is not one input's own (the model file, an option): fatal for a folder or a video, where an
    input that cannot be read is only skipped."""


class MissingDependency(InputError):
    """An optional Python package that a step needs is not installed."""

    def __init__(self, package: str, needed_for: str):
        super().__init__(f"{needed_for} needs the Python package {package!r}, which is not installed; "
                         "`make venv` installs it")
        self.package = package


def utf8_text(text) -> str:
    """``text`` (a path or name) as valid UTF-8 for a report or message: bytes of a name that is not UTF-8 (a
    Latin-1 name reaches Python as surrogates) become U+FFFD."""
    return str(text).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def require_utf8_path(path, what: str) -> None:
    """The runtimes' and converters' native loaders and writers take UTF-8 paths only: a path that is not valid
    UTF-8 (a Latin-1 folder name) is an InputError naming ``what`` it is, not a TypeError from deep inside them."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what} {utf8_text(path)}: the path is not valid UTF-8, and the runtimes' native code "
                         "takes UTF-8 paths only; rename it or give another one") from None


def disk_full(exc: OSError) -> bool:
    """Whether ``exc`` says the disk (or the user's quota) has no room left."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


def out_of_memory(exc: BaseException) -> str | None:
    """What ran out where ``exc`` says the machine's memory did ('tried to allocate 25.6 GB'), else None: Python's
    MemoryError, or torch's allocator failing (a RuntimeError)."""
    if isinstance(exc, MemoryError):
        return "the memory ran out"
    found = re.search(r"can't allocate memory: you tried to allocate (\d+) bytes", str(exc))
    return f"it tried to allocate {int(found[1]) / 1e9:,.1f} GB" if found else None


def error_text(exc: BaseException) -> str:
    """One line for the report when a runtime cannot load or run a file."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"
