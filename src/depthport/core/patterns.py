"""Paths and glob patterns as people give them for images (``'~/photos/**/*.jpg'``, quoted so the shell leaves them):
``~`` expanded and a URL refused, which files a pattern matches, and the folder their names are relative to.
Predict's inputs and the verification image set read them the same way."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from ..errors import InputError


def local_path(source: str) -> str:
    """``source`` with a leading ``~`` expanded (a quoted pattern or ``--images '~/photos'`` reaches us unexpanded); a
    URL is an InputError."""
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*://", source):
        raise InputError(f"{source} is a URL, and depthport reads local files: download it first (curl -O URL)")
    return os.path.expanduser(source)


def has_pattern(text: str) -> bool:
    """Whether ``text`` is a glob pattern (``*``, ``?`` or ``[``)."""
    return re.search(r"[*?[]", text) is not None


def pattern_root(pattern: str) -> Path:
    """The folder a pattern's matches are named relative to: its components before the first wildcard, a class of one
    character ('[[]', as glob.escape writes a bracket) read as that character (a folder named 'Italy [2024]')."""
    parts = Path(pattern).parts[:-1]
    fixed = next((i for i, part in enumerate(parts) if has_pattern(re.sub(r"\[.\]", "", part))), len(parts))
    return Path(*(re.sub(r"\[(.)\]", r"\1", part) for part in parts[:fixed])) if fixed else Path(".")


def pattern_files(pattern: str) -> list[Path]:
    """Every file ``pattern`` matches (``**`` recursive; broken links too, ``present``), sorted by path; none is an
    InputError, which names the files that match in another letter case (IMG_0001.JPG for ``*.jpg``), or with its
    brackets taken as written (a folder named 'Italy [2024]': [...] matches one character of those inside)."""
    files = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if present(Path(p)))
    if not files:
        other = sorted(p for p in glob.glob(_any_case(pattern), recursive=True) if Path(p).is_file())
        literal = pattern.replace("[", "[[]")
        bracketed = "[" in pattern and [p for p in glob.glob(literal, recursive=True) if Path(p).is_file()]
        hint = (f"; {len(other)} file(s) match it in another letter case ({Path(other[0]).name}, ...): a pattern "
                "matches letters as written, as the shell's does" if other else
                f"; {len(bracketed)} file(s) match {literal!r}: in a pattern [...] matches one of the characters "
                "inside, and [[] a bracket" if bracketed else "")
        raise InputError(f"no files match the pattern {pattern!r}{hint}")
    return files


def present(path: Path) -> bool:
    """A file, or a link to one that is not there: read, it says so (a folder of links into a drive that is not
    mounted), where passed over it would vanish in silence."""
    return path.is_file() or (path.is_symlink() and not path.exists())


def _any_case(pattern: str) -> str:
    """``pattern`` matching names in any letter case from its first wildcard component on (each letter -> [xX]);
    a component with a [...] class of its own is left as written."""
    parts = Path(pattern).parts
    first = next((i for i, part in enumerate(parts) if has_pattern(part)), len(parts))
    tail = ["".join(f"[{c.lower()}{c.upper()}]" if c.lower() != c.upper() else c for c in part)
            if "[" not in part else part for part in parts[first:]]
    return str(Path(*parts[:first], *tail))


def relative_name(path: Path, root: Path) -> str:
    """``path``'s name under ``root`` with forward slashes (``day2/IMG_2.jpg``): how many inputs are named."""
    return Path(os.path.relpath(path, root)).as_posix()


def set_root(source: str | Path) -> Path:
    """The folder ``folder_set``'s names are relative to: the folder, a pattern's fixed part, a file's folder."""
    path = Path(source)
    if path.is_dir():
        return path
    return pattern_root(str(source)) if not path.exists() and has_pattern(str(source)) else path.parent
