#!/usr/bin/env bash
# The GPU-machine run of depthport, under 8 minutes on a machine with an NVIDIA GPU and 16 cores:
#   1. installs what it needs from the package registries into $VENV (torch==2.13.0 first, then
#      `pip install -e .` with constraints.txt, as the Makefile's venv target does);
#   2. runs benchmarks/device_run.py: DA-V2-Small exported to LiteRT FP32/FP16/INT8 and the plain
#      conversion; the LiteRT GPU accelerator on the real GPU (FP32 and FP16 files at FP32 and FP16 compute)
#      against the CPU and depthport's FP16-compute prediction; the CPU benchmark at 1/2/4/8/16 threads
#      (plain vs FP32 vs INT8, with the GEMM probe).
# Everything is written under $OUT (default ./device-out): summary.json, summary.md, the logs, the files.
#
# Usage: bash benchmarks/device_run.sh [--small] [--no-install]
#   --small       tiny config (da2-tiny 56x70), threads 1/2, GPU part only where there is a GPU
#   --no-install  use $PYTHON (default: .venv/bin/python if present, else python3) as it is
# Environment: OUT, VENV (default .venv-device), PYTHON, TORCH_INDEX_URL (default: PyTorch's CPU wheels; torch
# only feeds the converters, LiteRT drives the GPU), BUDGET_S (whole run, default 470 s).
set -euo pipefail
cd "$(dirname "$0")/.."

small="" install=1
for arg in "$@"; do
    case "$arg" in
        --small) small="--small" ;;
        --no-install) install=0 ;;
        *) echo "usage: $0 [--small] [--no-install]" >&2; exit 2 ;;
    esac
done

OUT="${OUT:-./device-out}"
export OUT
mkdir -p "$OUT"
start=$(date +%s)
budget="${BUDGET_S:-470}"
log="$OUT/device_run.log"
: > "$log"

if [ "$install" = 1 ]; then
    VENV="${VENV:-.venv-device}"
    {
        echo "== install into $VENV ($(date -u +%FT%TZ))"
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q --upgrade pip
        # torch first and exact (a range would pull a multi-GB CUDA build)
        "$VENV/bin/pip" install -q torch==2.13.0 --index-url "${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" \
            || "$VENV/bin/pip" install -q torch==2.13.0
        "$VENV/bin/pip" install -q -c constraints.txt -e .
    } >>"$log" 2>&1 || { echo "install failed, see $log" >&2; tail -20 "$log" >&2; exit 1; }
    PYTHON="$VENV/bin/python"
else
    PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
fi

# The LiteRT GPU accelerator reaches the GPU through Vulkan: record what this machine offers, and where a piece
# is missing add it: the Vulkan loader (Debian/Ubuntu package libvulkan1, as root), and the NVIDIA ICD manifest
# when the driver's Vulkan library (libGLX_nvidia.so.0) is present without one (containers often lack it).
if command -v nvidia-smi >/dev/null; then
    {
        echo "== GPU / Vulkan"
        nvidia-smi -L || true
        if ! ldconfig -p 2>/dev/null | grep -q "libvulkan.so.1" && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "installing the Vulkan loader (libvulkan1)"
            timeout 120 sh -c "DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq --no-install-recommends libvulkan1" || true
        fi
        icds="$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null || true)"
        if [ -z "${VK_ICD_FILENAMES:-}" ] && ! echo "$icds" | grep -qi nvidia && ldconfig -p 2>/dev/null | grep -q "libGLX_nvidia.so.0"; then
            printf '{"file_format_version":"1.0.0","ICD":{"library_path":"libGLX_nvidia.so.0","api_version":"1.3"}}\n' \
                >"$OUT/nvidia_icd.json"
            export VK_ICD_FILENAMES="$(cd "$OUT" && pwd)/nvidia_icd.json"
            echo "wrote $VK_ICD_FILENAMES"
        fi
        echo "Vulkan ICDs: ${icds:-none}; VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-unset}"
        ldconfig -p 2>/dev/null | grep -E "libvulkan.so.1|libGLX_nvidia|libnvidia-gl" || echo "no Vulkan loader / NVIDIA GL libs in ldconfig"
    } >>"$log" 2>&1
else
    echo "== no nvidia-smi: CPU only" >>"$log"
fi

left=$(( budget - ($(date +%s) - start) ))
echo "== device_run.py ($left s left)" >>"$log"
status=0
"$PYTHON" benchmarks/device_run.py --out "$OUT" $small --budget-s "$(( left > 60 ? left - 30 : 30 ))" \
    2>>"$log" | tee "$OUT/summary.txt" || status=$?
echo "== done in $(( $(date +%s) - start )) s, exit $status" | tee -a "$log"
exit "$status"
