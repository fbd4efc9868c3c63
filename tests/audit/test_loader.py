"""The loader is the judge: every binding glibc makes across packages when the modules of a site-packages are
loaded RTLD_LOCAL into one process is a collision `elfpatch audit` reported (both files among its definitions
or references); after `elfpatch unique` on the tree, audit reports none and the loader makes none."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import check_document

from audit.helpers import INSTANCES, NAME, PACKAGES, SLOTS, audit_json, by_symbol
from elfpatch.harness.dlcheck import dlcheck

MODULES = ["pkga/_a.so", "pkgb/_b.so", "pkgc/_c.so"]  # what `import` would dlopen; libcore.so comes as _c's need
ORDERS = [MODULES, MODULES[::-1], ["pkgb/_b.so", "pkgc/_c.so", "pkga/_a.so"]]


def _file_ids(site: Path) -> dict[tuple[int, int], tuple[str, str]]:
    """(device, inode) -> (path relative to the site, package) for every fixture library."""
    out = {}
    for package, (_, files) in PACKAGES.items():
        for rel in files:
            st = os.stat(site / rel)
            out[(st.st_dev, st.st_ino)] = (rel, package)
    return out


def cross_package_bindings(site: Path, order: list[str]) -> list[tuple[str, str, str]]:
    """(symbol, referring file, file bound to), relative to the site, for every binding from one package's
    library into another's that LD_DEBUG=bindings shows when ``order`` is loaded RTLD_LOCAL."""
    ids = _file_ids(site)
    doc = check_document(dlcheck([str(site / m) for m in order]))
    assert all(f["loaded"] for f in doc["files"]), doc["files"]

    def who(name: str) -> tuple[str, str] | None:
        st = os.stat(name if os.path.isabs(name) else site / name)
        return ids.get((st.st_dev, st.st_ino))

    out = []
    for b in doc["cross_bindings"]:
        file, bound = who(b["file"]), who(b["bound_to"])
        if file is not None and bound is not None and file[1] != bound[1]:
            out.append((b["symbol"], file[0], bound[0]))
    return out


def _rel(entry: dict, site: Path) -> str:
    return os.path.relpath(entry["path"], site)


@pytest.mark.parametrize("order", ORDERS, ids=["abc", "cba", "bca"])
def test_every_cross_package_binding_is_a_reported_collision(site: Path, order: list[str]) -> None:
    status, doc = audit_json(str(site))
    assert status == 1, "cross-package collisions make the gate fail"
    collisions = by_symbol(doc)
    bindings = cross_package_bindings(site, order)
    assert bindings, "the fixture must make the loader bind across packages, or this test proves nothing"
    for symbol, file, bound in bindings:
        assert symbol in collisions, f"the loader bound {symbol} from {file} to {bound}; audit did not report it"
        c = collisions[symbol]
        assert c["cross_package"]
        defined = {_rel(d, site) for d in c["definitions"]}
        used = {_rel(r, site) for r in c["referenced_by"]}
        assert bound in defined and file in defined | used, (symbol, file, bound, c)
    # The first module loaded wins every name: the later packages' files are bound to it.
    first = order[0] if order[0] != "pkgc/_c.so" else "pkgc/libcore.so"
    assert {bound for _, _, bound in bindings} == {first}


def test_patched_site_has_no_collision_and_the_loader_no_cross_binding(site: Path) -> None:
    assert cross_package_bindings(site, MODULES), "shared before"
    run_main("unique", str(site), check=True)
    status, doc = audit_json(str(site))
    assert status == 0 and doc["collisions"] == [] and doc["pinned"] == []
    assert doc["summary"]["collisions"] == 0 and doc["summary"]["package_pairs"] == []
    for order in ORDERS:
        assert cross_package_bindings(site, order) == []


def test_fixture_collisions(site: Path) -> None:
    """What the fixture holds, by the toolchain's own account (readelf in native_tests/audit/Makefile's
    comment): three names defined by _a, _b and libcore; _b's slots array twice the size; _c refers to two."""
    _, doc = audit_json(str(site))
    collisions = by_symbol(doc)
    assert set(collisions) == {SLOTS, NAME, INSTANCES}
    sizes = {_rel(d, site): d["st_size"] for d in collisions[SLOTS]["definitions"]}
    assert sizes == {"pkga/_a.so": 16, "pkgb/_b.so": 32, "pkgc/libcore.so": 16}
    assert collisions[SLOTS]["differs"] and not collisions[INSTANCES]["differs"]
    assert [_rel(r, site) for r in collisions[SLOTS]["referenced_by"]] == ["pkgc/_c.so"]
    assert collisions[INSTANCES]["referenced_by"] == []
    assert collisions[NAME]["demangled"] == "Registry<int>::name"
