"""Empty aarch64 libraries for the CUDA libraries that PyPI's aarch64 torch wheel links, so its CPU part loads.

PyPI's aarch64 torch is a CUDA build: libtorch.so needs libcudart, libcublas, libcudnn... which come from
nvidia-* wheels that are not needed (nor available) to run ExecuTorch on a CPU. For every library that a
shared object in the wheels needs and that neither the wheels nor the sysroot have, this writes a stub with the
same soname, defining each symbol the wheels import from it (with its symbol version) as a function that
returns 100 (cudaErrorNoDevice / CUDA_ERROR_NO_DEVICE). Symbols imported without a version go into one stub.

    python cuda_stubs.py SITE SYSROOT OUT
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

READELF = "aarch64-linux-gnu-readelf"
SKIP = ("_ITM", "_ZTH", "_ZGTt", "__gcov", "__gmon_start__")


def readelf(*args: str) -> str:
    return subprocess.run([READELF, *args], capture_output=True, text=True, check=False).stdout


def needed(lib: Path) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", str(lib)))


def symbols(lib: Path) -> tuple[set[str], list[tuple[str, str | None]]]:
    """(defined names, [(undefined name, version or None)])."""
    defined, undefined = set(), []
    for line in readelf("--dyn-syms", "-W", str(lib)).splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0].endswith(":"):
            continue
        name, _, version = parts[7].partition("@")
        if parts[6] == "UND":
            undefined.append((name, version.lstrip("@") or None))
        else:
            defined.add(name)
    return defined, undefined


def version_files(lib: Path) -> dict[str, str]:
    """Symbol version -> the library file that must define it (the .gnu.version_r section)."""
    out, current = {}, None
    for line in readelf("-V", "-W", str(lib)).splitlines():
        if m := re.search(r"File: (\S+)", line):
            current = m.group(1)
        elif (m := re.search(r"Name: (\S+)", line)) and current:
            out[m.group(1)] = current
    return out


def main(site: Path, sysroot: Path, out: Path) -> None:
    wheel_libs = [p for p in site.rglob("*.so*") if p.is_file() and ".so" in p.name and "dist-info" not in str(p)]
    system_libs = [p for d in ("lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu") for p in (sysroot / d).glob("*.so*")]
    present = {p.name for p in wheel_libs + system_libs}
    missing = sorted({n for lib in wheel_libs for n in needed(lib)} - present)
    defined, loose = set(), set()
    versioned = collections.defaultdict(set)
    for lib in wheel_libs:
        names, undefined = symbols(lib)
        defined |= names
        files = version_files(lib)
        for name, version in undefined:
            if version and files.get(version) in missing:
                versioned[files[version]].add((name, version))
            elif not version:
                loose.add(name)
    for lib in system_libs + [sysroot / "usr/bin/python3.11"]:
        defined |= symbols(lib)[0]
    loose = sorted(n for n in loose - defined if n and not n.startswith(SKIP))
    out.mkdir(parents=True, exist_ok=True)
    for i, lib in enumerate(missing):
        entries = sorted(versioned.get(lib, ()))
        src, seen = ["static long stub_fail(void) { return 100; }"], set()
        for k, (name, version) in enumerate(entries):
            if name not in seen:
                seen.add(name)
                src.append(f'long stub_{k}(void) __attribute__((alias("stub_fail")));')
                src.append(f'__asm__(".symver stub_{k}, {name}@@{version}");')
        if i == 0:
            src += [f'long {n}(void) __attribute__((alias("stub_fail")));' for n in loose if n not in seen]
        versions = sorted({v for _, v in entries})
        (out / f"{lib}.c").write_text("\n".join(src) + "\n")
        (out / f"{lib}.map").write_text("".join(f"{v} {{ global: *; }};\n" for v in versions) or "{ global: *; };\n")
        subprocess.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-o", str(out / lib), f"-Wl,-soname,{lib}",
                        f"-Wl,--version-script={out / (lib + '.map')}", str(out / f"{lib}.c")], check=True)
        print(f"{lib}: {len(seen)} versioned symbols" + (f", {len(loose)} unversioned" if i == 0 else ""))


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:4]))
