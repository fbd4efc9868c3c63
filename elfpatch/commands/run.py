"""Running a subcommand: the arguments parsed by the parser given (the CLI's root, or the pre-commit hook's
`unique` alone), then every failure one line and an exit status. The CLI and the hook share it."""
from __future__ import annotations

import os
import sys

from elfpatch.errors import EXIT_ERROR, ElfPatchError, error_line, on_logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import logging


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


def run(parser: argparse.ArgumentParser, args_list: list[str]) -> int:
    """Parse ``args_list`` and run the subcommand it names: its exit status (0 ok, 1 a gate tripped, 2 an
    error), never a traceback."""
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
