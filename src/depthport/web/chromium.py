"""Headless Chromium, driven by Playwright for Python (its own driver; the browser is Debian's ``chromium``).

One browser per process and flag set (``shared_browser``), started on first use and closed at exit: pages are cheap,
launches are not. WebGPU runs on Chromium's built-in SwiftShader adapter (``--use-webgpu-adapter=swiftshader``): CPU
emulation, so its timings are never GPU timings. Each page gets two scripts before its own (``gpu_probe.js``: what
the page asks of WebGPU; ``driver.js``: the calls below), and its console is recorded, because LiteRT.js reports a
fallback from WebGPU to WASM only there.
"""

from __future__ import annotations

import atexit
import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, MissingDependency

CHROMIUM = Path(os.environ.get("DEPTHPORT_CHROMIUM", "/usr/bin/chromium"))
FLAGS = ("--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan",
         "--use-webgpu-adapter=swiftshader")
# Dawn zero-initialises WGSL workgroup memory (the WGSL spec's rule) and bounds-checks every access (robustness); on
# SwiftShader that makes onnxruntime-web's shaders compile about 10x slower (51 s -> 4 s for the tiny model's first
# run). Off only when asked for (`fast_shaders`), and the report says so. Neither can turn a wrong shader right: a
# shader that needed them reads garbage without them, so a pass without them is a pass with them.
FAST_SHADERS = "--enable-dawn-features=disable_workgroup_init,disable_robustness"
SCRIPTS = (Path(__file__).parent / "gpu_probe.js", Path(__file__).parent / "driver.js")
SETUP_HINT = "run scripts/setup_web.sh (apt-get install chromium)"


class BrowserUnavailable(InputError):
    """No browser to drive: Chromium or Playwright missing, or the launch failed."""


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ModuleNotFoundError:
        raise MissingDependency("playwright", "driving headless Chromium") from None
    return sync_playwright


@dataclass
class Browser:
    """A launched headless Chromium."""

    flags: tuple[str, ...]
    version: str = ""
    _playwright: object = field(default=None, repr=False)
    _browser: object = field(default=None, repr=False)

    @classmethod
    def launch(cls, fast_shaders: bool = False) -> Browser:
        if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
            raise BrowserUnavailable(f"no Chromium at {CHROMIUM}; {SETUP_HINT}")
        flags = FLAGS + ((FAST_SHADERS,) if fast_shaders else ())
        runner = _playwright()().start()
        try:
            browser = runner.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=list(flags))
        except Exception as exc:  # playwright's Error: the browser did not start
            runner.stop()
            raise BrowserUnavailable(f"Chromium at {CHROMIUM} did not start: {str(exc).splitlines()[0]}") from None
        return cls(flags, f"Chromium {browser.version}", runner, browser)

    def open(self, url: str) -> Page:
        """A new page of ``url`` (index.html of a served web folder), loaded, its runtime not yet started."""
        context = self._browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        for script in SCRIPTS:
            page.add_init_script(script.read_text(encoding="utf-8"))
        return Page(page, url)

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._playwright.stop()
            self._browser = None


_SHARED: dict[bool, Browser] = {}


def shared_browser(fast_shaders: bool = False) -> Browser:
    """The process's browser for this flag set, launched on first use and closed at exit."""
    if fast_shaders not in _SHARED:
        _SHARED[fast_shaders] = Browser.launch(fast_shaders)
        atexit.register(_SHARED[fast_shaders].close)
    return _SHARED[fast_shaders]


def floats(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").copy()


class Page:
    """One page of a web folder, driven through ``driver.js``; ``console`` holds every console line."""

    def __init__(self, page, url: str):
        self._page, self.console = page, []
        page.on("console", lambda msg: self.console.append(f"{msg.type}: {msg.text}"))
        page.on("pageerror", lambda exc: self.console.append(f"pageerror: {exc}"))
        page.set_default_timeout(600_000)
        from playwright.sync_api import Error

        try:
            page.goto(url + "index.html?autorun=0")
        except Error as exc:
            raise RuntimeError(f"the page did not load: {str(exc).splitlines()[0]}") from None
        self.call("async () => { await window.depthport.ready; }")

    def call(self, script: str, arg=None):
        """Evaluate ``script`` in the page; a JS exception becomes a RuntimeError with its first line."""
        from playwright.sync_api import Error

        try:
            return self._page.evaluate(script, arg)
        except Error as exc:
            raise RuntimeError(f"in the page: {str(exc).splitlines()[0]}") from None

    def select(self, backend: str, precision: str = "fp32", model: str | None = None) -> dict:
        """Load and compile the model for ``backend`` (and GPU ``precision``); the runtime's own account of it."""
        return self.call("([b, p, m]) => __depthportDriver.select(b, p, m)", [backend, precision, model])

    def infer_png(self, backend: str, precision: str, model: str | None, png: bytes, shape: list[int],
                  prompt: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float]:
        """(input tensor as the page made it, output, ms) for one PNG image through the page's own JS; ``prompt``:
        a prompted model's (1, 1, h, w) prompt input, fed as it is."""
        extra = [base64.b64encode(np.ascontiguousarray(prompt, "<f4").tobytes()).decode("ascii"),
                 list(prompt.shape)] if prompt is not None else [None, None]
        out = self.call("([b, p, m, png, s, q, qs]) => __depthportDriver.inferPng(b, p, m, png, s, q, qs)",
                        [backend, precision, model, base64.b64encode(png).decode("ascii"), shape, *extra])
        return floats(out["tensor"]).reshape(shape), floats(out["depth"]), float(out["ms"])

    def tensor_of(self, png: bytes, shape: list[int]) -> np.ndarray:
        """The page's input tensor for one PNG image (its decode and preprocessing, no model run)."""
        out = self.call("([png, s]) => __depthportDriver.tensorOf(png, s)", [base64.b64encode(png).decode("ascii"), shape])
        return floats(out).reshape(shape)

    def prompt_of(self, data: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The page's reading of a prompt file (``name`` says .npy or PNG): ((h, w) metres, its model input)."""
        out = self.call("([d, n]) => __depthportDriver.promptOf(d, n)", [base64.b64encode(data).decode("ascii"), name])
        return floats(out["depth"]).reshape(out["h"], out["w"]), floats(out["input"])

    def time(self, backend: str, precision: str, model: str | None, calls: int) -> list[float]:
        """ms of ``calls`` more runs on the last input."""
        return [float(ms) for ms in self.call("([b, p, m, n]) => __depthportDriver.time(b, p, m, n)",
                                              [backend, precision, model, calls])]

    def gpu(self) -> dict | None:
        """What the page asked of WebGPU since the last ``select`` (gpu_probe.js)."""
        return self.call("() => __depthportDriver.gpu()")

    def show_bundled(self, backend: str, precision: str = "fp32") -> dict:
        """The page's own path for a person: the bundled image, decoded, run and shown."""
        return self.call("([b, p]) => __depthportDriver.showBundled(b, p)", [backend, precision])

    def screenshot(self) -> bytes:
        return self._page.screenshot(full_page=True)

    def close(self) -> None:
        self._page.context.close()
