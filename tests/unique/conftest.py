"""Fixtures shared by the unique tests."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def lib(unique_build: Path, tmp_path: Path) -> Path:
    """A private copy of libholder_v1.so (unique symbols in .dynsym and .symtab) to patch."""
    p = tmp_path / "libholder_v1.so"
    shutil.copy(unique_build / "libholder_v1.so", p)
    return p


@pytest.fixture
def original(unique_build: Path) -> bytes:
    """libholder_v1.so's bytes, as built."""
    return (unique_build / "libholder_v1.so").read_bytes()


@pytest.fixture
def expected(unique_build: Path, tmp_path: Path) -> bytes:
    """The bytes `elfpatch unique -o` makes of libholder_v1.so, run as root: what every patched copy must be."""
    from unique.adversary import run

    out = tmp_path / "expected.so"
    proc = run("root", "unique", "-o", str(out), str(unique_build / "libholder_v1.so"))
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes()
