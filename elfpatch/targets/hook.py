"""The pre-commit hook's old entry, `python -m elfpatch.targets.hook`: the hook moved to elfpatch.commands.hook.
Run as a module it says so in one error line and exits 2, so a hook configuration still naming it fails with
what to use instead (not Python's bare "No module named"). Imports nothing above its layer."""
from __future__ import annotations

import sys

from elfpatch.errors import EXIT_ERROR, error_line

MOVED = ("the pre-commit hook is now 'python -m elfpatch.commands.hook' (or 'elfpatch unique --check'); "
         "update your hook's entry")


def main() -> int:
    print(error_line(None, MOVED), file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
