#!/usr/bin/env bash
# The GPU-machine run of depthport. The machine reaches no package registry, so benchmarks/device_prepare.py makes
# everything here first (files, predictions, the LiteRT runtime for its Python, the Vulkan loader) in a git-ignored
# folder that `run` carries; this script then, there:
#   1. unpacks the carried ai-edge-litert into a private folder (PYTHONPATH) and the Vulkan loader (libvulkan1)
#      when the system has none, and points Vulkan at the NVIDIA driver's ICD;
#   2. runs benchmarks/device_run.py: every carried file on the LiteRT GPU accelerator at FP16 compute (and FP32 for
#      the plain set) against the FP16-compute predictions and the CPU, then the CPU across thread counts.
# Everything is written under $OUT (default ./device-out): summary.json, summary.md, device_run.log.
#
# Usage: bash benchmarks/device_run.sh [IN] [device_run.py options]   (IN: default .device-in)
# Environment: OUT, PYTHON (default python3), BUDGET_S (default 400), RUNTIME_DIR (the folder holding
# litert.tar.xz and the .deb; default IN/common: one copy serves several IN folders in one call).
set -euo pipefail
cd "$(dirname "$0")/.."

IN="${1:-.device-in}"
[ $# -gt 0 ] && shift
OUT="${OUT:-./device-out}"
export OUT
mkdir -p "$OUT"
log="$OUT/device_run.log"
: > "$log"
start=$(date +%s)
PYTHON="${PYTHON:-python3}"
RUNTIME_DIR="${RUNTIME_DIR:-$IN/common}"
[ -f "$RUNTIME_DIR/litert.tar.xz" ] || { echo "no $RUNTIME_DIR/litert.tar.xz: run benchmarks/device_prepare.py here" >&2
                                        exit 2; }

site="$(mktemp -d /tmp/depthport-site.XXXXXX)"
tar -xJf "$RUNTIME_DIR/litert.tar.xz" -C "$site"
export PYTHONPATH="$site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

{
    echo "== machine"
    lscpu | grep -E "Model name|^CPU\(s\)|Flags" || true
    command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "no nvidia-smi"
    echo "== Vulkan"
    if command -v nvidia-smi >/dev/null && ! ldconfig -p 2>/dev/null | grep -q "libvulkan.so.1"; then
        deb="$(ls "$RUNTIME_DIR"/libvulkan1_*.deb 2>/dev/null | tail -1 || true)"
        if [ -n "$deb" ] && [ "$(id -u)" = 0 ]; then
            dpkg -x "$deb" / && ldconfig && echo "unpacked $deb"
        else
            echo "no Vulkan loader and no carried libvulkan1 .deb (or not root)"
        fi
    fi
    if [ -z "${VK_ICD_FILENAMES:-}" ]; then
        for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
                   /etc/vulkan/icd.d/nvidia_icd.json; do
            [ -f "$icd" ] && { export VK_ICD_FILENAMES="$icd" VK_DRIVER_FILES="$icd"; break; }
        done
    fi
    if [ -z "${VK_ICD_FILENAMES:-}" ] && ldconfig -p 2>/dev/null | grep -q "libGLX_nvidia.so.0"; then
        printf '{"file_format_version":"1.0.0","ICD":{"library_path":"libGLX_nvidia.so.0","api_version":"1.3"}}\n' \
            >"$OUT/nvidia_icd.json"
        export VK_ICD_FILENAMES="$(cd "$OUT" && pwd)/nvidia_icd.json"
        export VK_DRIVER_FILES="$VK_ICD_FILENAMES"
    fi
    echo "VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-unset}"
    [ -n "${VK_ICD_FILENAMES:-}" ] && cat "$VK_ICD_FILENAMES" || true
    ldconfig -p 2>/dev/null | grep -E "libvulkan.so.1|libGLX_nvidia|libnvidia-gl" \
        || echo "no Vulkan loader / NVIDIA GL libs"
} >>"$log" 2>&1

status=0
"$PYTHON" benchmarks/device_run.py --in "$IN" --out "$OUT" --budget-s "${BUDGET_S:-400}" "$@" 2>>"$log" || status=$?
echo "== done in $(( $(date +%s) - start )) s, exit $status" | tee -a "$log"
exit "$status"
