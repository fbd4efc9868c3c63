"""The README's install command works: the project installs from a checkout with pip, and the installed
`elfpatch` entry point runs (not the checkout's own package). Offline: no build isolation (which would fetch
setuptools), no dependencies (the test environment has them), no index."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, UNIQUE_BUILD


def _checkout_copy(dest: Path) -> Path:
    """The files a checkout has that the build reads (a copy: the build writes build/ and *.egg-info)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "elfpatch", dest / "elfpatch", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.mark.slow  # a pip install
def test_readme_install_command_gives_a_working_entry_point(tmp_path: Path) -> None:
    """Guarantee: `pip install <checkout>` (the README's install) gives an `elfpatch` command that runs its
    own installed copy: `--help`, `--version` and a real `unique --check`. (After `make` alone the command is
    only in .venv/bin, and `pip install elfpatch` fetches nothing: the package is not on PyPI.)"""
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^    pip install \.\s", readme, re.M), "the README's install command"
    assert "pip install elfpatch\"" not in readme and "pip install elfpatch " not in readme
    src = _checkout_copy(tmp_path / "checkout")
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    exe = target / "bin" / "elfpatch"
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run([sys.executable, "-c", "import elfpatch; print(elfpatch.__file__)"], env=env,
                           capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(str(target)), where
    for args in (["--help"], ["unique", "--help"], ["--version"]):
        proc = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout, (args, proc.stderr)
    proc = subprocess.run([str(exe), "unique", "--check", str(UNIQUE_BUILD / "libholder_v1.so")], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1 and "found 4 unique symbols" in proc.stdout, proc.stdout + proc.stderr
    shipped = {p.name for p in (target / "elfpatch" / "schemas").glob("*.json")}
    assert shipped == {"unique.json", "audit.json", "inits.json", "dlcheck.json"}, "each command's JSON Schema"
