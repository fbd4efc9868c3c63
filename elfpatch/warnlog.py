"""Warnings into the JSON documents: what the library logs about a file, collected while a command runs and
put into that file's ``warnings`` list (stderr alone would hide them from a CI job reading the JSON)."""
from __future__ import annotations

import logging
from typing import Iterable, Iterator

from elfpatch.errors import LOG, one_line
from elfpatch.report import FileReport


class WarningLog(logging.Handler):
    """Collects the warnings the library logs while it is attached: for the JSON document (stderr alone would
    hide them from a job reading it), and in a tree's pool worker, to travel back with its reports (``replay``).

    ``shown``: what it collects was printed already (a pool worker's lock-wait notice, said at once); the
    parent then hands such records to its collectors only, not to stderr a second time."""

    def __init__(self, *, shown: bool = False) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.shown = shown

    def emit(self, record: logging.LogRecord) -> None:
        if self.shown:
            record.elfpatch_shown = True
        self.records.append(record)

    @property
    def lines(self) -> list[str]:
        """The ``path: message`` lines collected."""
        return [r.getMessage() for r in self.records]

    def __enter__(self) -> WarningLog:
        LOG.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        LOG.removeHandler(self)

    def about(self, paths: Iterable[str]) -> Iterator[tuple[str | None, str]]:
        """(path, message) per warning, split at the longest of ``paths`` it starts with; (None, the whole
        line) for a warning about none of them (a journal, a glob)."""
        known = {one_line(p) for p in paths}
        for line in self.lines:
            best, at = None, line.find(": ")
            while at >= 0:
                if line[:at] in known:
                    best = at
                at = line.find(": ", at + 1)
            yield (line[:best], line[best + 2:]) if best is not None else (None, line)


def replay(record: logging.LogRecord) -> None:
    """A record a pool worker collected, handled by this process's logger as if logged here; one the worker
    printed already reaches only the collectors (a ``WarningLog``, for the JSON)."""
    if not getattr(record, "elfpatch_shown", False):
        LOG.handle(record)
        return
    for handler in LOG.handlers:
        if isinstance(handler, WarningLog):
            handler.handle(record)


def attach_warnings(reports: list[FileReport], log: WarningLog) -> list[str]:
    """Each logged warning added to the ``warnings`` of its file's first report (once: a list of unique
    messages); returns the ones about no reported file."""
    first: dict[str, FileReport] = {}
    for r in reports:
        first.setdefault(one_line(r.path), r)
    rest: list[str] = []
    for path, message in log.about(first):
        if path is None:
            rest.append(message)
        elif message not in first[path].warnings:
            first[path].warnings.append(message)
    return list(dict.fromkeys(rest))


def warnings_of(log: WarningLog, path: str) -> list[str]:
    """The warnings logged about ``path`` (unique, the path cut off), then any about another file whole."""
    return list(dict.fromkeys(message for _, message in log.about([path])))
