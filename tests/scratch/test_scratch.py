"""The per-process temporary folder: removed at exit, and a killed process's removed by the next one that makes one,
never a live process's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")
CHILD = ("import os, signal, sys\nfrom depthport.scratch import process_folder\n"
         "folder = process_folder()\n(folder / 'model.safetensors').write_bytes(bytes(1 << 20))\n"
         "print(folder, flush=True)\n"
         "if sys.argv[1] == 'kill': os.kill(os.getpid(), signal.SIGKILL)\n"
         "if sys.argv[1] == 'hold': sys.stdin.read()\n")


def _child(temp: Path, how: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": SRC})


def test_a_killed_processs_folder_goes_with_the_next_and_a_live_ones_stays(tmp_path):
    killed = _child(tmp_path, "kill")
    killed_folder = Path(killed.stdout.readline().strip())
    assert killed.wait(timeout=60) == -signal.SIGKILL
    live = _child(tmp_path, "hold")
    live_folder = Path(live.stdout.readline().strip())
    try:
        assert killed_folder.parent == tmp_path and killed_folder.name.startswith(f"depthport-{killed.pid}-")
        assert not killed_folder.exists()  # the live child, making its folder, removed the killed one's
        assert (live_folder / "model.safetensors").stat().st_size == 1 << 20
        exited = _child(tmp_path, "exit")
        exited_folder = Path(exited.stdout.readline().strip())
        assert exited.wait(timeout=60) == 0
        assert not exited_folder.exists()  # removed at its own exit
        assert live_folder.is_dir()  # its process holds it: the other child left it alone
    finally:
        live.communicate("", timeout=60)
    assert live.returncode == 0 and not live_folder.exists()
    assert sorted(tmp_path.iterdir()) == []


def test_remove_stale_takes_only_folders_no_process_holds(tmp_path):
    from depthport.scratch import OWNER, remove_stale

    unheld = tmp_path / "depthport-123-abc"
    unheld.mkdir()
    (unheld / OWNER).touch()
    for name in ("depthport-export-abc", "depthport-123-noowner", "other-123-abc"):  # not depthport's, or no lock
        (tmp_path / name).mkdir()
    (tmp_path / "depthport-123-noowner" / "x").touch()
    (tmp_path / "other-123-abc" / OWNER).touch()
    assert remove_stale(tmp_path) == [unheld]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["depthport-123-noowner", "depthport-export-abc",
                                                          "other-123-abc"]
