"""Package records are input we do not own: a FIFO, a huge RECORD or a deeply nested conda-meta record must
neither hang a report, nor cost memory by its size, nor end it; a record that cannot be read is a warning."""
from __future__ import annotations

import json
import os
import subprocess
import tracemalloc
from pathlib import Path

from helpers import run_cli
from jsonschema_check import cli_json

import elfpatch
from audit.helpers import install
from elfpatch.auditing.packages import Owners, Package

NEVER_HANG = 120  # seconds; a hang is what is tested, not speed


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, timeout=NEVER_HANG)  # a child process: a hang ends at the timeout, as a failure


def test_fifo_record_never_blocks(site: Path) -> None:
    """Guarantee: no open may block. A FIFO named RECORD (or METADATA) in a .dist-info is passed over with a
    warning naming it; `audit` and `unique --check --json` finish, the other packages still attributed."""
    info = site / "pkga-1.0.dist-info"
    (info / "RECORD").unlink()
    os.mkfifo(info / "RECORD")
    (site / "pkgb-2.0.dist-info" / "METADATA").unlink()
    os.mkfifo(site / "pkgb-2.0.dist-info" / "METADATA")
    (site / "conda-meta").mkdir()
    os.mkfifo(site / "conda-meta" / "fifo-1.0-0.json")
    proc = cli("audit", "--json", str(site))
    assert proc.returncode in (0, 1), proc.stderr
    assert f"{info / 'RECORD'}: not a regular file" in proc.stderr
    assert f"{site / 'conda-meta' / 'fifo-1.0-0.json'}: not a regular file" in proc.stderr
    owners = {Path(p["path"]).name: p["package"] for p in cli_json(proc.stdout)["pinned"]}
    assert owners["_a.so"] is None and owners["_b.so"] == {"name": "pkgb", "version": "2.0"}
    proc = cli("unique", "--check", "--json", str(site))
    assert proc.returncode == 1, proc.stderr
    files = {Path(f["path"]).name: f for f in cli_json(proc.stdout)["files"]}
    assert any("RECORD: not a regular file" in w for w in files["_a.so"]["warnings"])
    assert files["_c.so"]["package"] == {"name": "pkgc", "version": "1.0"}


def test_large_record_costs_memory_by_what_is_asked(tmp_path: Path) -> None:
    """Guarantee: memory bounded by what matters. A RECORD of 300,000 rows (about 20 MB) is streamed and
    only the rows of the files asked about are kept: the peak is a small fraction of the RECORD's size."""
    site = tmp_path / "site"
    lib = site / "big" / "lib.so"
    install(site, "big", "1.0", {"big/lib.so": b"\x7fELF"})
    record = site / "big-1.0.dist-info" / "RECORD"
    rows = "".join(f"big/data/file_{i:06d}.py,sha256={'x' * 43},{i}\n" for i in range(300_000))
    record.write_text(record.read_text() + rows)
    size = record.stat().st_size
    assert size > 20_000_000
    tracemalloc.start()
    try:
        owner = Owners([str(lib)]).of(str(lib))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert owner == Package("big", "1.0")
    assert peak < size // 20, f"{peak} bytes at peak for a {size}-byte RECORD"
    # Asked later about a file it was not built for, the index reads the records again.
    owners = Owners([str(lib)])
    assert owners.of(str(site / "big" / "data" / "file_000007.py")) == Package("big", "1.0")
    assert owners.of(str(site / "big" / "data" / "nope.py")) is None


def test_deep_conda_record_is_a_warning_not_an_internal_error(site: Path) -> None:
    """Guarantee: every parser of an input we do not own is bounded; its failure is a per-file warning and
    the report is still printed. A conda-meta record nested 100,000 deep gave RecursionError (CLI: internal
    error, empty report; API: a bare RecursionError)."""
    meta = site / "conda-meta"
    meta.mkdir()
    deep = meta / "deep-1.0-0.json"
    deep.write_text('{"name": "deep", "files": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (meta / "good-1.0-0.json").write_text(json.dumps({"name": "good", "version": "1.0", "files": ["pkga/_a.so"],
                                                      "paths_data": {"paths": [{"_path": "pkga/_a.so"}]}}))
    result = elfpatch.audit(site)
    by_name = {Path(r.path).name: r for r in result.reports}
    assert by_name["_a.so"].package == Package("pkga", "1.0"), "the dist-info RECORD still wins"
    assert any(f"{deep}: nested too deeply" in w for w in by_name["_a.so"].warnings)
    proc = cli("audit", "--json", str(site))
    doc = cli_json(proc.stdout)
    assert proc.returncode == 1 and doc["summary"]["files"] == 4
    assert f"{deep}: nested too deeply" in proc.stderr
    assert {Path(w["path"]).name for w in doc["warnings"] if f"{deep}: nested too deeply" in w["warning"]} == {
        "_a.so", "_b.so", "libcore.so", "_c.so"}, "each file the record could have named carries the warning"
    assert {Path(f["path"]).name for f in doc["files"] if any(f"{deep}: nested too deeply" in w
                                                              for w in f["warnings"])} == {
        "_a.so", "_b.so", "libcore.so", "_c.so"}, "and in its own entry of files, as every command has it"
    proc = cli("unique", "--check", "--json", str(site))
    assert proc.returncode == 1 and len(cli_json(proc.stdout)["files"]) == 4


def test_conda_record_keeps_only_what_it_needs(tmp_path: Path) -> None:
    """A conda-meta record's other fields (paths_data, depends, ...) do not change the owner."""
    env = tmp_path / "env"
    lib = env / "lib" / "libx.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    (env / "conda-meta").mkdir()
    (env / "conda-meta" / "x-2.0-0.json").write_text(json.dumps({
        "depends": [{"name": "other"}], "name": "x", "files": ["lib/libx.so"], "version": "2.0",
        "paths_data": {"paths": [{"_path": "lib/libx.so", "name": "not this"}]}}))
    assert Owners([str(lib)]).of(str(lib)) == Package("x", "2.0")
    assert Owners().of(str(lib)) == Package("x", "2.0")
