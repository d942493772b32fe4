"""cache.py: what depthport fetches or builds once lives under ${XDG_CACHE_HOME:-~/.cache}/depthport, not in the
temporary folder (the GEMM probe's models sat in /tmp/depthport-probe, outside scratch's clean-up)."""

from __future__ import annotations

from depthport.bench.probe import ProbeSpec, cache_dir
from depthport.cache import cache_folder
from depthport.core.evidence_cache import default_folder
from depthport.runtimes.arm64 import arm64_root
from depthport.runtimes.swiftshader import default_cache_dir
from depthport.web.runtimes import web_dir


def test_every_cache_is_under_xdg_cache_home_unless_its_own_variable_names_one(monkeypatch, tmp_path):
    for name in ("XDG_CACHE_HOME", "DEPTHPORT_SWIFTSHADER_DIR", "DEPTHPORT_WEB_DIR", "DEPTHPORT_ARM64_ROOT",
                 "DEPTHPORT_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_folder("web") == tmp_path / "home" / ".cache" / "depthport" / "web"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "xdg" / "depthport"
    assert [default_cache_dir(), web_dir(), arm64_root(), default_folder()] == [
        root / "swiftshader", root / "web", root / "arm64-qemu", root / "references"]
    probe = cache_dir(ProbeSpec(layers=2, tokens=8, dim=12, hidden=24))
    assert probe.parent == root / "probe" and probe.name.startswith("fc2_8x12x24-") and probe.is_dir()
    monkeypatch.setenv("DEPTHPORT_WEB_DIR", str(tmp_path / "mine"))
    assert web_dir() == tmp_path / "mine" and cache_folder("web", "DEPTHPORT_WEB_DIR") == tmp_path / "mine"
    assert cache_folder("probe", "DEPTHPORT_UNSET_VARIABLE") == root / "probe"
