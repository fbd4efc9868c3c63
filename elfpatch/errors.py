"""One exception root; every failure the CLI reports is one of these, as one line."""
from __future__ import annotations


class ElfPatchError(Exception):
    """Root of every error elfpatch raises on purpose. str() is a one-line message."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ParseError(ElfPatchError):
    """The input is not a well-formed file of the kind it claims to be."""


class UnsupportedError(ElfPatchError):
    """Well-formed, but outside what elfpatch handles (e.g. an unknown OSABI)."""


class VerifyError(ElfPatchError):
    """The written result did not match the plan; the original was restored."""


class WriteError(ElfPatchError):
    """The file system refused a write, rename or metadata copy."""
