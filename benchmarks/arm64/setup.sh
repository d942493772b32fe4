#!/usr/bin/env bash
# An ARMv8.2-A CPU with FP16 arithmetic, emulated on any x86 Linux machine, to run fp16 .pte files as a phone's
# CPU computes them (XNNPACK's neonfp16arith kernels: one FP16 fused multiply-add per product).
#
# Builds, under $ROOT (default ~/.cache/depthport/arm64-qemu, about 1.3 GB):
#   sysroot/   Debian bookworm's arm64 python3.11 and the C/C++ runtime libraries, unpacked (dpkg -x, nothing
#              installed for arm64), plus a /proc/cpuinfo and sysfs of a two-core Neoverse-N1-like CPU (qemu 7.2
#              passes the host's x86 /proc/cpuinfo through; cpuinfo and oneDNN read these instead);
#   site/      the aarch64 wheels of torch==2.13.0 and executorch==1.5.1 from PyPI, unzipped, and their pure
#              Python dependencies;
#   stubs/     empty aarch64 shared libraries named after the CUDA libraries that PyPI's aarch64 torch wheel
#              links (libcudart, libcublas...), so that its CPU part loads; nothing calls them (cuda_stubs.py).
# Needs root for apt (qemu-user-static, the aarch64 cross binutils and gcc for the stubs) and the package index.
# depthport.runtimes.arm64 runs a .pte there under `qemu-aarch64-static -cpu max,sme=off`: without SME, since
# XNNPACK prefers its SME kernels where they exist, and those accumulate FP16 products in FP32.
#
# Usage: bash benchmarks/arm64/setup.sh     (then: python benchmarks/fp16_floor.py --arm64 ...)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ROOT="${ROOT:-${DEPTHPORT_ARM64_ROOT:-$HOME/.cache/depthport/arm64-qemu}}"
PIP="${PIP:-$here/../../.venv/bin/pip}"
mkdir -p "$ROOT"/{debs,sysroot,site,wheels,stubs}

if ! command -v qemu-aarch64-static >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
    apt-get install -y -qq qemu-user-static gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu >/dev/null
fi
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update -qq
fi
debs="libc6 libgcc-s1 libstdc++6 libgomp1 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
      libexpat1 zlib1g libssl3 libffi8 libbz2-1.0 liblzma5 libsqlite3-0 libncursesw6 libtinfo6 libreadline8
      libuuid1 libcrypt1 libdb5.3 libgdbm6 libnsl2 libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3
      libcom-err2 libkrb5support0 libkeyutils1 libatomic1 media-types"
if [ ! -x "$ROOT/sysroot/usr/bin/python3.11" ]; then
    (cd "$ROOT/debs" && for p in $debs; do apt-get download -qq "$p:arm64" 2>/dev/null || apt-get download -qq "$p"; done)
    for d in "$ROOT"/debs/*.deb; do dpkg -x "$d" "$ROOT/sysroot"; done
fi

fake="$ROOT/sysroot"
mkdir -p "$fake/proc" "$fake/sys/devices/system/cpu"
: > "$fake/proc/cpuinfo"
for c in 0 1; do
    d="$fake/sys/devices/system/cpu/cpu$c"
    mkdir -p "$d/regs/identification" "$d/topology"
    echo 0x00000000413fd0c1 > "$d/regs/identification/midr_el1"
    echo 0x0000000000000000 > "$d/regs/identification/revidr_el1"
    echo "$c" > "$d/topology/core_id"
    echo 0 > "$d/topology/physical_package_id"
    printf 'processor\t: %s\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n' "$c" >> "$fake/proc/cpuinfo"
done
for f in possible present online; do echo 0-1 > "$fake/sys/devices/system/cpu/$f"; done

plat=(--platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64
      --python-version 3.11 --implementation cp --abi cp311 --only-binary=:all:)
if [ ! -d "$ROOT/site/executorch" ]; then
    "$PIP" download -q --no-deps "${plat[@]}" -d "$ROOT/wheels" torch==2.13.0 executorch==1.5.1
    for w in "$ROOT"/wheels/*.whl; do (cd "$ROOT/site" && python3 -m zipfile -e "$w" .); done
    "$PIP" install -q --no-deps "${plat[@]}" --target "$ROOT/site" typing_extensions sympy mpmath filelock \
        networkx jinja2 markupsafe fsspec "numpy<2.4" packaging flatbuffers pyyaml ruamel.yaml tabulate \
        expecttest parameterized py-cpuinfo
fi
if [ ! -e "$ROOT/stubs/libcudart.so.13" ]; then
    python3 "$here/cuda_stubs.py" "$ROOT/site" "$ROOT/sysroot" "$ROOT/stubs"
fi
echo "arm64 emulation ready under $ROOT"
