"""Fixtures for the `elfpatch inits` tests: the native_tests/init_order builds and their run-time traces."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import native_build


@pytest.fixture(scope="session")
def init_build() -> Path:
    """native_tests/init_order/build with the system toolchain (make is a no-op when up to date)."""
    return native_build("init_order")


@pytest.fixture(scope="session")
def init_cross_build(init_build: Path) -> Path:
    """The cross builds; compilers that are absent are skipped by the Makefile (and the tests say so)."""
    native_build("init_order", "cross")
    return init_build
