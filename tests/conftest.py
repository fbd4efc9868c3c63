"""Shared fixtures: the native_tests builds, the tiers (markers), and running as user nobody."""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import NATIVE, native_build
from helpers import run_cli as run_cli  # its home is helpers.py; imported from here by older modules
from hypothesis import settings

# Under CI every hypothesis test draws the same cases, so a CI failure reproduces on any machine; elsewhere the
# draws vary run to run (more ground covered), and a failure prints the blob that replays it.
settings.register_profile("ci", derandomize=True, print_blob=True, database=None)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

ROOT = Path(__file__).resolve().parent.parent
UNIQUE_BUILD = NATIVE / "unique" / "build"

# Debian's cross toolchains: (fixture dir, compiler prefix, qemu binary, sysroot).
CROSS_ARCHES = {
    "i686": ("i686-linux-gnu", "qemu-i386"),
    "aarch64": ("aarch64-linux-gnu", "qemu-aarch64"),
    "powerpc64": ("powerpc64-linux-gnu", "qemu-ppc64"),
    "s390x": ("s390x-linux-gnu", "qemu-s390x"),
}


# Tiers (markers registered in pyproject, --strict-markers): `make test-fast` runs
# `-m "not slow and not cross and not root"`. Each is declared where the test is, never inferred from a name:
# - cross: needs a cross toolchain, qemu, clang, lld or llvm: `pytestmark`, `@pytest.mark.cross`, or a matrix
#   case built with helpers.case(..., needs=TOOLS);
# - slow: hypothesis and kill campaigns, large files, whole system directories, pip installs: marked where they
#   are; and, the one rule here, every case of a parametrized matrix but its first (breadth, for `make test`
#   and CI; the first case keeps the test in the quick loop);
# - root: needs root (chown, setcap, mount, setpriv), marked where the module says so.
# Two declarations are checked when a test runs (so a new test cannot slip into the quick loop unmarked): a
# hypothesis test must be `slow`, a test of the cross fixtures (the cross_build fixture) must be `cross`.


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The one rule: a parametrized matrix keeps its first case in the quick loop; the rest is breadth (slow)."""
    seen: set[tuple[str, str]] = set()
    for item in items:
        if getattr(item, "callspec", None) is not None:
            key = (str(item.path), getattr(item, "originalname", item.name))
            if key in seen:
                item.add_marker(pytest.mark.slow)
            seen.add(key)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The declarations a tier cannot do without, checked before the test's fixtures are set up."""
    if getattr(getattr(item, "function", None), "is_hypothesis_test", False) and not item.get_closest_marker("slow"):
        pytest.fail("a hypothesis campaign belongs to the slow tier: mark it @pytest.mark.slow", pytrace=False)
    if "cross_build" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("cross"):
        pytest.fail("a test of the cross fixtures (cross_build) needs cross toolchains: mark it @pytest.mark.cross",
                    pytrace=False)


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
    return native_build("unique")


@pytest.fixture(scope="session")
def cross_build(unique_build: Path) -> Path:
    """The cross-compiled fixtures (native_tests/unique's `cross` target); only for tests marked `cross`."""
    native_build("unique", "cross")
    return unique_build


NOBODY = 65534  # uid of nobody and gid of nogroup on Debian


def _reachable_by_nobody(python: str) -> bool:
    proc = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c",
                           "import sys; assert sys.version_info >= (3, 9)"], capture_output=True, cwd="/")
    return proc.returncode == 0


@functools.cache
def nobody_interpreter() -> str:
    """An interpreter user nobody can run: the checkout's venv, or the one it points at, may sit where nobody
    cannot enter (a 0700 home, pyenv under /root); `unique` needs only the standard library."""
    if shutil.which("setpriv") is None:
        require_tool("setpriv", packages="util-linux")
    candidates = [sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"]
    for candidate in candidates:
        if os.path.exists(candidate) and _reachable_by_nobody(candidate):
            return candidate
    pytest.fail(f"no Python interpreter that user nobody can run among {candidates}")


@functools.cache
def nobody_package(source: Path = ROOT) -> Path:
    """A world-readable copy of ``source``'s elfpatch package, once per session (removed at exit): the
    checkout may sit in a directory nobody cannot enter (`mktemp -d`, a Debian 12 home directory)."""
    home = Path(tempfile.mkdtemp(prefix="elfpatch-nobody-", dir="/tmp"))
    atexit.register(shutil.rmtree, home, True)
    shutil.copytree(source / "elfpatch", home / "elfpatch", ignore=shutil.ignore_patterns("__pycache__"))
    for p in [home, *home.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return home


@pytest.fixture(scope="session")
def nobody_python() -> tuple[str, Path]:
    """(interpreter, directory holding the package) for runs as user nobody."""
    return nobody_interpreter(), nobody_package()


def run_as_nobody(nobody_python: tuple[str, Path], *args: str, cwd: str | None = None,
                  timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m elfpatch ...` as uid/gid 65534 with no supplementary groups (no DAC override)."""
    python, home = nobody_python
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(home), PYTHONNOUSERSITE="1")
    proc = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                           python, "-m", "elfpatch", *args],
                          capture_output=True, text=True, cwd=cwd or str(home), env=env, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc
