"""argparse root. Each subcommand lives in elfpatch/commands/<name>.py and registers its own parser.

A subcommand module provides ``register(subparsers)``; the parser it adds sets ``func`` to a callable
``run(args) -> int`` returning the exit status (0 ok, 1 a gate tripped, 2 an error).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from elfpatch.commands.helpformat import formatter
from elfpatch.commands.run import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

SUBCOMMANDS = ("unique", "inits", "dlcheck", "audit")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; ``only``: the subcommand about to run, the one module imported (`unique --check` then
    loads neither the audit's nor dlcheck's imports); the others are listed but not built."""
    from elfpatch.version import __version__

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
    return run(parser, args_list)
