"""elfpatch: patch STB_GNU_UNIQUE symbols, list static initializers, check dlclose.

The public API, imported lazily so that ``import elfpatch`` stays cheap:

- ``scan(paths, symbols=(), keep=(), exclude=())``: what ``elfpatch unique --dry-run`` reports, as records.
- ``patch(paths, to="global", symbols=(), inplace=False, output=None, output_dir=None, keep=(), exclude=(),
  lock_timeout=None)``: rewrite unique symbols.
- ``check(paths, symbols=(), keep=(), exclude=())``: True when any selected unique symbol exists (``--check``).
- ``audit(paths, exclude=())``: unique names that several files and packages define (``elfpatch audit``).
- ``list_initializers(path)`` / ``list_initializers(paths, exclude=(), raise_errors=True)``: what runs at load
  and unload, in the loader's order (one path: its listing; a list: one entry per file, trees walked).
- ``dlcheck(paths)``: load and unload in a child process and report what kept each resident.
"""
from __future__ import annotations

import importlib

from elfpatch.version import __version__

TYPE_CHECKING = False  # typing is not imported at run time: `import elfpatch` stays cheap
if TYPE_CHECKING:
    from typing import Any


_EXPORTS = {
    "scan": "elfpatch.api",
    "patch": "elfpatch.api",
    "check": "elfpatch.api",
    "audit": "elfpatch.api",
    "FileReport": "elfpatch.report",
    "SymbolRow": "elfpatch.report",
    "list_initializers": "elfpatch.api",
    "dlcheck": "elfpatch.harness.dlcheck",
    "ElfPatchError": "elfpatch.errors",
    "ParseError": "elfpatch.errors",
    "UnsupportedError": "elfpatch.errors",
    "VerifyError": "elfpatch.errors",
    "WriteError": "elfpatch.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'elfpatch' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
