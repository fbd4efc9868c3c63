"""argparse root. Each subcommand lives in elfpatch/main_<name>.py and registers its own parser.

A subcommand module provides ``register(subparsers)``; the parser it adds sets ``func`` to a callable
``run(args) -> int`` returning the exit status (0 ok, 1 a gate tripped, 2 an error).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Sequence

from elfpatch.errors import EXIT_ERROR, LOG, ElfPatchError, error_line

SUBCOMMANDS = ("unique", "inits", "dlcheck", "audit")


class _WarningLine(logging.Handler):
    """Prints each warning the library logs as one ``elfpatch: warning: <path>: <message>`` line."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"elfpatch: warning: {record.getMessage()}", file=sys.stderr)


def _show_warnings() -> None:
    if not any(isinstance(h, _WarningLine) for h in LOG.handlers):
        LOG.addHandler(_WarningLine(logging.WARNING))
    LOG.setLevel(logging.WARNING)
    LOG.propagate = False


def build_parser() -> argparse.ArgumentParser:
    from elfpatch import __version__

    parser = argparse.ArgumentParser(
        prog="elfpatch",
        description="Patch STB_GNU_UNIQUE symbols, list static initializers and check dlclose on ELF files.",
    )
    parser.add_argument("--version", action="version", version=f"elfpatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"elfpatch.main_{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    _show_warnings()
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
