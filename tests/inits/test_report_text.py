"""The text of a load's findings names an object another stripped module has no symbol for by the section it
lies in and its address (it raised AttributeError on None -- an internal error, exit 2, on `inits --siof --deps`
of a stripped program whose library reads the program's unnamed object through its pointer word)."""
from __future__ import annotations

import io

from elfpatch.inits.report import write_cross_module


def _finding(symbol: str | None) -> dict:
    who = {"index": 2, "symbol": None, "source": None, "file": "libA.so"}
    return {"verdict": "before-construction", "via": [],
            "object": {"address": 0x404100, "symbol": symbol, "demangled": None, "section": ".bss", "file": "prog"},
            "reader": who, "constructor": dict(who, index=4, file="prog")}


def test_an_object_without_a_symbol_is_named_by_section_and_address() -> None:
    out = io.StringIO()
    write_cross_module(out, {"findings": [_finding(None), _finding("g_box")], "analysis_notes": []})
    lines = out.getvalue().splitlines()
    assert "an object in .bss @ 0x404100 of prog is read by initializer 2 (?) of libA.so" in lines[1]
    assert "before-construction: g_box of prog is read" in lines[2]
