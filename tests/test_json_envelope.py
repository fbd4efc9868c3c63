"""The one envelope of every command's ``--json`` document: ``schema``, ``files`` (one entry per file, with
``path``, ``status``, ``error`` and ``warnings``) and ``summary`` (``files``, ``errors``); cli_json holds each
document to its command's shipped JSON Schema and to those counts."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import UNIQUE_BUILD, run_cli
from jsonschema_check import cli_json

# Each command as a user gates on it, and the status its good file gets (libholder_v1.so: unique symbols).
COMMANDS = {
    "unique": (["unique", "--check"], "found"),
    "audit": (["audit"], "found"),
    "inits": (["inits"], "listed"),
    "dlcheck": (["dlcheck"], "stayed"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_failed_file_stays_in_files(command: str, tmp_path: Path) -> None:
    """Guarantee: a file that fails keeps its place in ``files`` (status "error", the reason in ``error``,
    its own ``warnings``) and is counted in ``summary.files`` and ``summary.errors``, in every command: before,
    ``inits`` dropped it (``summary.files`` 1 while ``errors`` 1), ``audit`` had no ``files`` and ``dlcheck``
    no ``summary``; none named its schema."""
    good = tmp_path / "libholder_v1.so"
    shutil.copy(UNIQUE_BUILD / "libholder_v1.so", good)
    missing = tmp_path / "missing.so"
    args, status = COMMANDS[command]
    proc = run_cli(*args, "--json", str(good), str(missing))
    assert proc.returncode == 2, proc.stderr
    doc = cli_json(proc.stdout)
    assert doc["schema"] == f"elfpatch/{command}/1"
    ok, failed = doc["files"]
    assert (ok["path"], ok["status"], ok["error"]) == (str(good), status, None)
    assert (failed["path"], failed["status"]) == (str(missing), "error")
    assert "No such file or directory" in failed["error"] and failed["warnings"] == []
    assert (doc["summary"]["files"], doc["summary"]["errors"]) == (2, 1)
    assert f"elfpatch: error: {missing}: " in proc.stderr, "the stderr line is still there"


def test_a_document_that_breaks_its_schema_is_caught() -> None:
    """The check the other tests rely on can fail: a document without its envelope, one whose error entry has
    no reason, and one whose summary miscounts are each refused."""
    good = cli_json(run_cli("inits", "--json", str(UNIQUE_BUILD / "libholder_v1.so"), check=True).stdout)
    for broken in ({"files": good["files"], "summary": good["summary"]},
                   {**good, "files": [{**good["files"][0], "status": "error"}]},
                   {**good, "summary": {**good["summary"], "files": 2}}):
        with pytest.raises(AssertionError):
            cli_json(json.dumps(broken))
