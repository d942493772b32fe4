"""The browser runtimes a web folder carries, taken from the npm packages pinned in ``npm/package-lock.json``.

``scripts/setup_web.sh`` installs them with ``npm ci`` into ``$DEPTHPORT_WEB_DIR`` or
``${XDG_CACHE_HOME:-~/.cache}/depthport/web``. An export copies the files each page needs (the JS and the
.wasm builds) into the folder, so the page fetches nothing from a CDN at run time; a missing install, or an
installed version other than the pinned one, is a one-line error that says how to fix it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..cache import cache_folder
from ..errors import InputError

NPM_DIR = Path(__file__).parent / "npm"
SETUP_HINT = "run scripts/setup_web.sh (npm ci of depthport/web/npm/package-lock.json)"


@dataclass(frozen=True)
class WebRuntime:
    """One browser runtime: its npm packages (the first is the runtime itself), the model file suffix it runs,
    and the files a page needs (path under node_modules -> path in the web folder)."""

    name: str
    packages: tuple[str, ...]
    suffix: str
    files: dict[str, str]

    @property
    def package(self) -> str:
        return self.packages[0]

    @property
    def version(self) -> str:
        return pinned_versions()[self.package]


LITERT_WASM = ("litert_wasm_internal", "litert_wasm_compat_internal", "litert_wasm_threaded_internal")
RUNTIMES = {
    # LiteRT.js picks its build itself: relaxed SIMD, or compat without it; threaded when crossOriginIsolated.
    "litert.js": WebRuntime("litert.js", ("@litertjs/core", "@litertjs/wasm-utils"), ".tflite", {
        "@litertjs/core/dist/index.js": "runtime/litert/core.js",
        "@litertjs/wasm-utils/dist/index.js": "runtime/litert/wasm-utils.js",
        **{f"@litertjs/core/wasm/{stem}.{ext}": f"runtime/litert/wasm/{stem}.{ext}"
           for stem in LITERT_WASM for ext in ("js", "wasm")},
    }),
    # The WebGPU bundle holds the WASM execution provider too; it loads the asyncify .wasm beside itself.
    "onnxruntime-web": WebRuntime("onnxruntime-web", ("onnxruntime-web",), ".onnx", {
        "onnxruntime-web/dist/ort.webgpu.bundle.min.mjs": "runtime/ort/ort.webgpu.bundle.min.mjs",
        "onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.wasm": "runtime/ort/ort-wasm-simd-threaded.asyncify.wasm",
    }),
}


def pinned_versions() -> dict[str, str]:
    """{npm package: version} as package-lock.json pins them."""
    lock = json.loads((NPM_DIR / "package-lock.json").read_text(encoding="utf-8"))
    return {key.removeprefix("node_modules/"): entry["version"] for key, entry in lock["packages"].items()
            if key.startswith("node_modules/")}


def web_dir() -> Path:
    """Where scripts/setup_web.sh installed the npm packages."""
    return cache_folder("web", "DEPTHPORT_WEB_DIR")


def installed(package: str, modules: Path) -> dict:
    """The installed package.json of ``package`` ({} when it is not installed)."""
    try:
        return json.loads((modules / package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def provenance(name: str) -> dict:
    """{package: {"version", "license"}} of the installed packages a runtime's files come from."""
    modules = web_dir() / "node_modules"
    return {p: {k: installed(p, modules).get(k) for k in ("version", "license")} for p in RUNTIMES[name].packages}


def runtime_files(name: str) -> dict[Path, str]:
    """{installed file: path in the web folder} for runtime ``name``; InputError when the pinned version is not
    installed or a file is missing."""
    runtime = RUNTIMES[name]
    modules = web_dir() / "node_modules"
    for package in runtime.packages:
        found, pinned = installed(package, modules).get("version"), pinned_versions()[package]
        if found != pinned:
            state = "not installed" if found is None else f"version {found} installed"
            raise InputError(f"the {name} page needs the npm package {package} {pinned} in {modules} ({state}); "
                             f"{SETUP_HINT}")
    files = {modules / src: dest for src, dest in runtime.files.items()}
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise InputError(f"the {name} page needs {missing[0]}, which is missing; {SETUP_HINT}")
    return files
