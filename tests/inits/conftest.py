"""Fixtures for the `elfpatch inits` tests: the native_tests/init_order builds and their run-time traces."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import native_build

from inits.helpers import BUILD, INIT_ORDER


@pytest.fixture(scope="session")
def init_build() -> Path:
    """native_tests/init_order/build with the system toolchain (make is a no-op when up to date)."""
    native_build(INIT_ORDER.name)
    return BUILD


@pytest.fixture(scope="session")
def init_cross_build(init_build: Path) -> Path:
    """The cross builds; compilers that are absent are skipped by the Makefile (and the tests say so)."""
    native_build(INIT_ORDER.name, "cross")
    return init_build
