"""`elfpatch dlcheck`: its report on each unique/ fixture, before and after `elfpatch unique`, its blockers,
errors and exit statuses, always through the CLI as a user runs it."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest
from helpers import run_main
from jsonschema_check import check_document

from elfpatch.harness.dlcheck import dlcheck, exit_status
from elfpatch.harness.elffacts import object_facts
from harness.conftest import dlcheck_cli

HOLDER, COUNTER = "_ZN6HolderIiE5valueE", "_ZZ7countervE1c"


def kinds(entry: dict) -> list[str]:
    return [b["kind"] for b in entry["blockers"]]


def test_json_document_has_the_contract_shape(unique_build: Path) -> None:
    v1, v2 = unique_build / "libholder_v1.so", unique_build / "libholder_v2.so"
    rc, doc, err = dlcheck_cli(v1, v2)
    assert rc == 1 and err == ""
    assert set(doc) >= {"files", "cross_bindings"}
    for f in doc["files"]:
        assert set(f) == {"path", "status", "loaded", "error", "unloads", "blockers", "warnings"}
        for b in f["blockers"]:
            assert {"kind", "detail", "symbols"} <= set(b)
    for c in doc["cross_bindings"]:
        assert set(c) == {"symbol", "file", "bound_to"}


def test_holder_pair_before_patching(unique_build: Path) -> None:
    v1, v2 = str(unique_build / "libholder_v1.so"), str(unique_build / "libholder_v2.so")
    rc, doc, _ = dlcheck_cli(v1, v2)
    assert rc == 1
    f1, f2 = doc["files"]
    assert (f1["path"], f1["loaded"], f1["error"], f1["unloads"]) == (v1, True, None, False)
    assert kinds(f1) == ["unique-symbol"]
    assert sorted(f1["blockers"][0]["symbols"]) == sorted([HOLDER, COUNTER])
    assert (f2["unloads"], f2["blockers"]) == (True, [])
    assert sorted((c["symbol"], c["file"], c["bound_to"]) for c in doc["cross_bindings"]) == [
        (HOLDER, v2, v1), (COUNTER, v2, v1)]


def test_load_order_decides_who_stays(unique_build: Path) -> None:
    v1, v2 = str(unique_build / "libholder_v1.so"), str(unique_build / "libholder_v2.so")
    rc, doc, _ = dlcheck_cli(v2, v1)
    assert rc == 1
    assert [f["unloads"] for f in doc["files"]] == [False, True]  # v2 defined first: v2 stays
    assert {(c["file"], c["bound_to"]) for c in doc["cross_bindings"]} == {(v1, v2)}


def test_holder_pair_after_patching(patched: Path) -> None:
    rc, doc, _ = dlcheck_cli(patched / "libholder_v1.so", patched / "libholder_v2.so")
    assert rc == 0
    assert [(f["unloads"], f["blockers"]) for f in doc["files"]] == [(True, []), (True, [])]
    assert doc["cross_bindings"] == []


@pytest.mark.parametrize("name, before, after", [
    ("libholder_v1.so", ["unique-symbol"], []),
    ("libholder_v2.so", ["unique-symbol"], []),
    ("libplugin.so", ["unique-symbol"], []),
    ("libnodelete.so", ["nodelete-flag"], ["nodelete-flag"]),  # elfpatch unique must not hide this one
    ("libtls.so", [], []),  # nothing touches the thread_local, so nothing is pending
])
def test_each_fixture_alone(unique_build: Path, patched: Path, name: str, before: list[str],
                            after: list[str]) -> None:
    for d, expected in ((unique_build, before), (patched, after)):
        rc, doc, _ = dlcheck_cli(d / name)
        (f,) = doc["files"]
        assert kinds(f) == expected, d
        assert f["unloads"] is (not expected)
        assert rc == (1 if expected else 0)
        if expected == ["unique-symbol"]:
            assert f["blockers"][0]["symbols"] == object_facts(str(d / name)).unique != []


def test_a_dependency_pinned_by_its_unique_symbols_fails(unique_build: Path, patched: Path) -> None:
    """Guarantee (issue 23, row 18): a dependency outside the system's directories that stays for unique
    symbols `elfpatch unique` can rewrite fails the check as the PATH itself would; patched, it unloads."""
    rc, doc, _ = dlcheck_cli(unique_build / "libuser.so")
    assert rc == 1 and doc["files"][0]["unloads"] is True
    dep = {d["path"]: d for d in doc["dependencies"]}[str(unique_build / "libholder_v1.so")]
    assert dep["unloads"] is False and kinds(dep) == ["unique-symbol"]
    assert (dep["fixable"], dep["allowed"]) == (True, None)
    rc, doc, _ = dlcheck_cli(patched / "libuser.so")
    dep = {d["path"]: d for d in doc["dependencies"]}[str(patched / "libholder_v1.so")]
    assert rc == 0 and dep["unloads"] is True and dep["blockers"] == [] and dep["fixable"] is False


def test_a_cross_binding_into_a_dependency(unique_build: Path) -> None:
    user, v2 = str(unique_build / "libuser.so"), str(unique_build / "libholder_v2.so")
    rc, doc, _ = dlcheck_cli(user, v2)
    assert rc == 1  # both unload, but v2 shares libuser's dependency's statics
    assert [f["unloads"] for f in doc["files"]] == [True, True]
    assert {(c["file"], c["bound_to"]) for c in doc["cross_bindings"]} == {
        (v2, str(unique_build / "libholder_v1.so"))}


PIN = """
int user_value(void);
int pin_value(void) { return user_value(); }
"""


def test_still_referenced(unique_build: Path, patched: Path, build_lib: Callable[..., Path]) -> None:
    # libpin.so: -z nodelete, and DT_NEEDED on (patched, so otherwise unloadable) libuser.so.
    pin = build_lib("libpin", PIN, f"-L{patched}", "-l:libuser.so", f"-Wl,-rpath,{patched}",
                    "-Wl,-z,nodelete")
    user = str(patched / "libuser.so")
    rc, doc, _ = dlcheck_cli(user, pin)
    assert rc == 1
    f_user, f_pin = doc["files"]
    assert kinds(f_pin) == ["nodelete-flag"]
    assert kinds(f_user) == ["still-referenced"]
    assert f_user["blockers"][0]["objects"] == [str(pin)]
    assert str(pin) in f_user["blockers"][0]["detail"]


SELF_PIN = """
#define _GNU_SOURCE
#include <dlfcn.h>
static void pin(void) __attribute__((constructor));
static void pin(void) {
    Dl_info info;
    if (dladdr((void *)pin, &info))
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);  /* a reference nobody gives back */
}
"""


def test_unknown(build_lib: Callable[..., Path]) -> None:
    lib = build_lib("libselfpin", SELF_PIN)
    rc, doc, _ = dlcheck_cli(lib)
    assert rc == 1
    assert kinds(doc["files"][0]) == ["unknown"]


def test_preloaded() -> None:
    libc = next(p for p in Path("/proc/self/maps").read_text().split() if "/libc.so.6" in p)
    doc = check_document(dlcheck([libc]))
    assert kinds(doc["files"][0]) == ["preloaded"]
    assert exit_status(doc) == 1


def test_errors_are_reported_and_the_rest_still_checked(unique_build: Path, patched: Path,
                                                        tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a library\n")
    missing = tmp_path / "missing.so"
    rc, doc, err = dlcheck_cli(missing, patched / "libplugin.so", text)
    assert rc == 2
    f_missing, f_plugin, f_text = doc["files"]
    assert (f_missing["loaded"], f_missing["unloads"]) == (False, None)
    assert "cannot open shared object file: No such file or directory" in f_missing["error"]
    assert "invalid ELF header" in f_text["error"] or "file too short" in f_text["error"]
    assert (f_plugin["error"], f_plugin["unloads"]) == (None, True)
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("elfpatch: error: ") for line in lines)
    assert lines[0] == (f"elfpatch: error: {missing}: "
                        "cannot open shared object file: No such file or directory")


CRASH = """
#include <signal.h>
static void boom(void) __attribute__((constructor));
static void boom(void) { raise(SIGSEGV); }
"""


def test_a_library_that_crashes_the_loader_is_an_error(build_lib: Callable[..., Path], patched: Path) -> None:
    lib = build_lib("libcrash", CRASH)
    rc, doc, err = dlcheck_cli(lib, patched / "libplugin.so")
    assert rc == 2
    f_crash, f_next = doc["files"]
    assert "killed by SIGSEGV during dlopen" in f_crash["error"]
    assert f_next["error"].startswith("not checked")
    assert "Traceback" not in err


def test_a_destructor_that_crashes_at_dlclose(nd_build: Path) -> None:
    # libnd_logger_plain.so registers a callback in libnd_core.so; closed first, it leaves the core a dangling
    # pointer that the core's destructor calls when the core is closed in its turn.
    rc, doc, _ = dlcheck_cli(nd_build / "libnd_core.so", nd_build / "libnd_logger_plain.so")
    assert rc == 2
    assert "killed by SIGSEGV during dlclose" in doc["files"][0]["error"]


def test_human_output_explains_and_suggests(unique_build: Path) -> None:
    rc, out, _ = dlcheck_cli(unique_build / "libholder_v1.so", unique_build / "libholder_v2.so",
                             unique_build / "libnodelete.so", human=True)
    assert rc == 1
    v1 = unique_build / "libholder_v1.so"
    assert f"{v1}: stays loaded after dlclose" in out
    assert "Holder<int>::value (_ZN6HolderIiE5valueE)" in out
    assert f"`elfpatch unique {v1}`" in out and "-fno-gnu-unique" in out
    assert f"{unique_build / 'libholder_v2.so'}: unloads" in out
    assert "linked with -z nodelete" in out and "it must stay" in out
    assert "cross bindings" in out
    assert out.rstrip().endswith("3 files: 1 unload, 2 stay loaded, 0 errors; 2 cross bindings")


def test_readme_demo(unique_build: Path, tmp_path: Path) -> None:
    """docs/dlcheck.md's demo: a library that does not unload, then does."""
    for name in ("libholder_v1.so", "libholder_v2.so"):
        shutil.copy(unique_build / name, tmp_path / name)
    v1, v2 = tmp_path / "libholder_v1.so", tmp_path / "libholder_v2.so"
    rc, out, _ = dlcheck_cli(v1, v2, human=True)
    assert rc == 1 and f"{v1}: stays loaded after dlclose" in out
    run_main("unique", str(v1), str(v2), check=True)
    rc, out, _ = dlcheck_cli(v1, v2, human=True)
    assert rc == 0
    assert f"{v1}: unloads" in out and f"{v2}: unloads" in out and "cross bindings (" not in out


def test_usage_errors() -> None:
    proc = run_main("dlcheck")
    assert proc.returncode == 2 and "PATH" in proc.stderr
