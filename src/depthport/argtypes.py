"""Checks of command-line values shared by the subcommands.

``thread_count`` is an argparse ``type=``: a bad value is refused while the arguments are parsed (argparse's
usage line, then one error line, exit status 2). ``check_output_file`` checks an output path before any work is
done, so a command never runs for minutes and then fails to write its result.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .preprocess import InputError


def thread_count(text: str) -> int:
    """``--threads``: a whole number of CPU threads, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of threads >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 thread, got {value}")
    return value


def check_output_file(path: str | os.PathLike, option: str) -> Path:
    """``path`` as a Path, if a file can be written there; else an InputError naming ``option``.

    Missing folders are fine (they are created when the file is written); an existing folder at ``path``, a
    regular file where a folder should be, or a folder this process may not write into is not."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{option} {path} is a folder; give a file name, e.g. {path / 'depth.png'}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {option} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {option} {path}: no permission to write in {parent}")
    return path
