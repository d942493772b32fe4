"""Where outputs go. Export folders are transactional: an export is staged beside ``--out`` and moved into
place only when it ends. Output files are checked before any work (``check_output_file``).

Files that an earlier depthport export wrote into ``--out`` (listed in its report.json) are replaced or
removed; other files there are left alone. After a failure or an interrupt the folder is exactly as before.
A run killed outright leaves its staging folder beside ``--out``; the next run removes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .atomic import longest_name
from .core.schema import recorded_files
from .errors import InputError, require_utf8_path
from .scratch import remove_stale as remove_stale_scratch

NOT_SHIPPED_DIR = "not-shipped"  # where the files that did not earn a slot go (verify.gates)

STAGING_MARK = ".depthport-staging-"
REPORT_FILES = ("report.json", "report.html", "README.md")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(out: Path) -> list[Path]:
    """Remove staging folders of ``out`` left by runs that no longer exist; returns what was removed."""
    removed = []
    if not out.parent.is_dir():
        return removed
    for folder in out.parent.glob(f".{out.name}{STAGING_MARK}*"):
        pid = folder.name.rsplit("-", 2)[-2]
        if folder.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _report(out: Path):
    """``out/report.json`` parsed, or None."""
    try:
        return json.loads((out / "report.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def previous_files(out: Path) -> list[str]:
    """Paths (relative to ``out``) that the export recorded in ``out/report.json`` wrote; [] when none."""
    return recorded_files(_report(out), REPORT_FILES[1:])


def _export_owned(out: Path) -> set[str]:
    """What the earlier export in ``out`` wrote, and its model card when ``depthport card`` wrote it afterwards
    (after an export with ``--skip card``): a card quotes its export's command."""
    report = _report(out)
    owned = set(recorded_files(report, REPORT_FILES[1:]))
    card = out / "README.md"
    if owned and "README.md" not in owned and card.is_file():
        command = report.get("command")
        if isinstance(command, str) and command in card.read_text(encoding="utf-8", errors="replace"):
            owned.add("README.md")
    return owned


def _inside(out: Path, rel: str) -> Path | None:
    path = (out / rel).resolve()
    return path if out.resolve() in path.parents else None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def written(staging: Path) -> list[str]:
    """Every file and top-level package folder in the staging folder, relative to it."""
    out = []
    for entry in sorted(staging.iterdir()):
        if entry.is_dir() and not entry.suffix:
            out += [f"{entry.name}/{rel}" for rel in written(entry)]
        else:
            out.append(entry.name)
    return out


def commit(staging: Path, out: Path) -> None:
    """Move the staged export into ``out``, replacing what the previous depthport export wrote there."""
    out.mkdir(parents=True, exist_ok=True)
    emptied = {(out / NOT_SHIPPED_DIR).resolve()}
    for rel in previous_files(out):
        path = _inside(out, rel)
        if path is not None:
            _remove(path)
            emptied.update(p for p in path.parents if out.resolve() in p.parents)
    for rel in written(staging):
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(staging / rel, target)
    for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):  # the previous export's, now empty
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    shutil.rmtree(staging, ignore_errors=True)


def require_folder(out: Path) -> None:
    """``--out`` must be a folder or not exist yet, at a UTF-8 path, and hold no report.json, report.html or
    README.md that an earlier depthport export did not write there (a project's own README.md, say): the export
    would replace them."""
    require_utf8_path(out.absolute(), "--out")
    _refuse_foreign(out, REPORT_FILES, _export_owned(out), "an export writes its report.json, report.html and "
                    "model card (README.md) there", "export")


VERIFY_FILES = ("report.json", "report.html")


def require_verify_folder(out: Path) -> None:
    """``verify --out`` must be a folder or not exist yet, and hold no report.json or report.html but an earlier
    verification's: an export's report there (``verify FILE --out`` its export folder) would be replaced."""
    _refuse_foreign(out, VERIFY_FILES, set(VERIFY_FILES) if _verify_report(out) else set(),
                    "verify writes its report.json and report.html there", "verify")


def _verify_report(out: Path) -> bool:
    report = _report(out)
    return isinstance(report, dict) and str(report.get("command", "")).startswith("depthport verify")


def _refuse_foreign(out: Path, names: tuple[str, ...], owned: set[str], writes: str, command: str) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is an existing file, not a folder")
    foreign = [name for name in names if (out / name).exists() and name not in owned]
    if foreign:
        raise InputError(f"--out {out} holds {', '.join(foreign)}, which no earlier depthport {command} wrote; "
                         f"{writes}: give --out a folder of its own (e.g. {out / command})")


@contextlib.contextmanager
def staged(out: str | os.PathLike):
    """Yields a staging folder beside ``out``; on success its content replaces the previous export in ``out``,
    on any exception (Ctrl-C included) it is removed and ``out`` is untouched."""
    out = Path(out)
    require_folder(out)
    clean_stale(out)
    remove_stale_scratch()
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}{STAGING_MARK}{os.getpid()}-", dir=parent))
    except OSError as exc:
        raise InputError(f"cannot write beside --out {out}: {exc.strerror or exc}") from None
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    commit(staging, out)


class WrongSuffix(InputError):
    """An output file named without the suffix of what is written in it (``claim_output_files``): a command that also
    takes a folder there can say so."""

    def __init__(self, message: str, option: str, path: Path, suffix: str):
        super().__init__(message)
        self.option, self.path, self.suffix = option, path, suffix


def claim_output_files(outputs, taken: dict[Path, str]) -> None:
    """Check output files before any work. ``outputs``: (option, path or None, suffix or None, what it holds, e.g.
    "the depth is written as .png (a colourised depth image)"); ``taken``: resolved path -> what is there already
    (the model file, the input). Each path must be writable (``check_output_file``), overwrite nothing taken, and
    end in its suffix; then it is taken too."""
    for option, path, suffix, holds in outputs:
        if not path:
            continue
        key = resolved(check_output_file(path, option, f"depth{suffix or Path(path).suffix}"))
        name_fits(Path(path), option)
        if key in taken:
            raise InputError(f"{option} {path} would overwrite {taken[key]}; give another file name")
        if suffix and Path(path).suffix.lower() != suffix:
            raise WrongSuffix(f"{option} {path}: {holds}; give {option} NAME{suffix}", option, Path(path), suffix)
        taken[key] = f"the {option} file"


def name_fits(path: Path, option: str) -> None:
    """An output whose name is longer than its folder takes (255 bytes on most file systems: a video named in 81
    Chinese characters gives a NAME.timestamps.json of 259) is an InputError before any work, where the rename at the
    end failed with a traceback, after the work."""
    if (size := len(path.name.encode("utf-8", "surrogateescape"))) > (longest := longest_name(path.parent)):
        raise InputError(f"{option} {path}: its name is {size} bytes, longer than the {longest} its folder takes; "
                         "give a shorter name, or rename the input")


def resolved(path: str | os.PathLike) -> Path:
    """``path`` absolute, its links followed: what it names, to compare with other paths. A link that loops (``b.jpg
    -> b.jpg``, left by a broken sync) stays as named: ``Path.resolve`` raises RuntimeError for it (Python 3.11)."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError):
        return Path(os.path.abspath(path))


def check_output_file(path: str | os.PathLike, option: str, example: str) -> Path:
    """``path`` as a Path, if a file can be written there; else an InputError naming ``option`` (and, where ``path``
    is a folder, the file name ``example`` in it).

    Missing folders are fine (they are created when the file is written); an existing folder at ``path``, a
    regular file where a folder should be, or a folder this process may not write into is not."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{option} {path} is a folder; give a file name, e.g. {path / example}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {option} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {option} {path}: no permission to write in {parent}")
    return path
