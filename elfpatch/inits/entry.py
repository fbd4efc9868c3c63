"""One file's entry in `inits`'s ``files`` (the CLI's JSON and the API's list alike): ``{"path", "status",
"error", "warnings", ...its listing}``; a file that fails keeps its entry, status "error", no listing, and the
warnings logged before it failed."""
from __future__ import annotations

from typing import Any, Callable

from elfpatch.errors import ElfPatchError
from elfpatch.warnlog import WarningLog, warnings_of

Listing = Callable[[str], dict[str, Any]]


def file_entry(path: str, walk_error: ElfPatchError | None,
               listing: Listing | None = None) -> tuple[dict[str, Any], ElfPatchError | None]:
    """(the entry, the error that failed it or None) for ``path``: ``listing(path)`` (by default
    elfpatch.inits.order.list_initializers), or ``walk_error`` when the tree it came from could not be walked.
    Every warning logged about the file while it is listed is in its ``warnings`` (stderr is not enough for a
    job reading the JSON)."""
    if listing is None:
        from elfpatch.inits.order import list_initializers

        listing = list_initializers
    with WarningLog() as log:
        try:
            if walk_error is not None:
                raise walk_error
            found = listing(path)
        except ElfPatchError as exc:
            failed = {"path": path, "status": "error", "error": None, "warnings": warnings_of(log, path)}
            return mark_failed(failed, path, exc), exc
    warnings = list(dict.fromkeys(found["warnings"] + warnings_of(log, path)))
    return {"path": path, "status": "listed", "error": None, **found, "warnings": warnings}, None


def mark_failed(entry: dict[str, Any], path: str, exc: ElfPatchError) -> dict[str, Any]:
    """``entry`` marked failed by ``exc``: the message names another file (a dependency) when the error is
    about that one."""
    other = exc.path is not None and exc.path != path
    entry.update(status="error", error=f"{exc.path}: {exc.message}" if other else exc.message)
    return entry
