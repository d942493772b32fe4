"""Find (or set up) a Vulkan device for the LiteRT WebGPU accelerator: SwiftShader on machines without a GPU.

Order: an explicit ``VK_ICD_FILENAMES`` / ``VK_DRIVER_FILES`` in the environment, then SwiftShader in
the cache directory (``$DEPTHPORT_SWIFTSHADER_DIR`` or ``~/.cache/depthport/swiftshader``, filled by
``scripts/setup_swiftshader.sh`` or :func:`install_swiftshader`), then a system Chromium's SwiftShader.
Mesa lavapipe is not used: Dawn rejects it ("No adapters found").
"""

from __future__ import annotations

import ctypes.util
import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..cache import cache_folder

ICD_NAME = "vk_swiftshader_icd.json"
LIB_NAME = "libvk_swiftshader.so"
SYSTEM_CHROMIUM = Path("/usr/lib/chromium")
SETUP_HINT = "run scripts/setup_swiftshader.sh (Debian/Ubuntu) or depthport.check.swiftshader.install_swiftshader()"


class VulkanUnavailable(RuntimeError):
    """No usable Vulkan driver/loader was found; the message says what is missing."""


@dataclasses.dataclass(frozen=True)
class VulkanSetup:
    """Environment that exposes one Vulkan driver to a child process."""

    kind: str
    icd: str | None
    library_dirs: tuple[str, ...] = ()

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (default os.environ) plus VK_ICD_FILENAMES and LD_LIBRARY_PATH as needed."""
        env = dict(os.environ if base is None else base)
        if self.icd:
            env["VK_ICD_FILENAMES"] = self.icd
        if self.library_dirs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join([*self.library_dirs, env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
        return env

    def describe(self) -> str:
        return f"{self.kind} ({self.icd})" if self.icd else self.kind


def default_cache_dir() -> Path:
    """Where SwiftShader is extracted: $DEPTHPORT_SWIFTSHADER_DIR or $XDG_CACHE_HOME/depthport/swiftshader."""
    return cache_folder("swiftshader", "DEPTHPORT_SWIFTSHADER_DIR")


def find_vulkan(cache_dir: Path | None = None) -> VulkanSetup:
    """Return the Vulkan setup to use, or raise VulkanUnavailable with the reason."""
    cache_dir = cache_dir or default_cache_dir()
    loader_dirs = _loader_dirs(cache_dir)
    explicit = os.environ.get("VK_ICD_FILENAMES") or os.environ.get("VK_DRIVER_FILES")
    if explicit:
        return VulkanSetup("env", explicit, loader_dirs)
    for folder in (cache_dir, SYSTEM_CHROMIUM):
        if (folder / ICD_NAME).is_file() and (folder / LIB_NAME).is_file():
            return VulkanSetup("swiftshader", str(folder / ICD_NAME), loader_dirs)
    raise VulkanUnavailable(f"no SwiftShader Vulkan driver in {cache_dir} or {SYSTEM_CHROMIUM}; {SETUP_HINT}")


def _loader_dirs(cache_dir: Path) -> tuple[str, ...]:
    """Extra library dirs for libvulkan.so.1; raises when the loader is nowhere."""
    local = cache_dir / "lib"
    if (local / "libvulkan.so.1").exists():
        return (str(local),)
    if ctypes.util.find_library("vulkan"):
        return ()
    raise VulkanUnavailable(f"Vulkan loader libvulkan.so.1 not found (apt-get install libvulkan1); {SETUP_HINT}")


def install_swiftshader(cache_dir: Path | None = None) -> VulkanSetup:
    """Extract SwiftShader (chromium-common) and, if missing, the Vulkan loader (libvulkan1) with apt-get download.

    Needs no root, only apt-get/dpkg-deb and package-index access. Idempotent.
    """
    cache_dir = cache_dir or default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    if not ((cache_dir / ICD_NAME).is_file() and (cache_dir / LIB_NAME).is_file()):
        work = _extract_deb("chromium-common")
        for name in (ICD_NAME, LIB_NAME):
            shutil.copy2(work / "root/usr/lib/chromium" / name, cache_dir / name)
        shutil.rmtree(work)
    if not ctypes.util.find_library("vulkan") and not (cache_dir / "lib/libvulkan.so.1").exists():
        work = _extract_deb("libvulkan1")
        (cache_dir / "lib").mkdir(exist_ok=True)
        for lib in work.glob("root/usr/lib/*/libvulkan.so.1*"):
            shutil.copy2(lib, cache_dir / "lib" / lib.name)
        shutil.rmtree(work)
    return find_vulkan(cache_dir)


def _extract_deb(package: str) -> Path:
    """Download `package` with apt-get into a fresh temp dir and unpack it under <dir>/root; return <dir>."""
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        raise VulkanUnavailable("apt-get/dpkg-deb not available to fetch " + package)
    work = Path(tempfile.mkdtemp(prefix="depthport-deb-"))
    work.chmod(0o777)  # apt-get download run as root writes as the _apt user
    try:
        subprocess.run(["apt-get", "download", "-q", package], cwd=work, check=True, capture_output=True, text=True)
        deb = next(work.glob(f"{package}_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "root")], check=True, capture_output=True, text=True)
    except (subprocess.CalledProcessError, StopIteration) as exc:
        shutil.rmtree(work)
        detail = getattr(exc, "stderr", "") or exc.__class__.__name__
        raise VulkanUnavailable(f"could not fetch {package}: {detail.strip()}") from exc
    return work
