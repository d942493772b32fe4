"""Large temporary files (a model or its weights spilled to disk, an export's intermediate files: gigabytes for a
Large model) go into one folder per process, ``depthport-PID-XXXXXXXX`` in the system's temporary folder, removed
when the process exits. A process killed outright (SIGKILL, the kernel's out-of-memory killer) cannot remove its
folder; the next export (or the next depthport process that makes a folder) removes every such folder whose
process has gone.

A folder is in use while its process holds a lock on the ``.owner`` file in it: the kernel drops the lock when the
process dies, however it dies, so a folder is never taken for stale while its process lives (a reused PID, or a
process in another PID namespace sharing the temporary folder, included).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: folders are removed at exit only
    fcntl = None

PREFIX = "depthport-"
_NAME = re.compile(rf"{PREFIX}\d+-[^/]+")
OWNER = ".owner"

_lock = threading.Lock()
_held: dict[int, tuple[Path, int]] = {}  # pid -> (folder, the open .owner file): one folder per process


def process_folder() -> Path:
    """This process's temporary folder, made on first use (after removing the folders of processes that have
    gone) and removed when the process exits."""
    pid = os.getpid()
    with _lock:
        held = _held.get(pid)
        if held is not None and held[0].is_dir():
            return held[0]
        remove_stale()
        hidden = Path(tempfile.mkdtemp(prefix=f".{PREFIX}{pid}-"))  # locked before it takes a name that is looked at
        fd = os.open(hidden / OWNER, os.O_CREAT | os.O_RDWR, 0o600)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        folder = hidden.with_name(hidden.name[1:])
        os.rename(hidden, folder)
        _held[pid] = (folder, fd)
        atexit.register(_remove_own, pid)
        return folder


def _remove_own(pid: int) -> None:
    """At exit: this process's folder (not a parent's, in a forked child that inherited the registration)."""
    held = _held.pop(pid, None)
    if held is not None and pid == os.getpid():
        shutil.rmtree(held[0], ignore_errors=True)
        os.close(held[1])


def remove_stale(parent: Path | None = None) -> list[Path]:
    """Remove the folders in ``parent`` (default: the temporary folder) that processes now gone left; returns them.
    Only this user's folders, and only those whose ``.owner`` lock can be taken."""
    if fcntl is None:
        return []
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not _NAME.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            fd = os.open(Path(entry.path) / OWNER, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its process is alive
        finally:
            os.close(fd)
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
