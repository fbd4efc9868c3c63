"""`inits` reads what the loader reads: PT_DYNAMIC at its p_vaddr (not p_offset), and unusable section headers
do not stop it while PT_DYNAMIC is complete. The lied programs run, and their trace of what the loader ran (and
the relocated slots) must equal the listing."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import cli_json
from unique.lies import (
    dynamic_offset,
    dynamic_offset_with_sections,
    shdrs_past_eof,
    shentsize_zero,
    shnum_zero_hdr0_past_eof,
    single_null_shdr,
)

from elfpatch.inits.order import FINI_KINDS, INIT_KINDS, list_initializers
from inits.helpers import run_trace, slot_map, token, user_entries

LIES = {"dynamic-offset": dynamic_offset, "dynamic-offset-with-sections": dynamic_offset_with_sections,
        "shdrs-past-eof": shdrs_past_eof, "shentsize-zero": shentsize_zero,
        "shnum0-hdr0-past-eof": shnum_zero_hdr0_past_eof, "single-null-shdr": single_null_shdr}


@pytest.mark.parametrize("program", ["siof_ba", "prio", "patterns"])
@pytest.mark.parametrize("lie", sorted(LIES))
def test_listing_matches_what_the_loader_runs(init_build: Path, tmp_path: Path, lie: str, program: str) -> None:
    path = tmp_path / program
    shutil.copy(init_build / "gnu" / program, path)
    path.write_bytes(LIES[lie](path.read_bytes()))
    trace = run_trace(path)  # glibc runs it: the lie is one only tools fall for
    listing = list_initializers(str(path))
    assert slot_map(listing) == trace.slots["main"] and trace.slots["main"]
    if program != "patterns":  # its trace tokens need .symtab names; stripped-like lies lose those
        honest = list_initializers(str(init_build / "gnu" / program))
        assert [e["address"] for e in listing["init"]] == [e["address"] for e in honest["init"]]
        if lie in ("dynamic-offset-with-sections",):
            assert [token(e) for e in user_entries(listing["init"], INIT_KINDS)] == trace.of("preinit", "init")
            assert [token(e) for e in user_entries(listing["fini"], FINI_KINDS)] == trace.of("fini")
    proc = run_main("inits", "--json", str(path))
    assert proc.returncode == 0, proc.stderr
    assert cli_json(proc.stdout)["files"][0]["init"]
    assert proc.stderr.startswith(f"elfpatch: warning: {path}: "), "what could not be read is said"


def test_no_usable_view_is_still_an_error(init_build: Path, tmp_path: Path) -> None:
    """A static executable has no PT_DYNAMIC: its section headers are its only view, so losing them fails."""
    path = tmp_path / "prio_static"
    shutil.copy(init_build / "gnu" / "prio_static", path)
    path.write_bytes(shdrs_past_eof(path.read_bytes()))
    before = path.read_bytes()
    proc = run_main("inits", str(path))
    assert proc.returncode == 2 and proc.stderr.startswith(f"elfpatch: error: {path}: ")
    assert len(proc.stderr.splitlines()) == 1 and path.read_bytes() == before
