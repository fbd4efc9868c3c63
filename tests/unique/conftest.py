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
