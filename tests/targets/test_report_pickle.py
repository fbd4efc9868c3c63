"""A tree's pool processes send their reports back pickled: every field arrives, in a compact form."""
from __future__ import annotations

import pickle

from elfpatch.report import FileReport, SymbolRow


def _report() -> FileReport:
    row = SymbolRow("_ZN1A1xE", "A::x", ".dynsym", 3, "UNIQUE", "GLOBAL")
    report = FileReport("/lib/libx.a", "patched", [row], kept=2, error=None, member="x.o", reason="r",
                        warnings=["w"])
    report.package, report.facts, report.excluded_by = "pkg", {"k": 1}, ("*/tests/*",)
    return report


def test_round_trip_keeps_every_field() -> None:
    report = _report()
    back = pickle.loads(pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL))
    for name in FileReport.__slots__:
        assert getattr(back, name) == getattr(report, name), name


def test_round_trip_keeps_each_field_in_its_place() -> None:
    """Every slot holding a value of its own: a rebuild that assigned the values in another order than
    ``__slots__`` (they are assigned in one statement, not by name) would put one where another belongs."""
    report = FileReport.__new__(FileReport)
    for i, name in enumerate(FileReport.__slots__):
        setattr(report, name, f"value of {name} ({i})")
    back = pickle.loads(pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL))
    assert {name: getattr(back, name) for name in FileReport.__slots__} == \
        {name: f"value of {name} ({i})" for i, name in enumerate(FileReport.__slots__)}


def test_pickle_carries_no_field_names() -> None:
    """The default pickle of a __slots__ object names every slot in every report (a third of the bytes)."""
    blob = pickle.dumps(_report(), protocol=pickle.HIGHEST_PROTOCOL)
    assert b"excluded_by" not in blob and b"warnings" not in blob
