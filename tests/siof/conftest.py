"""Fixtures for `inits --dtors/--siof`: native_tests/siof built once per session."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import native_build

from siof.truth import SIOF


@pytest.fixture(scope="session")
def siof_build() -> Path:
    """native_tests/siof/build (compilers that are absent are skipped by the Makefile; the tests say so)."""
    native_build(SIOF.parent.name)
    return SIOF
