"""`depthport serve DIR`: serve a web export on 127.0.0.1 with the headers its page needs, until Ctrl-C."""

from __future__ import annotations


def add_parser(subparsers):
    p = subparsers.add_parser("serve", help="serve a web export (--targets web|web-onnx) on 127.0.0.1")
    p.add_argument("folder", metavar="DIR", help="the web folder an export wrote (index.html, depthport-web.json)")
    p.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000; 0: any free port)")
    p.add_argument("--log", action="store_true", help="print one line per request")
    return p


def run(args) -> int:
    from ..errors import InputError
    from ..web.folder import read_config
    from ..web.server import HEADERS, make_server, url_of

    config = read_config(args.folder)
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port} is not a port number (0-65535)")
    try:
        server = make_server(args.folder, args.port, quiet=not args.log)
    except OSError as exc:
        raise InputError(f"cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    print(f"serving {config['model']} ({config['runtime']} {config['runtime_version']}) from {args.folder}")
    print(f"open {url_of(server)}index.html  (Ctrl-C stops)")
    print("headers: " + "; ".join(f"{k}: {v}" for k, v in HEADERS.items()), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0
