"""Fixtures for the audit tests: native_tests/audit built once, and a site-packages of three packages made from
it (dist-info RECORDs), in the test's own temp directory."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import NATIVE
from helpers import native_build

from audit.helpers import site_packages

AUDIT_BUILD = NATIVE / "audit" / "build"


@pytest.fixture(scope="session")
def audit_build() -> Path:
    native_build("audit")
    return AUDIT_BUILD


@pytest.fixture
def site(audit_build: Path, tmp_path: Path) -> Path:
    """pkga 1.0 (_a.so, tinyreg 1), pkgb 2.0 (_b.so, tinyreg 2), pkgc 1.0 (libcore.so, tinyreg 1, and _c.so,
    which only refers to libcore.so's statics)."""
    return site_packages(tmp_path / "site-packages", audit_build)
