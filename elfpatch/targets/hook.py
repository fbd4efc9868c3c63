"""The pre-commit hook (.pre-commit-hooks.yaml): `elfpatch unique --check` over the staged files that are
ELF files, ar archives or wheels by their first bytes. Other files pre-commit hands over by name (a linker
script called libc.so, a COFF object) are passed over silently, as a tree walk passes over them.

    python -m elfpatch.targets.hook [unique options] FILE...

Options are those of `elfpatch unique` (--symbol GLOB, --to, --json); every argument naming an existing
regular file is taken as a file. Exit status as `elfpatch unique --check`: 0 clean, 1 unique symbols found,
2 an error.
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

from elfpatch.targets import kind_of, read_head


def split(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(options, target files) of the hook's arguments."""
    options, files = [], []
    for arg in args:
        if not arg.startswith("-") and os.path.isfile(arg):
            try:
                if kind_of(read_head(arg), arg) is not None:
                    files.append(arg)
            except OSError:
                files.append(arg)  # let elfpatch say why it cannot be read
        else:
            options.append(arg)
    return options, files


def main(argv: Sequence[str] | None = None) -> int:
    from elfpatch.cli import main as cli_main

    options, files = split(sys.argv[1:] if argv is None else argv)
    if not files:
        return 0
    return cli_main(["unique", "--check", *options, *files])


if __name__ == "__main__":
    raise SystemExit(main())
