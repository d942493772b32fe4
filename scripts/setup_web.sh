#!/usr/bin/env bash
# Set up what the browser target needs: Debian's `chromium` (the headless browser that `depthport verify`
# drives, with its built-in SwiftShader WebGPU adapter) and the pinned npm runtimes (LiteRT.js, onnxruntime-web)
# that `depthport export --targets web|web-onnx` copies into the page folder. Idempotent; Debian 12 / Ubuntu.
#
# Chromium and, when npm is missing, nodejs + npm are installed with apt-get, which needs root (CI runs as root).
# The npm packages come from src/depthport/web/npm/package.json + package-lock.json through `npm ci`, into
# CACHE_DIR (default $DEPTHPORT_WEB_DIR or ${XDG_CACHE_HOME:-~/.cache}/depthport/web), where depthport.web.runtimes
# looks for them.
#
# Usage: scripts/setup_web.sh [CACHE_DIR]
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
npm_dir="$here/src/depthport/web/npm"
dest="${1:-${DEPTHPORT_WEB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/depthport/web}}"
chromium="${DEPTHPORT_CHROMIUM:-/usr/bin/chromium}"
is_root() { [ "$(id -u)" = 0 ]; }

missing=()
[ -x "$chromium" ] || missing+=(chromium)
command -v npm >/dev/null || missing+=(nodejs npm)
if [ "${#missing[@]}" -gt 0 ]; then
    if ! is_root; then
        echo "setup_web: ${missing[*]} missing and not root: run 'apt-get install ${missing[*]}' as root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$dest"
# npm ci only when the lock changed since the last install (or nothing is installed yet)
stamp="$dest/node_modules/.depthport-lock"
if ! cmp -s "$npm_dir/package-lock.json" "$stamp"; then
    cp "$npm_dir/package.json" "$npm_dir/package-lock.json" "$dest/"
    (cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    cp "$npm_dir/package-lock.json" "$stamp"
fi

echo "browser: $("$chromium" --version 2>/dev/null || echo "$chromium")"
echo "web runtimes ready in $dest/node_modules (depthport finds them there)"
