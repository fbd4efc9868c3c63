"""Shared fixtures: the native_tests builds, and the rule for tests that need cross toolchains."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native_tests"
UNIQUE_BUILD = NATIVE / "unique" / "build"

# Debian's cross toolchains: (fixture dir, compiler prefix, qemu binary, sysroot).
CROSS_ARCHES = {
    "i686": ("i686-linux-gnu", "qemu-i386"),
    "aarch64": ("aarch64-linux-gnu", "qemu-aarch64"),
    "powerpc64": ("powerpc64-linux-gnu", "qemu-ppc64"),
    "s390x": ("s390x-linux-gnu", "qemu-s390x"),
}


def require_tool(*tools: str, packages: str = "g++-<arch>-linux-gnu, qemu-user") -> None:
    """Skip when a tool is missing, except under CI (ELFPATCH_REQUIRE_CROSS=1), where that is a failure."""
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    reason = f"needs {', '.join(missing)} (Debian packages: {packages})"
    if os.environ.get("ELFPATCH_REQUIRE_CROSS"):
        pytest.fail(reason + " but ELFPATCH_REQUIRE_CROSS is set")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def unique_build() -> Path:
    """native_tests/unique/build, built once per session (make is a no-op when it is up to date)."""
    subprocess.run(["make", "-s", "-C", str(NATIVE / "unique")], check=True)
    return UNIQUE_BUILD


@pytest.fixture(scope="session")
def cross_build(unique_build: Path) -> Path:
    subprocess.run(["make", "-s", "-C", str(NATIVE / "unique"), "cross"], check=True, stdout=subprocess.DEVNULL)
    return unique_build


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    """`python -m elfpatch ...` in a child process, as a user would run it."""
    proc = subprocess.run([sys.executable, "-m", "elfpatch", *args], capture_output=True, text=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc
