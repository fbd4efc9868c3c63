"""Fixtures for the `elfpatch inits` tests: the native_tests/init_order builds and their run-time traces."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from inits.helpers import BUILD, INIT_ORDER


@pytest.fixture(scope="session")
def init_build() -> Path:
    """native_tests/init_order/build with the system toolchain (make is a no-op when up to date)."""
    subprocess.run(["make", "-s", "-C", str(INIT_ORDER)], check=True, stdout=subprocess.DEVNULL)
    return BUILD


@pytest.fixture(scope="session")
def init_cross_build(init_build: Path) -> Path:
    """The cross builds; compilers that are absent are skipped by the Makefile (and the tests say so)."""
    subprocess.run(["make", "-s", "-C", str(INIT_ORDER), "cross"], check=True, stdout=subprocess.DEVNULL)
    return init_build
