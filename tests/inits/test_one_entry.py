"""One builder for a file's `inits` entry: the CLI's JSON `files` and the API's list are built by
elfpatch.inits.entry, so that they cannot drift apart (they were built twice, in api.py and commands/inits.py)."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

from conftest import ROOT, run_cli
from jsonschema_check import cli_json
from unique.lies import shdrs_past_eof

import elfpatch

PACKAGE = ROOT / "elfpatch"


def _builds_an_entry(path: Path) -> bool:
    """Whether the module at ``path`` writes a dict display with ``"status": "listed"``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Dict):
            pairs = zip(node.keys, node.values)
            if any(isinstance(k, ast.Constant) and k.value == "status" and isinstance(v, ast.Constant)
                   and v.value == "listed" for k, v in pairs):
                return True
    return False


def test_the_inits_entry_has_one_builder() -> None:
    """Guarantee: one home for the `inits` file entry (path, status, error, warnings, listing): only
    elfpatch/inits/entry.py builds one; the CLI and the API call it."""
    builders = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if _builds_an_entry(p))
    assert builders == ["inits/entry.py"]


def test_the_api_lists_what_the_cli_lists(init_build: Path, tmp_path: Path) -> None:
    """Guarantee: list_initializers(paths, raise_errors=False) gives the entries `inits --json` gives, for a
    tree, a file with a warning and a missing file alike."""
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copy(init_build / "gnu" / "libchain_base.so", root / "libchain_base.so")
    lied = tmp_path / "prio"
    lied.write_bytes(shdrs_past_eof((init_build / "gnu" / "prio").read_bytes()))
    paths = [str(root), str(lied), str(tmp_path / "missing")]
    proc = run_cli("inits", "--json", *paths)
    assert proc.returncode == 2, proc.stderr
    cli_files = cli_json(proc.stdout)["files"]
    assert [f["status"] for f in cli_files] == ["listed", "listed", "error"] and cli_files[1]["warnings"]
    assert elfpatch.list_initializers(paths, raise_errors=False) == cli_files
