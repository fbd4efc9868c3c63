"""A bundled dependency that stays loaded for unique symbols fails dlcheck (issue 23, row 18): shapely's lib.so
unloaded and dlcheck exited 0 while libgeos and libgeos_c, shipped in the same wheel, stayed pinned. libext.so
needs ext.libs/libbundled.so.1 (a wheel's layout, outside the system's library directories), which defines
one STB_GNU_UNIQUE object. --allow-resident waives a named one; a system library never fails the check."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import check_document

from harness.conftest import dlcheck_cli

BUNDLED = "ext.libs/libbundled.so.1"


def bundled_entry(doc: dict) -> dict:
    (dep,) = [d for d in doc["dependencies"] if d["path"].endswith(BUNDLED)]
    return dep


def test_a_pinned_bundled_dependency_fails_the_check(dl_build: Path) -> None:
    """Guarantee: the PATH unloads, but its bundled dependency stays for a unique symbol `elfpatch unique`
    can rewrite: exit 1, the dependency marked fixable, the text says it fails the check and how to waive."""
    rc, doc, err = dlcheck_cli(dl_build / "libext.so")
    assert (rc, err) == (1, "")
    assert doc["files"][0]["unloads"] is True and doc["cross_bindings"] == []
    dep = bundled_entry(doc)
    assert (dep["unloads"], dep["fixable"], dep["allowed"]) == (False, True, None)
    assert [b["kind"] for b in dep["blockers"]] == ["unique-symbol"]
    assert dep["blockers"][0]["symbols"] == ["bundled_state"]
    rc, text, _ = dlcheck_cli(dl_build / "libext.so", human=True)
    assert rc == 1
    assert (f"dependency {dl_build / BUNDLED}: stays loaded (fails the check: `elfpatch unique` can make it "
            "unload; --allow-resident libbundled.so.1 waives it)") in text
    assert text.rstrip().endswith("0 cross bindings; 1 dependency fails the check")


@pytest.mark.parametrize("glob", ["libbundled*", "libbundled.so.1", "*/ext.libs/*"])
def test_allow_resident_waives_it(glob: str, dl_build: Path) -> None:
    """Guarantee: --allow-resident GLOB (the file name, the soname, or with a slash the path) waives a named
    dependency, and the report says which glob did."""
    rc, doc, _ = dlcheck_cli(dl_build / "libext.so", options=["--allow-resident", glob])
    assert rc == 0
    dep = bundled_entry(doc)
    assert (dep["unloads"], dep["fixable"], dep["allowed"]) == (False, True, glob)
    rc, text, _ = dlcheck_cli(dl_build / "libext.so", human=True, options=["--allow-resident", glob])
    assert f"stays loaded (allowed by --allow-resident {glob})" in text


def test_allow_resident_names_only_what_it_matches(dl_build: Path) -> None:
    rc, doc, _ = dlcheck_cli(dl_build / "libext.so", options=["--allow-resident", "libgeos*",
                                                              "--allow-resident", "bundled*"])
    assert rc == 1 and bundled_entry(doc)["allowed"] is None


def test_the_advice_is_true_patched_it_unloads(dl_build: Path, tmp_path: Path) -> None:
    """The verdict is only for what `elfpatch unique` can fix: after it, the same layout passes."""
    shutil.copy(dl_build / "libext.so", tmp_path / "libext.so")
    (tmp_path / "ext.libs").mkdir()
    shutil.copy(dl_build / BUNDLED, tmp_path / BUNDLED)
    run_main("unique", "-q", str(tmp_path / BUNDLED), check=True)
    rc, doc, _ = dlcheck_cli(tmp_path / "libext.so")
    assert rc == 0
    dep = bundled_entry(doc)
    assert (dep["unloads"], dep["fixable"], dep["allowed"]) == (True, False, None)


def test_a_system_dependency_that_stays_does_not_fail(dl_build: Path) -> None:
    """libcxxhelper.so brings in the system libstdc++, which glibc keeps for unique symbols of its own:
    reported, and it does not change the exit status (elfpatch does not patch the distribution's files)."""
    rc, doc, _ = dlcheck_cli(dl_build / "libcxxhelper.so")
    stays = [d for d in doc["dependencies"] if not d["unloads"]]
    assert rc == 0 and stays and all(d["fixable"] is False for d in stays)
    assert any("libstdc++" in d["path"] for d in stays)


def test_the_api_takes_one_string_as_one_item(dl_build: Path) -> None:
    """A string where a list is meant is one path or glob, never a list of its characters."""
    from elfpatch.harness.dlcheck import dlcheck, exit_status

    doc = check_document(dlcheck(str(dl_build / "libext.so"), allow_resident="libbundled*"))
    assert [f["path"] for f in doc["files"]] == [str(dl_build / "libext.so")]
    assert bundled_entry(doc)["allowed"] == "libbundled*" and exit_status(doc) == 0
