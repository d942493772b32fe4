"""Write-then-rename, so a failed or interrupted step never leaves a half-written artifact behind."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from pathlib import Path

from .errors import InputError, disk_full


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike):
    """Yields a temporary path beside ``final``; renamed onto it only if the block succeeds. The folders made for it
    are removed again when it fails, where they are still empty."""
    final = Path(final)
    made = _missing_folders(final.parent)
    tmp = None
    try:
        _make_folder(final)
        with sigint_deferred():  # the file is created and ``tmp`` bound before a Ctrl-C takes effect
            fd, tmp = _temporary(final)
            os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        yield Path(tmp)
        os.replace(tmp, final)
        made = []
    finally:
        with sigint_deferred():
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            for folder in made:  # deepest first; one that holds anything else stays
                with contextlib.suppress(OSError):
                    folder.rmdir()


def _make_folder(final: Path) -> None:
    """``final``'s folder, made where missing; where it cannot be (under /proc), an InputError naming ``final``, not
    a bare errno line."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if disk_full(exc) or not exc.strerror:
            raise
        raise InputError(f"cannot write {final}: {exc.strerror} (making the folder {exc.filename or final.parent})"
                         ) from None


def _temporary(final: Path) -> tuple[int, str]:
    """A new temporary file beside ``final``, named after it: '.NAME.' + 8 random characters + '.part', NAME cut
    where the whole would pass the longest name the folder takes (a photo named in 80 Japanese characters is legal,
    and its temporary name was not). Where none can be made there (a folder that is read-only, or takes no files,
    as /proc), an InputError naming ``final``, not the temporary name the user never gave."""
    name = final.name.encode("utf-8", "surrogateescape")[:max(longest_name(final.parent) - 15, 1)]
    name = name.decode("utf-8", "ignore")
    try:
        return tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=final.parent)
    except OSError as exc:
        if disk_full(exc) or not exc.strerror:
            raise
        raise InputError(f"cannot write {final}: {exc.strerror}") from None


def longest_name(folder: Path) -> int:
    """The longest file name, in bytes, that ``folder`` (or, where it is not there yet, the first of its parents
    that is) takes: 255 on most file systems."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents up to the first that exists, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


@contextlib.contextmanager
def atomic_paths(*finals: str | os.PathLike):
    """Yields temporary paths beside each of ``finals``, all renamed onto them only if the block succeeds; a
    Ctrl-C during the renames takes effect after the last, so the group is in place whole or not at all."""
    with contextlib.ExitStack() as stack:
        with sigint_deferred():  # every temporary file is registered for removal before a Ctrl-C takes effect
            temps = [stack.enter_context(atomic_path(final)) for final in finals]
        yield temps
        with sigint_deferred():
            stack.close()


@contextlib.contextmanager
def sigint_deferred():
    """Ctrl-C (SIGINT) inside the block takes effect when it ends; in a thread other than the main one (where
    Python cannot set a handler), the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda *received: caught.append(received))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(*caught[0])


def write_text(final: str | os.PathLike, text: str) -> None:
    with atomic_path(final) as tmp:
        tmp.write_text(text)


def write_bytes(final: str | os.PathLike, data: bytes) -> None:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)
