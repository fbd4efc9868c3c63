"""Shared fixtures: the native_tests builds, and the rule for tests that need cross toolchains."""
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
from hypothesis import settings

# Under CI every hypothesis test draws the same cases, so a CI failure reproduces on any machine; elsewhere the
# draws vary run to run (more ground covered), and a failure prints the blob that replays it.
settings.register_profile("ci", derandomize=True, print_blob=True, database=None)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

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


# Toolchains beyond the native gcc, g++ and binutils that `make test-fast` may not have: a test whose name or
# parameter id names one of these needs it (a64- is the siof fixtures' AArch64 variants).
FOREIGN_TOOLCHAINS = (*CROSS_ARCHES, "a64-", "clang", "lld", "llvm")

# Markers (pyproject's [tool.pytest.ini_options]): `make test-fast` runs `-m "not slow and not cross and not root"`.
# - cross: needs a cross toolchain, qemu, clang, lld or llvm (the cross_build fixture, test_cross.py, a name or
#   parameter id naming one, see FOREIGN_TOOLCHAINS, or an explicit @pytest.mark.cross);
# - slow: all but the first case of a parametrized matrix, hypothesis campaigns (test_fuzz*), kill
#   campaigns, large files, whole system directories, pip installs;
# - root: needs root (chown, setcap, mount, setpriv), marked where the module says so.
SLOW_MODULES = {"test_kill_large.py"}
SLOW_TESTS = {
    "test_memory_stays_bounded_on_a_large_member", "test_spliced_stream_inflates_to_the_edited_bytes",
    "test_system_libraries_match_pyelftools_and_readelf", "test_system_libraries_match_lief",
    "test_a_users_test_file", "test_concurrent_runs_on_one_tree_patch_each_file_once",
    "test_wheel_installs_with_pip_and_its_library_unloads", "test_large_member_reuses_deflate_blocks",
    "test_two_runs_at_once_patch_exactly_once", "test_readme_install_command_gives_a_working_entry_point",
    # the header-lie matrices (lies x with/without .symtab, lies x ELF class and byte order)
    "test_loader_judges_each_lie", "test_loader_view_matches_lief_and_readelf",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seen: set[tuple[str, str]] = set()
    for item in items:
        # A parametrized matrix keeps its first case in `make test-fast`; the rest of it is breadth, for
        # `make test` and CI.
        if getattr(item, "callspec", None) is not None:
            key = (str(item.path), getattr(item, "originalname", item.name))
            if key in seen:
                item.add_marker(pytest.mark.slow)
            seen.add(key)
        fixtures = set(getattr(item, "fixturenames", ()))
        ident = getattr(getattr(item, "callspec", None), "id", "")
        name = getattr(item, "originalname", item.name)
        if "cross_build" in fixtures or item.path.name == "test_cross.py" \
                or any(t in ident or t in name for t in FOREIGN_TOOLCHAINS):
            item.add_marker(pytest.mark.cross)
        if (item.path.name in SLOW_MODULES or name in SLOW_TESTS or name.startswith("test_fuzz")
                or getattr(getattr(item, "function", None), "is_hypothesis_test", False)):
            item.add_marker(pytest.mark.slow)


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


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    """`python -m elfpatch ...` in a child process, as a user would run it."""
    proc = subprocess.run([sys.executable, "-m", "elfpatch", *args], capture_output=True, text=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc
