"""What several commands' options share: -v's one meaning, and the types of the number options (seconds,
counts), one parser each, one error style.

A bad value gets the one line every other bad input gets, ``elfpatch: error: --lock-timeout: expected
seconds, 0 or more, not 'soon'`` (exit 2), not argparse's usage block. argparse cannot word it so: a type
returns a BadValue instead of raising, and the CLI reports the first one once the line is parsed."""
from __future__ import annotations

import math

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    from argparse import ArgumentParser, Namespace, _ActionsContainer

VERBOSE = "also list what has no finding: "


def add_verbose(parser: ArgumentParser | _ActionsContainer, what: str) -> None:
    """``-v/--verbose`` with its one meaning in every command: list also what has no finding (``what``
    names it for this command); what is listed without it, and the exit status, do not change."""
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE + what)


class BadValue:
    """An option's value that is out of its range or no number; ``reason`` says what was expected."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Seconds:
    """Seconds: a finite number, 0 or more (``above_zero``: more than 0), at most ``most``."""

    def __init__(self, above_zero: bool = False, most: float = math.inf) -> None:
        self.above_zero, self.most = above_zero, most

    def __call__(self, text: str) -> float | BadValue:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if (value > 0 if self.above_zero else value >= 0) and value <= self.most and math.isfinite(value):
            return value
        low = "above 0" if self.above_zero else "0 or more"
        high = "" if math.isinf(self.most) else f" and at most {self.most:g}"
        return BadValue(f"expected seconds {low}{high}, not {text!r}")


class Count:
    """A whole number, 0 or more, at most ``most``."""

    def __init__(self, most: int | None = None) -> None:
        self.most = most

    def __call__(self, text: str) -> int | BadValue:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value >= 0 and (self.most is None or value <= self.most):
            return value
        high = "" if self.most is None else f" and at most {self.most}"
        return BadValue(f"expected a whole number 0 or more{high}, not {text!r}")


def first_bad(args: Namespace) -> str | None:
    """``--option: reason`` for the first option given a BadValue, or None."""
    for dest, value in vars(args).items():
        if isinstance(value, BadValue):
            return f"--{dest.replace('_', '-')}: {value.reason}"
    return None
