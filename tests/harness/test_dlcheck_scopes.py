"""Cross bindings are judged against the scopes in force when the loader made each binding (issue 16, part 1):
the small case from the issue, a binding through the global scope, and the parser on glibc's exact output."""
from __future__ import annotations

from pathlib import Path

from elfpatch.harness import Session
from elfpatch.harness.lddebug import parse
from harness.conftest import dlcheck_cli

HOLDER = "_ZN6HolderIiE5valueE"


def test_issue_case_has_no_cross_binding(dl_build: Path) -> None:
    top, other = dl_build / "libtop.so", dl_build / "libother.so"
    rc, doc, err = dlcheck_cli(top, other)
    assert (rc, err) == (0, "")
    assert doc["cross_bindings"] == [] and doc["out_of_scope_bindings"] == []
    assert [f["unloads"] for f in doc["files"]] == [True, True]


def test_issue_case_is_what_the_loader_did(dl_build: Path) -> None:
    """The case really is the one the issue describes: libmid binds its hook() call to libtop's during the
    first dlopen, and glibc prints libmid's scopes again, with only the new one, during the second."""
    top, other, mid = (str(dl_build / n) for n in ("libtop.so", "libother.so", "libmid.so"))
    with Session() as s:
        s.open(top)
        s.open(other)
        log = s.debug()
        text = s.debug_text()
    (hook,) = [b for b in log.bindings if b.file == mid and b.symbol == "hook"]
    assert hook.bound_to == top and hook.in_scope is True
    # The last scope glibc printed for libmid does not hold libtop: judged by it alone, the binding would be
    # called cross (the bug). Judged by the scopes in force at the time, it is in scope.
    assert log.scopes[mid][-1].split() == [other, mid]
    assert f"scope 2: {other} {mid}" in text
    assert log.cross_bindings({top, other, mid}) == [] and log.out_of_scope({top, other, mid}) == []


def test_a_real_cross_binding_is_still_one(unique_build: Path, dl_build: Path) -> None:
    v1, v2 = unique_build / "libholder_v1.so", unique_build / "libholder_v2.so"
    rc, doc, _ = dlcheck_cli(dl_build / "libtop.so", v1, dl_build / "libother.so", v2)
    assert rc == 1
    assert {(c["symbol"], c["file"], c["bound_to"]) for c in doc["cross_bindings"]} >= {(HOLDER, str(v2), str(v1))}
    assert all(c["file"] == str(v2) and c["bound_to"] == str(v1) for c in doc["cross_bindings"])


def test_a_binding_through_the_global_scope_is_in_scope(dl_build: Path) -> None:
    glob, user = dl_build / "libglobal.so", dl_build / "libuses_global.so"
    rc, doc, err = dlcheck_cli(user, options=["--preload", str(glob)])
    assert (rc, err) == (0, "")
    assert doc["preloads"] == [{"path": str(glob), "error": None}]
    assert doc["cross_bindings"] == [] and doc["out_of_scope_bindings"] == []
    with Session() as s:
        s.open(glob, "RTLD_NOW|RTLD_GLOBAL")
        s.open(user)
        log = s.debug()
    (b,) = [b for b in log.bindings if b.file == str(user) and b.symbol == "global_value"]
    assert b.bound_to == str(glob) and b.in_scope is True
    assert str(glob) in log.global_scope


def test_without_the_preload_it_does_not_load(dl_build: Path) -> None:
    rc, doc, err = dlcheck_cli(dl_build / "libuses_global.so")
    assert rc == 2 and "undefined symbol: global_value" in doc["files"][0]["error"]


# glibc 2.36's output for the issue's case, trimmed to the lines that matter (two processes interleaved
# would be told apart by the PID).
P, TOP, MID, OTHER, LIBC = "77", "/t/libtop.so", "/t/libmid.so", "/t/libother.so", "/lib/libc.so.6"
LOG = f"""\
{P}:\telfpatch-harness op 1 open
{P}:\tobject={TOP} [0]
{P}:\t scope 0: /bin/python {LIBC}
{P}:\t scope 1: {TOP} {MID}
{P}:\t
{P}:\tbinding file {MID} [0] to {TOP} [0]: normal symbol `hook'
{P}:\tobject={MID} [0]
{P}:\t scope 0: /bin/python {LIBC}
{P}:\t scope 1: {TOP} {MID}
{P}:\telfpatch-harness op 2 open
{P}:\tobject={OTHER} [0]
{P}:\t scope 0: /bin/python {LIBC}
{P}:\t scope 1: {OTHER} {MID}
{P}:\tobject={MID} [0]
{P}:\t scope 2: {OTHER} {MID}
{P}:\tbinding file {MID} [0] to {OTHER} [0]: normal symbol `late'
{P}:\telfpatch-harness op 3 close
{P}:\tfile={TOP} [0];  destroying link map
{P}:\tfile={MID} [0];  destroying link map
{P}:\telfpatch-harness op 4 open
{P}:\tobject={MID} [0]
{P}:\t scope 0: /bin/python {LIBC}
{P}:\t scope 1: {MID}
{P}:\tbinding file {MID} [0] to {TOP} [0]: normal symbol `hook'
"""


def test_scopes_accumulate_and_each_binding_is_judged_by_its_request() -> None:
    log = parse(LOG, pid=77)
    verdicts = [(b.symbol, b.op, b.in_scope) for b in log.bindings]
    # op 1: in scope by the scopes op 1 printed, though printed after the binding (dependencies are
    # relocated first); op 2: in scope 2, added then; op 4: a new life of libmid that has only itself.
    assert verdicts == [("hook", 1, True), ("late", 2, True), ("hook", 4, False)]
    assert [(b.file, b.bound_to) for b in log.out_of_scope({TOP, MID, OTHER})] == [(MID, TOP)]


def test_a_binding_is_not_judged_by_a_scope_added_later() -> None:
    text = f"""\
{P}:\telfpatch-harness op 1 open
{P}:\tobject={MID} [0]
{P}:\t scope 1: {MID}
{P}:\tbinding file {MID} [0] to {OTHER} [0]: normal symbol `x'
{P}:\telfpatch-harness op 2 open
{P}:\tobject={MID} [0]
{P}:\t scope 2: {OTHER} {MID}
"""
    (b,) = parse(text).bindings
    assert b.in_scope is False


def test_global_scope_additions_count_from_their_request_on() -> None:
    text = f"""\
{P}:\telfpatch-harness op 1 open
{P}:\tobject={MID} [0]
{P}:\t scope 0: /bin/python
{P}:\t scope 1: {MID}
{P}:\tbinding file {MID} [0] to {OTHER} [0]: normal symbol `early'
{P}:\telfpatch-harness op 2 open
{P}:\tadd {OTHER} [0] to global scope
{P}:\tbinding file {MID} [0] to {OTHER} [0]: normal symbol `late'
"""
    log = parse(text)
    assert [(b.symbol, b.in_scope) for b in log.bindings] == [("early", False), ("late", True)]
    assert log.global_scope == [OTHER]


def test_only_unique_definitions_make_cross_bindings(unique_build: Path, dl_build: Path) -> None:
    """An out-of-scope binding to an STB_GNU_UNIQUE definition is a cross binding; to a normal one it is
    reported apart (as dlcheck's out_of_scope_bindings)."""
    v1, v2 = str(unique_build / "libholder_v1.so"), str(unique_build / "libholder_v2.so")
    top, mid = str(dl_build / "libtop.so"), str(dl_build / "libmid.so")
    text = f"""\
{P}:\telfpatch-harness op 1 open
{P}:\tobject={v2} [0]
{P}:\t scope 1: {v2}
{P}:\tbinding file {v2} [0] to {v1} [0]: normal symbol `{HOLDER}'
{P}:\tobject={mid} [0]
{P}:\t scope 1: {mid}
{P}:\tbinding file {mid} [0] to {top} [0]: normal symbol `hook'
"""
    log = parse(text)
    objects = {v1, v2, top, mid}
    assert [(b.file, b.symbol) for b in log.out_of_scope(objects)] == [(v2, HOLDER), (mid, "hook")]
    assert [(b.file, b.symbol) for b in log.cross_bindings(objects)] == [(v2, HOLDER)]


def test_out_of_scope_normal_bindings_are_reported_apart(unique_build: Path, dl_build: Path) -> None:
    """dlcheck's split, on a log where both kinds occur: the unique one is a cross binding (exit 1), the normal
    one goes to out_of_scope_bindings, without the unique-symbol advice and without changing the exit status."""
    import io

    from elfpatch.harness.dlcheck import _report, exit_status
    from elfpatch.harness.explain import write_text

    v1, v2 = str(unique_build / "libholder_v1.so"), str(unique_build / "libholder_v2.so")
    top, mid = str(dl_build / "libtop.so"), str(dl_build / "libmid.so")
    text = f"""\
{P}:\telfpatch-harness op 1 open
{P}:\tobject={mid} [0]
{P}:\t scope 1: {mid}
{P}:\tbinding file {mid} [0] to {top} [0]: normal symbol `hook'
"""
    paths = [mid, top]
    entries = [{"path": p, "loaded": True, "error": None, "unloads": True, "blockers": []} for p in paths]
    doc = _report(entries, paths, paths, parse(text), set(), [], paths, [])
    assert doc["cross_bindings"] == []
    assert doc["out_of_scope_bindings"] == [{"symbol": "hook", "file": mid, "bound_to": top}]
    assert exit_status(doc) == 0
    out = io.StringIO()
    write_text(doc, out)
    assert "out-of-scope bindings (not unique symbols" in out.getvalue()
    assert f"  {mid} uses {top}'s hook" in out.getvalue() and "elfpatch unique" not in out.getvalue()
    text += f"{P}:\tobject={v2} [0]\n{P}:\t scope 1: {v2}\n" \
            f"{P}:\tbinding file {v2} [0] to {v1} [0]: normal symbol `{HOLDER}'\n"
    paths = [mid, top, v1, v2]
    entries = [{"path": p, "loaded": True, "error": None, "unloads": True, "blockers": []} for p in paths]
    doc = _report(entries, paths, paths, parse(text), set(), [], paths, [])
    assert doc["cross_bindings"] == [{"symbol": HOLDER, "file": v2, "bound_to": v1}]
    assert exit_status(doc) == 1
