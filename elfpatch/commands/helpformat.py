"""argparse help at the terminal's width, without the imports argparse makes to find it."""
from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def formatter(cls: type[argparse.HelpFormatter] = argparse.HelpFormatter) -> Callable[..., argparse.HelpFormatter]:
    """``cls`` at the terminal's width, found as shutil.get_terminal_size finds it (COLUMNS, then stdout's
    terminal, else 80) without importing shutil, which argparse would do at every parser (with bz2 and lzma:
    a twentieth of `unique --check`'s start-up)."""

    def make(prog: str) -> argparse.HelpFormatter:
        try:
            columns = int(os.environ.get("COLUMNS", 0))
        except ValueError:
            columns = 0
        if columns <= 0:
            stdout = sys.__stdout__  # None when Python was started without one
            try:
                columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 80
            except (AttributeError, ValueError, OSError):
                columns = 80
        return cls(prog, width=(columns or 80) - 2)

    return make
