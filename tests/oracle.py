"""The one oracle every fuzzer and broken-input test shares: what may leave elfpatch when an input is bad."""
from __future__ import annotations

import struct

import elfpatch

# Python's own parsers' and containers' exceptions: an ElfPatchError caused by one of these is a parser bug
# wrapped on its way out, not a refusal that elfpatch's own checks phrased.
FOREIGN = (struct.error, IndexError, KeyError, UnicodeError, OverflowError, TypeError, AttributeError,
           AssertionError, MemoryError, RecursionError)


def assert_error_line(message: str) -> None:
    """One line, and not the CLI's last-resort guard."""
    if not message or "\n" in message or "internal error" in message:
        raise AssertionError(f"not a one-line refusal: {message!r}")


def assert_own_error(exc: BaseException) -> None:
    """``exc`` is elfpatch's own, phrased by its checks: raises AssertionError otherwise."""
    if not isinstance(exc, elfpatch.ElfPatchError):
        raise AssertionError(f"a foreign exception left the API: {exc!r}") from exc
    assert_error_line(str(exc))
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, FOREIGN):
        raise AssertionError(f"{exc!r} wraps {cause!r}") from exc
