"""The summary's counts, taken in one pass over the reports, agree with the reports they count."""
from __future__ import annotations

from elfpatch.report import ERROR, FOUND, PATCHED, SKIPPED, UNCHANGED, WOULD_PATCH, FileReport, SymbolRow, summary


def _rows(n: int) -> list[SymbolRow]:
    return [SymbolRow(f"_ZN1A{i}xE", None, ".dynsym", i, "UNIQUE", "GLOBAL") for i in range(n)]


def _reports() -> list[FileReport]:
    return [FileReport("a", PATCHED, _rows(3)), FileReport("b", WOULD_PATCH, _rows(2)),
            FileReport("c", FOUND, _rows(1)), FileReport("d", UNCHANGED), FileReport("e", SKIPPED, reason="r"),
            FileReport("f", ERROR, error="bad"), FileReport("g", PATCHED, _rows(1), member="x.o"),
            FileReport("h", ERROR, error="worse")]


def test_each_count_is_that_of_the_reports() -> None:
    reports = _reports()
    doc = summary(reports, skipped=4, other=5)
    assert doc == {
        "files": len(reports),
        "unique": sum(len(r.symbols) for r in reports),
        "patched": sum(r.patched for r in reports),
        "errors": sum(r.status == ERROR for r in reports),
        "skipped": 4 + sum(r.status == SKIPPED for r in reports),
        "other": 5,
    }
    assert doc == {"files": 8, "unique": 7, "patched": 4, "errors": 2, "skipped": 5, "other": 5}


def test_keys_keep_their_order_and_a_generator_is_read_once() -> None:
    """The text summary line and the JSON document's key order come from this dict; a generator of reports
    (consumed by a single pass) counts as the list does."""
    doc = summary(r for r in _reports())
    assert list(doc) == ["files", "unique", "patched", "errors", "skipped", "other"]
    assert doc == summary(_reports())
    assert summary([]) == {"files": 0, "unique": 0, "patched": 0, "errors": 0, "skipped": 0, "other": 0}
