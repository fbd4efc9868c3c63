"""`inits --json`: every warning printed about a file is in that file's `warnings` list as well."""
from __future__ import annotations

import shutil
from pathlib import Path

from helpers import run_main
from jsonschema_check import cli_json
from unique.lies import shdrs_past_eof


def test_inits_warnings_are_in_the_json(init_build: Path, tmp_path: Path) -> None:
    """Guarantee: unusable section headers are said on stderr and in the JSON entry's `warnings` (it used to
    be stderr only); a file without warnings has an empty list."""
    path = tmp_path / "prio"
    shutil.copy(init_build / "gnu" / "prio", path)
    path.write_bytes(shdrs_past_eof(path.read_bytes()))
    proc = run_main("inits", "--json", str(path), str(init_build / "gnu" / "prio"))
    assert proc.returncode == 0, proc.stderr
    lied, honest = cli_json(proc.stdout)["files"]
    printed = [line.split(f"{path}: ", 1)[1] for line in proc.stderr.splitlines()]
    assert lied["warnings"] and lied["warnings"] == printed, (lied["warnings"], proc.stderr)
    assert honest["warnings"] == []
