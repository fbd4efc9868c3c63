"""The LD_DEBUG parser, on text in the exact shape glibc 2.36 prints (taken from real runs)."""
from __future__ import annotations

from elfpatch.harness.lddebug import parse

V1, V2, USER = "/b/libholder_v1.so", "/b/libholder_v2.so", "/b/libuser.so"
LIBC, LDSO = "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"
SAMPLE = f"""\
     13976:\tbinding file {LDSO} [0] to {LIBC} [0]: normal symbol `_dl_catch_error' [GLIBC_PRIVATE]
     13976:\t
     13976:\tobject={LDSO} [0]
     13976:\t no scope
     13976:\t
     13976:\telfpatch-harness op 1 open
     13976:\tfile=libholder_v1.so [0];  needed by {USER} [0]
     13976:\tobject={USER} [0]
     13976:\t scope 0: ./prog {LIBC} {LDSO}
     13976:\t scope 1: {USER} {V1}
     13976:\t
     13976:\tmarking {V1} [0] as NODELETE due to unique symbol
     13976:\tbinding file {V1} [0] to {V1} [0]: normal symbol `_ZN6HolderIiE5valueE'
     13976:\tbinding file {USER} [0] to {V1} [0]: normal symbol `holder_value'
     13976:\telfpatch-harness op 2 open
     13976:\tobject={V2} [0]
     13976:\t scope 0: ./prog {LIBC} {LDSO}
     13976:\t scope 1: {V2}
     13976:\t
     13976:\tbinding file {V2} [0] to {V1} [0]: normal symbol `_ZN6HolderIiE5valueE'
     13976:\tbinding file {V2} [0] to {V1} [0]: normal symbol `_ZN6HolderIiE5valueE'
     13976:\tbinding file {V2} [0] to {LIBC} [0]: normal symbol `__cxa_finalize' [GLIBC_2.2.5]
     13976:\tfile={V1} [0];  needed by {V2} [0] (relocation dependency)
     13976:\tmarking {V2} [0] as NODELETE due to reference from {USER} [0]
     13976:\tmarking /b/libx.so [0] as NODELETE due to reference from main program
     13977:\tmarking /b/other-process.so [0] as NODELETE due to unique symbol
     13976:\telfpatch-harness op 3 close
     13976:\tfile={V2} [0];  destroying link map
"""


def test_events_and_the_request_they_belong_to() -> None:
    log = parse(SAMPLE, pid=13976)
    assert [(m.path, m.reason, m.reference_from, m.op) for m in log.marks] == [
        (V1, "unique symbol", None, 1),
        (V2, f"reference from {USER} [0]", USER, 2),
        ("/b/libx.so", "reference from main program", "", 2),
    ]
    first = log.bindings[0]
    assert (first.file, first.bound_to, first.symbol, first.version, first.op) == (
        LDSO, LIBC, "_dl_catch_error", "GLIBC_PRIVATE", 0)
    assert [(d.path, d.needed_by, d.relocation) for d in log.dependencies] == [
        ("libholder_v1.so", USER, False), (V1, V2, True)]
    assert log.unmapped == [V2]
    assert log.scopes[V2] == [f"./prog {LIBC} {LDSO}", V2]
    assert log.nodelete(V1, "unique") and not log.nodelete(V2, "unique")


def test_other_processes_are_ignored_with_a_pid() -> None:
    assert "/b/other-process.so" not in {m.path for m in parse(SAMPLE, pid=13976).marks}
    assert "/b/other-process.so" in {m.path for m in parse(SAMPLE).marks}


def test_out_of_scope_bindings() -> None:
    log = parse(SAMPLE, pid=13976)
    cross = log.out_of_scope({V1, V2, USER})
    # v2 -> v1 once (deduplicated); user -> v1 is a DT_NEEDED binding inside user's scope; libc is not ours.
    assert [(b.file, b.bound_to, b.symbol) for b in cross] == [(V2, V1, "_ZN6HolderIiE5valueE")]
    assert log.out_of_scope({V2, USER}) == []  # v1 not among the objects asked about
    assert log.cross_bindings({V1, V2, USER}) == []  # /b/libholder_v1.so is no file: not known to be unique


def test_an_object_without_printed_scopes_is_never_called_cross() -> None:
    log = parse("1:\tbinding file /a.so [0] to /b.so [0]: normal symbol `x'\n")
    assert log.bindings and log.out_of_scope({"/a.so", "/b.so"}) == []
    assert log.bindings[0].in_scope is None


def test_garbage_is_skipped() -> None:
    log = parse("not a debug line\n12:\tmarking without the rest\n\n12:\tbinding file broken\n")
    assert (log.marks, log.bindings, log.lines) == ([], [], 2)
