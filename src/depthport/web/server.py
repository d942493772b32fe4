"""Serve a web folder on 127.0.0.1 with the headers its page needs.

COOP ``same-origin`` + COEP ``require-corp`` make the page cross-origin isolated, which threaded WASM
(SharedArrayBuffer) needs; Python's ``http.server`` alone cannot send them. ``.wasm`` and ``.mjs`` get their
MIME types (WebAssembly streaming compilation and module scripts check them), and nothing is cached, so a
re-exported model is never served stale. file:// URLs do not work for the page (module scripts, CORS).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from pathlib import Path

HOST = "127.0.0.1"
HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
TYPES = {".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript",
         ".json": "application/json", ".tflite": "application/octet-stream", ".onnx": "application/octet-stream"}


class IsolatedHandler(http.server.SimpleHTTPRequestHandler):
    """Static files of one folder, plus ``extra`` URL paths mapped to other files, with ``HEADERS``."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **TYPES}

    def __init__(self, *args, extra: dict[str, Path] | None = None, quiet: bool = True, **kwargs):
        self.extra, self.quiet = ({} if extra is None else extra), quiet
        super().__init__(*args, **kwargs)

    def handle(self) -> None:
        """A browser that leaves mid-response (a reload, a closed tab, a cancelled download of the model) resets the
        connection: one log line (with ``--log``), not a traceback on the console."""
        try:
            super().handle()
        except ConnectionError as exc:
            self.log_message("the client left before the response was sent (%s)", exc.strerror or exc)

    def translate_path(self, path: str) -> str:
        mapped = self.extra.get(path.split("?", 1)[0])
        return str(mapped) if mapped is not None else super().translate_path(path)

    def end_headers(self) -> None:
        for name, value in HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def make_server(folder: str | Path, port: int = 0, extra: dict[str, Path] | None = None,
                quiet: bool = True) -> http.server.ThreadingHTTPServer:
    """A server for ``folder`` on 127.0.0.1 (``port`` 0: a free one); OSError when the port is taken."""
    handler = functools.partial(IsolatedHandler, directory=str(folder), extra=extra, quiet=quiet)
    server = http.server.ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    return server


def url_of(server: http.server.ThreadingHTTPServer) -> str:
    return f"http://{HOST}:{server.server_address[1]}/"


@contextlib.contextmanager
def serving(folder: str | Path, extra: dict[str, Path] | None = None):
    """Serve ``folder`` in a background thread for the block; yields its base URL (ends with /)."""
    server = make_server(folder, 0, extra)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
