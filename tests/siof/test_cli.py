"""`inits --dtors/--siof` as a user runs it: the JSON contract, what makes a result incomplete, exit codes,
bad input, and capstone loaded only by these flags."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main
from jsonschema_check import cli_json

OBJ_KEYS = {"address", "symbol", "demangled", "section"}


@pytest.fixture(scope="module")
def gcc_build(siof_build: Path) -> Path:
    require_tool("g++", packages="g++")
    return siof_build


def _file(*args: str) -> dict:
    proc = run_main("inits", "--json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return cli_json(proc.stdout)


def test_json_contract(gcc_build: Path) -> None:
    doc = _file("--dtors", "--siof", str(gcc_build / "siof" / "O2" / "cross_ba"))
    f = doc["files"][0]
    assert doc["summary"]["analysis_complete"] is True and f["analysis_complete"] is True
    for d in _file("--dtors", str(gcc_build / "gcc-O2" / "dtors"))["files"][0]["exit_time_destructors"]:
        assert set(d) == {"kind", "dtor", "object", "initializer", "function_local_static"}
        assert d["kind"] in ("atexit", "thread_atexit", "atexit_c") and set(d["dtor"]) == OBJ_KEYS
        assert d["object"] is None or set(d["object"]) == OBJ_KEYS
    analysed = [e for e in f["init"] if e.get("analysis")]
    assert analysed
    for e in analysed:
        a = e["analysis"]
        assert set(a) == {"constructs", "reads", "complete", "unanalyzed", "other_module_reads", "other_module_calls",
                      "other_module_writes", "own_interposable"}
        assert set(a["unanalyzed"]) == {"indirect_calls", "depth_limited"}
        for r in a["reads"]:
            assert set(r) == {"object", "status"} and set(r["object"]) == OBJ_KEYS
    (x,) = f["findings"]
    assert set(x) == {"verdict", "object", "reader", "constructor", "via"}
    assert set(x["reader"]) == set(x["constructor"]) == {"index", "symbol", "source"}


def test_capstone_only_for_the_analysis_flags(gcc_build: Path) -> None:
    """`elfpatch unique` and a plain `inits` listing never import the disassembler."""
    exe = str(gcc_build / "gcc-O2" / "dtors")
    code = ("import sys; from elfpatch.cli import main; import elfpatch.commands.unique; "
            f"rc = [main(['unique', '--check', {exe!r}]), main(['inits', {exe!r}])]; "
            "print('capstone' in sys.modules, rc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # --check exits 1 here: the inline variable g_inline is an STB_GNU_UNIQUE symbol.
    assert out.strip().splitlines()[-1] == "False [1, 0]"
    code = ("import sys; from elfpatch.cli import main; "
            f"main(['inits', '--dtors', {exe!r}]); print('capstone' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "True"  # the test above can fail


@pytest.mark.parametrize("what", ["indirect", "depth", "lto", "stripped", "machine"])
def test_incomplete_is_said(gcc_build: Path, tmp_path: Path, what: str) -> None:
    args = ["--dtors", "--siof"]
    if what == "indirect":
        path = gcc_build / "siof" / "O2" / "indirect"
        needle = "indirect call"
    elif what == "depth":
        path = gcc_build / "siof" / "O2" / "third"
        args += ["--depth", "0"]
        needle = "past depth 0"
    elif what == "lto":
        path = gcc_build / "siof" / "lto" / "cross_ba"
        needle = "LTO-merged"
    elif what == "stripped":
        path = tmp_path / "stripped"
        shutil.copy(gcc_build / "siof" / "O2" / "cross_ba", path)
        subprocess.run(["strip", str(path)], check=True)
        needle = "stripped"
    else:  # a machine the analysis does not disassemble: listed, never a clean result
        path = tmp_path / "riscv"
        data = bytearray((gcc_build / "siof" / "O2" / "cross_ba").read_bytes())
        data[18:20] = (243).to_bytes(2, "little")  # e_machine = EM_RISCV
        path.write_bytes(bytes(data))
        needle = "machine 243"
    doc = _file(*args, str(path))
    f = doc["files"][0]
    assert f["analysis_complete"] is False and doc["summary"]["analysis_complete"] is False
    assert any(needle in n for n in f["analysis_notes"]), f["analysis_notes"]
    text = run_main("inits", *args, str(path)).stdout
    assert "analysis INCOMPLETE" in text and needle in text
    if what in ("indirect", "depth"):
        a = [e["analysis"] for e in f["init"] if e.get("analysis") and not e["analysis"]["complete"]]
        key = "indirect_calls" if what == "indirect" else "depth_limited"
        assert a and a[0]["unanalyzed"][key] > 0


def test_max_dtors(gcc_build: Path) -> None:
    exe = str(gcc_build / "gcc-O2" / "dtors")
    n = len(_file("--dtors", exe)["files"][0]["exit_time_destructors"])
    assert run_main("inits", "--max-dtors", str(n), exe).returncode == 0
    proc = run_main("inits", "--max-dtors", str(n - 1), "--json", exe)
    assert proc.returncode == 1 and cli_json(proc.stdout)["summary"]["over_max_dtors"] == [exe]


def test_bad_input_is_one_line_and_status_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 9 + b"\xff" * 200)
    before = bad.read_bytes()
    for flags in (["--dtors"], ["--siof"], ["--fail-on", "order-dependent"]):
        proc = run_main("inits", *flags, str(bad))
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1 and str(bad) in proc.stderr
    assert bad.read_bytes() == before
    for flags in (["--fail-on", "nonsense"], ["--depth", "65"], ["--depth", "-1"], ["--max-dtors", "x"]):
        proc = run_main("inits", *flags, str(bad))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
