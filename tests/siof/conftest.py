"""Fixtures for `inits --dtors/--siof`: native_tests/siof built once per session."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from siof.truth import SIOF


@pytest.fixture(scope="session")
def siof_build() -> Path:
    """native_tests/siof/build (compilers that are absent are skipped by the Makefile; the tests say so)."""
    subprocess.run(["make", "-s", "-C", str(SIOF.parent)], check=True, stdout=subprocess.DEVNULL)
    return SIOF
