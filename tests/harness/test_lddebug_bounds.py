"""The LD_DEBUG log is read in bounded memory (issue 23, row 11): a library that makes the loader log more than
the whole address space dlcheck may use is checked all the same, what is kept is capped, and a cut is said.
Memory is checked with RLIMIT_AS on a child process, never with a clock."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema_check import check_document

from elfpatch.harness import Session, lddebug
from elfpatch.harness.dlcheck import dlcheck
from elfpatch.harness.lddebug import KEEP_BYTES, MAX_LINE, parse, parse_file

LIMIT = 128 << 20  # bytes of address space for the dlcheck process (and, inherited, its child)
LOOKUPS = 800_000  # dlsym calls in libchatty.so's constructor: ~160-180 bytes of log each, by the path's length
P = 4242
A, B = "/w/liba.so", "/w/libb.so"


def limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.slow  # a 140 MiB log, twice
def test_a_log_larger_than_the_address_space_is_checked(dl_build: Path, tmp_path: Path) -> None:
    """Guarantee: dlcheck's memory does not grow with the loader's log. libchatty.so makes the loader log
    more bytes than dlcheck's whole address space limit; it is checked, with no warning (its repeats are one
    binding)."""
    lib = dl_build / "libchatty.so"
    lookups, size = LOOKUPS, 0
    for _ in range(3):  # the premise: the log really is larger than the limit (its lines hold the clone's path)
        env = {**os.environ, "ELFPATCH_TEST_LOOKUPS": str(lookups)}
        with Session(env=env) as s:
            s.open(lib)
            size = os.path.getsize(s._debug_path())
        if size > LIMIT:
            break
        lookups = lookups * LIMIT // max(size, 1) * 5 // 4 + 1  # a shorter path logs fewer bytes a lookup
    assert size > LIMIT
    proc = subprocess.run([sys.executable, "-m", "elfpatch", "dlcheck", "--json", str(lib)], env=env,
                          capture_output=True, text=True, preexec_fn=lambda: limited(LIMIT))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert '"unloads": true' in proc.stdout and '"warnings": []' in proc.stdout


def test_repeats_are_kept_once_per_request() -> None:
    line = f"{P}:\tbinding file {A} [0] to {B} [0]: normal symbol `f'\n"
    text = f"{P}:\telfpatch-harness op 1 open\n" + line * 1000 + f"{P}:\telfpatch-harness op 2 open\n" + line * 3
    log = parse(text, P)
    assert [(b.symbol, b.op) for b in log.bindings] == [("f", 1), ("f", 2)]
    assert log.lines == 1005 and log.notes() == []
    assert log.bindings[0].file is log.bindings[1].file  # one copy of each path
    # A new life of the referrer between two equal lines makes them two events (judged by different scopes).
    log = parse(f"{P}:\telfpatch-harness op 1 open\n" + line + f"{P}:\tfile={A} [0];  destroying link map\n"
                + line, P)
    assert [(b.symbol, b.op) for b in log.bindings] == [("f", 1), ("f", 1)]


def distinct_bindings(path: Path, count: int) -> None:
    with open(path, "w") as f:
        f.write(f"{P}:\telfpatch-harness op 1 open\n{P}:\tobject={A} [0]\n{P}:\t scope 1: {A}\n")
        f.writelines(f"{P}:\tbinding file {A} [0] to {B} [0]: normal symbol `symbol_{i:08d}'\n"
                     for i in range(count))
        f.write(f"{P}:\tmarking {B} [0] as NODELETE due to unique symbol\n")


@pytest.mark.slow  # an 85 MB log
def test_what_is_kept_is_capped_and_the_cut_is_said(tmp_path: Path) -> None:
    """Guarantee: a log of distinct events beyond the budget is parsed in bounded memory (a child with
    RLIMIT_AS below the log's own size), keeps at most the budget, and says how much it left out."""
    log_file = tmp_path / "ld"
    distinct_bindings(log_file, 1_000_000)  # ~70 MiB, twice the budget
    script = ("import sys; from elfpatch.harness.lddebug import parse_file; log = parse_file(sys.argv[1], 4242); "
              "print(len(log.bindings), log.dropped); print(*log.notes(), sep='\\n')")
    proc = subprocess.run([sys.executable, "-c", script, str(log_file)], capture_output=True, text=True,
                          preexec_fn=lambda: limited(os.path.getsize(log_file)))
    assert proc.returncode == 0, proc.stderr
    counts, note = proc.stdout.splitlines()
    kept, dropped = map(int, counts.split())
    assert kept + dropped == 1_000_001  # every binding and the mark: kept or counted
    assert 0 < kept <= KEEP_BYTES // lddebug.EVENT_COST
    assert note.startswith(f"the loader's LD_DEBUG log was too large to keep whole: {dropped} of its events")


def test_an_overlong_line_is_skipped_and_counted(tmp_path: Path) -> None:
    log_file = tmp_path / "ld"
    with open(log_file, "w") as f:
        f.write(f"{P}:\tbinding file {A} [0] to {B} [0]: normal symbol `{'x' * MAX_LINE}'\n")
        f.write(f"{P}:\tbinding file {A} [0] to {B} [0]: normal symbol `after'\n")
    log = parse_file(str(log_file), P)
    assert [b.symbol for b in log.bindings] == ["after"]
    assert log.cut_lines == 1 and "longer than 1 MiB were skipped" in log.notes()[0]


def test_scopes_lost_to_the_budget_never_make_a_binding_out_of_scope(monkeypatch) -> None:
    """Guarantee: a binding whose referrer's scope line was not kept (the budget was spent) is judged None (no
    evidence), never out of scope by a scope it is missing."""
    text = (f"{P}:\telfpatch-harness op 1 open\n{P}:\tbinding file {A} [0] to {B} [0]: normal symbol `f'\n"
            f"{P}:\tobject={A} [0]\n{P}:\t scope 0: /bin/python\n"
            f"{P}:\t scope 1: {A} {'/w/padding.so ' * 20}{B}\n")
    assert parse(text, P).bindings[0].in_scope is True  # every line kept: in scope 1
    monkeypatch.setattr(lddebug, "KEEP_BYTES", lddebug.EVENT_COST + 100)  # the binding and scope 0 fit, not scope 1
    (b,) = parse(text, P).bindings
    assert b.in_scope is None


def test_dlcheck_reports_a_cut_log_as_a_warning(dl_build: Path, monkeypatch) -> None:
    monkeypatch.setattr(lddebug, "KEEP_BYTES", 4096)
    doc = check_document(dlcheck([str(dl_build / "libmid.so")]))
    assert doc["files"][0]["unloads"] is True
    assert doc["warnings"] and "too large to keep whole" in doc["warnings"][0]
