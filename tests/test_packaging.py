"""What the built distribution holds: the PEP 561 marker that makes the package's annotations its users' types."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT


@pytest.mark.slow
def test_wheel_ships_py_typed(tmp_path: Path) -> None:
    """The wheel built from the source holds elfpatch/py.typed (declared as package data, not only on disk)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "elfpatch", src / "elfpatch", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(src)], check=True, capture_output=True)
    (wheel,) = out.glob("elfpatch-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert "elfpatch/py.typed" in zf.namelist()
