"""argparse root. Each subcommand lives in elfpatch/commands/<name>.py and registers its own parser.

A subcommand module provides ``register(subparsers)``; the parser it adds sets ``func`` to a callable
``run(args) -> int`` returning the exit status (0 ok, 1 a gate tripped, 2 an error).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from elfpatch.commands.helpformat import formatter
from elfpatch.errors import EXIT_ERROR, ElfPatchError, error_line, on_logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from typing import Sequence

SUBCOMMANDS = ("unique", "inits", "dlcheck", "audit")


def _show_warnings(log: logging.Logger) -> None:
    """Each warning the library logs printed as one ``elfpatch: warning: <path>: <message>`` line. Installed
    when the logger is first used: a run that warns about nothing never imports logging."""
    import logging

    class WarningLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            print(f"elfpatch: warning: {record.getMessage()}", file=sys.stderr)

    if not any(type(h).__name__ == "WarningLine" for h in log.handlers):
        log.addHandler(WarningLine(logging.WARNING))
    log.setLevel(logging.WARNING)
    log.propagate = False


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; ``only``: the subcommand about to run, the one module imported (`unique --check` then
    loads neither the audit's nor dlcheck's imports); the others are listed but not built."""
    from elfpatch import __version__

    parser = argparse.ArgumentParser(
        prog="elfpatch",
        description="Patch STB_GNU_UNIQUE symbols, list static initializers and check dlclose on ELF files.",
        formatter_class=formatter(),
    )
    parser.add_argument("--version", action="version", version=f"elfpatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        if only is None or name == only:
            importlib.import_module(f"elfpatch.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = args_list[0] if args_list and args_list[0] in SUBCOMMANDS else None
    parser = build_parser(chosen)
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    from elfpatch.commands.options import first_bad

    bad = first_bad(args)
    if bad is not None:  # a number option out of range: one error line, as any bad input
        print(error_line(None, bad), file=sys.stderr)
        return EXIT_ERROR
    on_logger(_show_warnings)
    try:
        return int(args.func(args))
    except ElfPatchError as exc:
        print(error_line(exc.path, exc.message), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(error_line(None, "interrupted"), file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error of ours.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_ERROR
    except Exception as exc:  # last resort: the CLI never prints a traceback
        if os.environ.get("ELFPATCH_DEBUG"):
            raise
        print(error_line(None, f"internal error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        return EXIT_ERROR
