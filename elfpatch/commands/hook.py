"""The pre-commit hook (.pre-commit-hooks.yaml): `elfpatch unique --check` over the staged files that are
ELF files, ar archives or wheels by their first bytes. Other files pre-commit hands over by name (a linker
script called libc.so, a COFF object) are passed over silently, as a tree walk passes over them.

    python -m elfpatch.commands.hook [unique options] FILE...

Options are those of `elfpatch unique` (--symbol GLOB, --to, --json, --exclude GLOB); they are told from
files by that parser's own definition, so an option's value (`--exclude libfoo.so`) stays its value even when
a file has that name. Every other argument naming an existing regular file is taken as a file.
Exit status as `elfpatch unique --check`: 0 clean, 1 unique symbols found, 2 an error.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from elfpatch.targets import kind_of, read_head
from elfpatch.version import __version__


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`elfpatch unique` under a root named as the CLI's, so that its usage errors read the same: (the root, the
    `unique` subparser whose options the splitter reads). Built once per run: the splitter and the run share it."""
    from elfpatch.commands.helpformat import formatter
    from elfpatch.commands.unique import register

    parser = argparse.ArgumentParser(prog="elfpatch", formatter_class=formatter())
    parser.add_argument("--version", action=_Version)  # the CLI root's, so that its usage line reads the same
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register(sub)
    return parser, sub.choices["unique"]


class _Version(argparse.Action):
    """The CLI root's ``--version``. The version is read from the package, imported before any of its modules
    (this module sits below the entry points' layer: it imports none of them)."""

    def __init__(self, option_strings: list[str], dest: str, **_: object) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                         help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        sys.stdout.write(f"elfpatch {__version__}\n")  # on stdout, as argparse's own
        parser.exit()


def _unique_options(unique: argparse.ArgumentParser) -> dict[str, bool]:
    """Each option string of `elfpatch unique` -> whether it takes a value, read from its parser."""
    return {opt: a.nargs != 0 for a in unique._actions for opt in a.option_strings}


def _takes_value(arg: str, options: dict[str, bool]) -> bool:
    """Whether ``arg`` is an option whose value is the next argument (not ``--opt=v`` nor ``-oV``); a long
    option may be abbreviated, as argparse allows, when the prefix is unambiguous."""
    if arg in options:
        return options[arg]
    if not arg.startswith("--") or "=" in arg:
        return False
    matches = [o for o in options if o.startswith(arg)]
    return len(matches) == 1 and options[matches[0]]


def split(args: Sequence[str], unique: argparse.ArgumentParser | None = None) -> tuple[list[str], list[str]]:
    """(options, target files) of the hook's arguments, told apart by ``unique`` (`elfpatch unique`'s parser,
built when not given): an option's value is never taken for a file; after ``--`` no argument is an option."""
    options: list[str] = []
    files: list[str] = []
    known = _unique_options(unique if unique is not None else _parser()[1])
    value_next = only_paths = False
    for arg in args:
        if value_next:
            options.append(arg)
            value_next = False
        elif arg.startswith("-") and not only_paths:
            options.append(arg)
            only_paths = arg == "--"
            value_next = _takes_value(arg, known)
        elif not os.path.isfile(arg):
            options.append(arg)  # not a staged file: elfpatch says what it is
        elif _is_target(arg):
            files.append(arg)
    return options, files


def _is_target(path: str) -> bool:
    try:
        return kind_of(read_head(path), path) is not None
    except OSError:
        return True  # let elfpatch say why it cannot be read


def main(argv: Sequence[str] | None = None) -> int:
    from elfpatch.commands.run import run

    parser, unique = _parser()
    options, files = split(sys.argv[1:] if argv is None else argv, unique)
    if not files:
        return 0
    return run(parser, ["unique", "--check", *options, *files])


if __name__ == "__main__":
    raise SystemExit(main())
