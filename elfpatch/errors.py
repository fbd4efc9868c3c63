"""One exception root; every failure the CLI reports is one of these, as one line.

Also the other half of that contract: the exit statuses, the ``elfpatch: error:`` line, and warnings, which go
to ``logging.getLogger("elfpatch")`` so that library code never prints and the CLI decides what to show.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported: it is a fifth of `unique --check`'s start-up
if TYPE_CHECKING:
    import logging
    from typing import Any, Callable

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2  # 1: a gate tripped (--check found something, --max exceeded, ...)
_LOG: logging.Logger | None = None
_ON_FIRST_USE: list[Callable[[logging.Logger], None]] = []


def logger() -> logging.Logger:
    """``logging.getLogger("elfpatch")`` (also as ``LOG``), logging imported on first use: a run that warns
    about nothing never imports it (a tenth of `unique --check`'s start-up)."""
    global _LOG
    if _LOG is None:
        import logging

        _LOG = logging.getLogger("elfpatch")
        for hook in _ON_FIRST_USE:
            hook(_LOG)
    return _LOG


def on_logger(hook: Callable[[logging.Logger], None]) -> None:
    """Run ``hook`` on the logger once it exists (now, if it does): how the CLI sets up its warning lines."""
    if _LOG is not None:
        hook(_LOG)
    else:
        _ON_FIRST_USE.append(hook)


def __getattr__(name: str) -> Any:
    if name == "LOG":
        return logger()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# C0 controls, DEL and the Unicode line breaks str.splitlines() splits on: a member or symbol name read from
# a file may hold any of them, and every message and report line must stay one line. Bytes that are not
# UTF-8 (decoded with surrogateescape, U+DC80-U+DCFF) get the same \xNN form, so that output stays UTF-8.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, 0x85)}
_CONTROL.update({0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)})
_CONTROL.update({0x2028: "\\u2028", 0x2029: "\\u2029", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def one_line(text: str) -> str:
    """``text`` with every control character, line break and undecodable byte escaped: one line of UTF-8."""
    if text.isprintable():  # holds none of _CONTROL's (all Cc, Cs, Zl or Zp): translate, a dict lookup per
        return text  # character, cost a third of a check of libtorch_cpu.so's 1,584 lines
    return text.translate(_CONTROL)


def error_line(path: str | None, reason: str) -> str:
    """The one stderr line every failure gets: ``elfpatch: error: <path>: <reason>``."""
    return one_line(f"elfpatch: error: {path}: {reason}" if path else f"elfpatch: error: {reason}")


def warn(path: str, message: str) -> None:
    """A warning about one file: logged (pre-formatted, so a record pickles across a process pool)."""
    logger().warning("%s", one_line(f"{path}: {message}"))


class ElfPatchError(Exception):
    """Root of every error elfpatch raises on purpose. str() is a one-line message."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return one_line(f"{self.path}: {self.message}" if self.path else self.message)

    def __reduce__(self) -> tuple:  # keeps the path across a process pool
        return (type(self), (self.message, self.path))

    def within(self, what: str, path: str) -> ElfPatchError:
        """The same kind of error about a part (``what``: a member) of the file at ``path``."""
        return type(self)(f"{what}: {self.message}", path)


class ParseError(ElfPatchError):
    """The input is not a well-formed file of the kind it claims to be."""


class UnsupportedError(ElfPatchError):
    """Well-formed, but outside what elfpatch handles (e.g. an unknown OSABI)."""


class VerifyError(ElfPatchError):
    """The written result did not match the plan; the original was restored."""


class WriteError(ElfPatchError):
    """The file system refused a write, rename or metadata copy."""
