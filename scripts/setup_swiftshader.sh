#!/usr/bin/env bash
# Set up a software Vulkan device (SwiftShader) for the LiteRT GPU (WebGPU) accelerator on a machine
# without a GPU. Idempotent; Debian 12 / Ubuntu. SwiftShader comes from the chromium-common package
# (only its two SwiftShader files are kept); the Vulkan loader from libvulkan1, installed with apt when
# run as root, otherwise extracted next to SwiftShader (depthport then puts it on LD_LIBRARY_PATH).
#
# Usage: scripts/setup_swiftshader.sh [CACHE_DIR]
#   CACHE_DIR defaults to $DEPTHPORT_SWIFTSHADER_DIR or ${XDG_CACHE_HOME:-~/.cache}/depthport/swiftshader,
#   where depthport.runtimes.swiftshader looks for it.
set -euo pipefail

dest="${1:-${DEPTHPORT_SWIFTSHADER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/depthport/swiftshader}}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
is_root() { [ "$(id -u)" = 0 ]; }

have_loader() {
    [ -e "$dest/lib/libvulkan.so.1" ] && return 0
    compgen -G "/usr/lib/*/libvulkan.so.1" >/dev/null || compgen -G "/lib/*/libvulkan.so.1" >/dev/null
}

have_swiftshader() {
    [ -f "$dest/vk_swiftshader_icd.json" ] && [ -f "$dest/libvk_swiftshader.so" ]
}

extract_deb() {  # extract_deb PACKAGE TARGET_DIR
    local work
    work="$(mktemp -d)"
    chmod 777 "$work"  # lets apt's _apt user write the download when run as root
    (cd "$work" && apt-get download -q "$1" >/dev/null)
    dpkg-deb -x "$work"/"$1"_*.deb "$2"
    rm -rf "$work"
}

if ! have_loader || ! have_swiftshader; then
    if is_root; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
    fi
    if ! have_loader; then
        if is_root; then
            apt-get install -y -qq --no-install-recommends libvulkan1 >/dev/null
        else
            tmp="$(mktemp -d)"
            extract_deb libvulkan1 "$tmp"
            mkdir -p "$dest/lib"
            cp -a "$tmp"/usr/lib/*/libvulkan.so.1* "$dest/lib/"
            rm -rf "$tmp"
        fi
    fi
    if ! have_swiftshader; then
        tmp="$(mktemp -d)"
        extract_deb chromium-common "$tmp"
        cp "$tmp/usr/lib/chromium/libvk_swiftshader.so" "$tmp/usr/lib/chromium/vk_swiftshader_icd.json" "$dest/"
        rm -rf "$tmp"
    fi
fi

echo "SwiftShader ready in $dest (depthport finds it there)"
echo "to use it elsewhere: export VK_ICD_FILENAMES=$dest/vk_swiftshader_icd.json"
if [ -d "$dest/lib" ]; then
    echo "and: export LD_LIBRARY_PATH=$dest/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
fi
