"""The records `elfpatch unique` reports, their JSON document and their text rendering; the JSON envelope and
writer every command shares."""
from __future__ import annotations

from operator import attrgetter

from elfpatch.elf.records import Record
from elfpatch.errors import ElfPatchError, one_line

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, NoReturn, TextIO

# File statuses, as the JSON contract spells them.
PATCHED, UNCHANGED, WOULD_PATCH, FOUND, SKIPPED, ERROR = (
    "patched", "unchanged", "would-patch", "found", "skipped", "error")


class SymbolRow(Record):
    """One selected unique symbol table entry (a symbol in both tables gives two rows)."""

    name: str
    demangled: str | None
    table: str
    symndx: int
    from_: str
    to: str

    @property
    def index(self) -> NoReturn:  # the field's old name: say the new one, loudly
        raise AttributeError('SymbolRow.index is now SymbolRow.symndx (the JSON key is still "index")')

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "demangled": self.demangled, "table": self.table, "index": self.symndx,
                "from": self.from_, "to": self.to}


class FileReport:
    """What happened to one file (or one archive/wheel member, named by ``member``)."""

    __slots__ = ("path", "status", "symbols", "kept", "error", "member", "reason", "exception", "package", "facts",
                 "warnings", "excluded_by")

    def __init__(self, path: str, status: str, symbols: list[SymbolRow] | None = None, kept: int = 0,
                 error: str | None = None, member: str | None = None, reason: str | None = None,
                 exception: ElfPatchError | None = None, warnings: list[str] | None = None) -> None:
        self.path = path
        self.status = status
        self.symbols = symbols if symbols is not None else []
        self.kept = kept
        self.error = error
        self.member = member
        self.reason = reason  # why a file was skipped
        self.exception = exception  # what made status "error", for the API to raise as it was (not in JSON)
        self.package: Any = None  # the owning package (elfpatch.auditing.packages.Package), where known
        self.facts: Any = None  # what Job.inspect found in the image (elfpatch audit)
        self.warnings = warnings if warnings is not None else []  # e.g. section headers that lie
        self.excluded_by: tuple[str, ...] = ()  # --exclude globs that passed over members (not in JSON)

    def __repr__(self) -> str:
        return f"FileReport({self.path!r}, {self.status!r}, symbols={len(self.symbols)}, member={self.member!r})"

    def __reduce__(self) -> tuple[Callable[..., FileReport], tuple[Any, ...]]:
        """Pickled as one tuple of its slots (reports cross back from a tree's pool processes): the default
        for a __slots__ class sends every slot's name with every report."""
        return _rebuild, _slot_values(self)

    @property
    def patched(self) -> int:
        return len(self.symbols) if self.status == PATCHED else 0

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"path": self.path}
        if self.member is not None:
            doc["member"] = self.member
        doc.update(status=self.status, error=self.error, kept=self.kept,
                   symbols=[s.to_json() for s in self.symbols], warnings=list(self.warnings))
        if self.reason is not None:
            doc["reason"] = self.reason
        doc["package"] = self.package.to_json() if self.package is not None else None
        return doc

    @property
    def label(self) -> str:
        """The file, or ``archive[member]``, as every message names it."""
        return f"{self.path}[{self.member}]" if self.member is not None else self.path


_slot_values = attrgetter(*FileReport.__slots__)  # one C call, where a getattr per slot cost twice as much


def _rebuild(*values: Any) -> FileReport:
    """A report from its slots' values, in ``__slots__`` order (assigned in one statement: a tree's check
    rebuilds ten thousand of them; tests/targets/test_report_pickle.py holds the order to ``__slots__``)."""
    report = FileReport.__new__(FileReport)
    (report.path, report.status, report.symbols, report.kept, report.error, report.member, report.reason,
     report.exception, report.package, report.facts, report.warnings, report.excluded_by) = values
    return report


def summary(reports: Iterable[FileReport], skipped: int = 0, other: int = 0) -> dict[str, int]:
    """``skipped``: entries passed over for a reason (symlinks, devices, --exclude); ``other``: regular files
    that are no ELF file, archive or wheel (a site-packages' .py files). One pass over the reports (a tree's
    check has ten thousand: a pass per count cost four)."""
    files = unique = patched = errors = 0
    for r in reports:
        files += 1
        n = len(r.symbols)
        unique += n
        status = r.status
        if status == PATCHED:
            patched += n  # FileReport.patched
        elif status == ERROR:
            errors += 1
        elif status == SKIPPED:
            skipped += 1
    return {"files": files, "unique": unique, "patched": patched, "errors": errors, "skipped": skipped,
            "other": other}


# The version of each command's JSON document, as its "schema" key names it ("elfpatch/unique/1"); the JSON
# Schema of each ships as elfpatch/schemas/<command>.json. A version changes only when a key is removed or
# changes meaning; keys are added without one.
SCHEMA_VERSIONS = {"unique": 1, "audit": 1, "inits": 1, "dlcheck": 1}


def envelope(command: str, files: list[dict[str, Any]], summary: dict[str, Any], **rest: Any) -> dict[str, Any]:
    """Every command's ``--json`` document: ``schema``, ``files`` (one entry per file, a failed one too, each
    with ``path``, ``status``, ``error`` and its ``warnings``), ``summary`` (with ``files`` and ``errors``),
    then the command's own keys."""
    return {"schema": f"elfpatch/{command}/{SCHEMA_VERSIONS[command]}", "files": files, "summary": summary,
            **rest}


def write_document(doc: dict, out: TextIO) -> None:
    """Every command's ``--json`` document: one line, by the C encoder in one write (an indented dump is
    encoded in Python and written in small pieces: ~10x slower on a large file's document)."""
    import json

    out.write(json.dumps(doc) + "\n")


def write_json(reports: list[FileReport], out: TextIO, skipped: int = 0, other: int = 0,
               warnings: list[str] | None = None) -> None:
    """``warnings``: those about no one file (a glob that matched nothing, a journal), as ``subject: message``
    lines; each file's own are in its entry."""
    write_document(envelope("unique", [r.to_json() for r in reports], summary(reports, skipped, other),
                            warnings=warnings or []), out)


_VERBS = {PATCHED: "patched", WOULD_PATCH: "would patch", FOUND: "found", UNCHANGED: "no unique symbols"}


def write_text(reports: list[FileReport], out: TextIO, skipped: int = 0, other: int = 0,
               show: Callable[[FileReport], bool] | None = None, quiet: bool = False,
               kept_by: str = "--symbol") -> None:
    """One block per report that ``show`` accepts (every one without it), then the summary line; ``quiet``:
    the summary line only."""
    for r in reports:
        if r.status == ERROR or quiet or (show is not None and not show(r)):
            continue  # errors are already on stderr, one line each
        label = one_line(r.label)
        if r.status == SKIPPED:
            out.write(f"{label}: skipped: {one_line(r.reason or '')}\n")
            out.writelines(f"  warning: {one_line(w)}\n" for w in r.warnings)
            continue
        n = len(r.symbols)
        if r.status == UNCHANGED:
            head = f"{label}: no unique symbols"
        else:
            head = f"{label}: {_VERBS[r.status]} {n} unique symbol{'s' if n != 1 else ''}"
        if r.kept:
            head += f" ({r.kept} kept unique by {kept_by})"
        out.write(head + "\n")
        for w in r.warnings:
            out.write(f"  warning: {one_line(w)}\n")
        for s in r.symbols:
            arrow = f"{s.from_} -> {s.to}" if r.status in (PATCHED, WOULD_PATCH) else s.from_
            out.write(f"  {s.table}[{s.symndx}]  {one_line(s.demangled or s.name)}  {arrow}\n")
    doc = summary(reports, skipped, other)
    line = (f"{doc['files']} file{'s' if doc['files'] != 1 else ''}, {doc['unique']} unique, "
            f"{doc['patched']} patched, {doc['errors']} error{'s' if doc['errors'] != 1 else ''}")
    if doc["skipped"]:
        line += f", {doc['skipped']} skipped"
    if doc["other"]:
        line += f", {doc['other']} other"
    out.write(line + "\n")

