"""Warnings into the JSON documents: what the library logs about a file, collected while a command runs and
put into that file's ``warnings`` list (stderr alone would hide them from a CI job reading the JSON)."""
from __future__ import annotations

import logging
from typing import Iterable, Iterator

from elfpatch.errors import LOG, one_line
from elfpatch.report import FileReport


class WarningLog(logging.Handler):
    """Collects the ``path: message`` warnings the library logs (a pool worker's come back through the same
    logger) while it is attached, for the JSON document: stderr alone would hide them from a job reading it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

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
