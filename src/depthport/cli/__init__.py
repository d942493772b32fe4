"""cli: the `depthport` command line, one module per command (models, export, predict, check, verify, bench, card,
serve). Layer 7, the top: may import every stage; nothing imports cli."""

from __future__ import annotations

import argparse
import os
import sys

from .. import quiet
from ..core.provenance import command_line
from ..errors import disk_full, out_of_memory
from . import bench, card, check, export, models, predict, serve, verify

COMMANDS = {"models": models, "export": export, "predict": predict, "check": check, "verify": verify,
            "bench": bench, "card": card, "serve": serve}


DESCRIPTION = ("Monocular depth models (Depth Anything V2 and 3, their relatives) to on-device files: LiteRT .tflite, "
               "ExecuTorch .pte, ONNX and a web page, each checked against the PyTorch original, timed and described "
               "in a model card.")
EPILOG = ("Start with `depthport export da2-small --out out/`, then `depthport predict out/da2_small_fp32.tflite "
          "photo.jpg`. `depthport COMMAND -h` describes each command.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="depthport", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print depthport's version and those of Python and the runtimes (for a bug report)")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser = sub.add_parser

    def described(name, **kwargs):  # `depthport COMMAND -h` opens with the line the command list shows
        kwargs.setdefault("description", kwargs.get("help"))
        return add_parser(name, **kwargs)

    sub.add_parser = described
    for name, module in COMMANDS.items():
        module.add_parser(sub).set_defaults(handler=module.run)
    return parser


class _Version(argparse.Action):
    """'depthport 0.1.0', then one 'package version' line each (package metadata: nothing imported), and exit 0."""

    def __call__(self, parser, namespace, values, option_string=None):
        from ..core.provenance import versions

        found = versions()
        print(f"depthport {found.pop('depthport')}", *(f"{k} {v}" for k, v in found.items()), sep="\n")
        parser.exit()


def known_errors() -> tuple[type[BaseException], ...]:
    """Errors shown as one line with exit status 2: bad input, or a check that could not be made."""
    from ..core.schema import ReportError
    from ..core.tflite_graph import TfliteReadError
    from ..errors import InputError
    from ..weights import WeightsError

    # OS errors on paths the user gave: an output under a file, a folder given as a file, a folder not writable
    return (InputError, WeightsError, ReportError, TfliteReadError, FileNotFoundError, PermissionError,
            NotADirectoryError, IsADirectoryError)


def _names_print_as_stored() -> None:
    """A file name that is not valid UTF-8 (Latin-1 names from old cameras, zips, Windows copies) reaches Python
    with surrogates; printed, it would raise UnicodeEncodeError. It is written back as the bytes it was stored as,
    as ``ls`` shows it."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="surrogateescape")


def main(argv: list[str] | None = None) -> int:
    _names_print_as_stored()
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # `depthport` alone: what each command does, not a usage error
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    args.command_line = command_line(argv)  # what report.json records (main(argv) from Python too)
    try:
        return int(args.handler(args) or 0)
    except known_errors() as exc:
        if args.debug:
            raise
        print(f"depthport {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if args.debug or not disk_full(exc):
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        print(f"depthport {args.command}: error: no space left on the disk{where} ({exc.strerror}); what was being "
              "written was removed: outputs are written whole or not at all", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as exc:
        if args.debug or not (what := out_of_memory(exc)):
            raise
        smaller = " (a smaller --size needs less)" if args.command == "export" else ""
        print(f"depthport {args.command}: error: not enough memory: {what}{smaller}; outputs are written whole or not "
              "at all", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"depthport {args.command}: interrupted; nothing was written", file=sys.stderr)
        return 130


def entry() -> None:
    """The console script: main(), then the process exits without the runtimes' teardown log lines."""
    code = main()
    if not os.environ.get("DEPTHPORT_VERBOSE"):
        quiet.mute_native_stderr_for_exit()
    sys.exit(code)
