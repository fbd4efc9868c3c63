"""The `elfpatch inits` command line: the JSON contract, the text table, the --max gate, errors."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import cli_json

import elfpatch
from inits.helpers import variant_dir

ENTRY_KEYS = {"kind", "index", "address", "symbol", "demangled", "source", "priority", "toolchain"}
KINDS = {"preinit_array", "init", "init_array", "ctors", "fini_array", "fini", "dtors"}


def test_json_contract(init_build: Path) -> None:
    _check_contract({str(init_build / "gnu" / "prio"): 6, str(init_build / "gnu" / "libchain_base.so"): 2})


@pytest.mark.cross  # needs ld.lld
def test_json_contract_of_lld_legacy_kinds(init_build: Path) -> None:
    """lld keeps .ctors/.dtors: the `ctors`/`dtors` kinds and DT_INIT/DT_FINI entries in the same contract."""
    _check_contract({str(init_build / "gnu" / "prio"): 6, str(variant_dir(init_build, "lld") / "liblegacy.so"): 3})


def _check_contract(counts: dict[str, int]) -> None:
    """The document for these paths, with their static initializer counts."""
    paths = list(counts)
    doc = cli_json(run_main("inits", "--json", *paths, check=True).stdout)
    assert set(doc) == {"schema", "files", "summary", "warnings"} and doc["warnings"] == []
    assert [f["path"] for f in doc["files"]] == paths
    for f in doc["files"]:
        assert set(f) == {"path", "status", "error", "init", "fini", "warnings"}
        assert f["status"] == "listed" and f["error"] is None
        for e in f["init"] + f["fini"]:
            assert set(e) == ENTRY_KEYS
            assert e["kind"] in KINDS
            assert isinstance(e["address"], int) and isinstance(e["toolchain"], bool)
            assert e["index"] is None if e["kind"] in ("init", "fini") else isinstance(e["index"], int)
    assert doc["summary"] == {"files": len(paths), "errors": 0, "max": None, "over_max": [],
                              "static_initializers": counts}


def test_api_matches_cli(init_build: Path) -> None:
    path = str(init_build / "relr" / "chain_main")
    entry = cli_json(run_main("inits", "--json", path, check=True).stdout)["files"][0]
    assert (entry.pop("status"), entry.pop("error")) == ("listed", None)  # the envelope's, not the listing's
    assert elfpatch.list_initializers(path) == entry


def test_text_table_in_execution_order(init_build: Path) -> None:
    out = run_main("inits", str(init_build / "gnu" / "prio"), check=True).stdout
    lines = out.splitlines()
    assert lines[0].endswith("prio: 6 static initializers")
    order = [line.split()[-1] for line in lines if "_GLOBAL__sub_I" in line]
    assert order == ["_GLOBAL__sub_I.00101_prio.cpp", "_GLOBAL__sub_I.02000_prio.cpp",
                     "_GLOBAL__sub_I_prio.cpp"]
    assert any("frame_dummy  [toolchain]" in line for line in lines)
    assert any("prio_preinit(int, char**, char**)" in line for line in lines)
    assert out.index("prio_fini\n") < out.index("__do_global_dtors_aux") < out.index("prio_fini_150")


def test_max_gate(init_build: Path) -> None:
    prio, base = str(init_build / "gnu" / "prio"), str(init_build / "gnu" / "libchain_base.so")
    assert run_main("inits", "--max", "6", prio).returncode == 0
    over = run_main("inits", "--max", "5", prio, "--json")
    assert over.returncode == 1
    assert cli_json(over.stdout)["summary"]["over_max"] == [prio]
    both = run_main("inits", "--max", "2", base, prio)
    assert both.returncode == 1 and "(max 2, over)" in both.stdout
    assert run_main("inits", "--max", "0", str(init_build / "gnu" / "siof_ab")).returncode == 1


def test_stripped_count_includes_what_it_cannot_name(init_build: Path) -> None:
    """Without symbols frame_dummy is one more unnamed entry: counted, and the text says so."""
    proc = run_main("inits", str(init_build / "stripped" / "prio"), check=True)
    assert "7 static initializers" in proc.stdout and "no symbol" in proc.stdout


def test_errors_one_line_each_others_still_listed(init_build: Path, tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    good = str(init_build / "gnu" / "siof_ab")
    proc = run_main("inits", "--json", str(tmp_path / "missing"), good, str(text), str(tmp_path),
                   str(init_build / "gnu" / "prio.o"))
    assert proc.returncode == 2
    errors = proc.stderr.splitlines()
    assert len(errors) == 3 and all(line.startswith("elfpatch: error: ") for line in errors)
    assert errors[1] == f"elfpatch: error: {text}: not an ELF file"
    assert "relocatable" in errors[2] or "object file" in errors[2]
    doc = cli_json(proc.stdout)
    # tmp_path is a tree (since directories are walked) whose one file is not ELF: it adds no entry
    paths = [str(tmp_path / "missing"), good, str(text), str(init_build / "gnu" / "prio.o")]
    assert [f["path"] for f in doc["files"]] == paths, "a file that fails stays in files"
    assert [f["status"] for f in doc["files"]] == ["error", "listed", "error", "error"]
    assert doc["files"][2]["error"] == "not an ELF file" and "init" not in doc["files"][2]
    assert doc["summary"]["files"] == 4 and doc["summary"]["errors"] == 3
    assert list(doc["summary"]["static_initializers"]) == [good], "only a listed file is counted"


def test_error_beats_the_gate(init_build: Path, tmp_path: Path) -> None:
    proc = run_main("inits", "--max", "0", str(init_build / "gnu" / "prio"), str(tmp_path / "nope"))
    assert proc.returncode == 2


def test_bad_max() -> None:
    proc = run_main("inits", "--max", "-1", "x")
    assert proc.returncode == 2
    assert proc.stderr == "elfpatch: error: --max: expected a whole number 0 or more, not '-1'\n"


def test_deps_text(init_build: Path) -> None:
    out = run_main("inits", "--deps", str(init_build / "gnu" / "chain_main"), check=True).stdout
    assert "whole load (8 objects)" in out
    block = out[out.index("whole load (8"):]
    assert block.index("(preinit, before every library)") < block.index("libc.so.6") \
        < block.index("libchain_base.so") < block.index("libchain_mid.so")
    fini = block[block.index("finalizers at exit"):]
    assert fini.index("chain_main") < fini.index("libchain_mid.so") < fini.index("libchain_base.so")


def test_deps_json_shape(init_build: Path) -> None:
    path = str(init_build / "gnu" / "chain_main")
    doc = cli_json(run_main("inits", "--deps", "--json", path, check=True).stdout)
    assert set(doc) == {"schema", "files", "loads", "summary", "warnings"}
    (load,) = doc["loads"]
    assert set(load) == {"path", "main_program", "initfirst", "objects", "missing", "init_order",
                         "fini_order", "init", "fini"}
    assert load["path"] == path and load["main_program"] and load["initfirst"] is None
    assert load["objects"][0] == {"path": path, "needed_name": None, "needed_by": None}
    assert {e["object"] for e in load["init"]} <= set(load["init_order"])
    for e in load["init"] + load["fini"]:
        assert set(e) == ENTRY_KEYS | {"object"}
    # --max still judges only the files named on the command line, not libstdc++ & co.
    assert run_main("inits", "--deps", "--max", "3", path).returncode == 0
