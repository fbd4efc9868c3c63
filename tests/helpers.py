"""What many test modules need, in one place: running the CLI (in a child process, or in this process where a
child proves nothing more), the native fixtures' builds, a matrix case that needs a foreign toolchain, and ELF
header surgery."""
from __future__ import annotations

import fcntl
import io
import logging
import os
import struct
import subprocess
import sys
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest

NATIVE = Path(__file__).resolve().parent.parent / "native_tests"
NEVER_HANG = 300  # seconds; a run this long has hung (a test of speed is a benchmark, not a test)

# What `make test-fast` may assume: the native GNU toolchain. A case needing any other tool (clang, lld, llvm,
# a cross compiler, qemu-user) is marked `cross`.
NATIVE_TOOLS = frozenset({"gcc", "g++", "cc", "c++", "as", "ld", "ar", "nm", "objcopy", "objdump", "readelf",
                          "strip", "make"})


def case(*values: Any, needs: Iterable[str] = (), id: str | None = None) -> Any:
    """One case of a parametrized matrix that runs ``needs``: marked `cross` when one of them is not native."""
    foreign = sorted(set(needs) - NATIVE_TOOLS)
    return pytest.param(*values, id=id, marks=[pytest.mark.cross] if foreign else [])


def native_build(topic: str, target: str | None = None, *, root: Path = NATIVE) -> Path:
    """native_tests/<topic>/build after `make` there (``target``: e.g. "cross"; ``root``: another tree of
    topics). `make fixtures` builds every native topic before pytest starts, so here it is mostly a no-op; when
    it was not run, pytest-xdist workers that need the same topic take turns (``build_lock``): the first
    builds, the others find it up to date. A compiler that is absent is passed over by the topic's Makefile
    and the tests that need it say so."""
    where = root / topic
    with build_lock(where):
        subprocess.run(["make", "-s", "-C", str(where), *([target] if target else [])], check=True,
                       stdout=subprocess.DEVNULL)
    return where / "build"


@contextmanager
def build_lock(topic: Path) -> Iterator[None]:
    """An exclusive flock on the topic's directory (every target of its Makefile writes under it): two makes
    of one topic at once would each write the same objects, and one could link the other's half-written
    file. The directory itself is locked, so no lock file is left in the tree; the lock goes with the
    descriptor, also when the process dies."""
    fd = os.open(topic, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _no_crash(stderr: str) -> None:
    """The CLI's contract for every input: one-line errors, never a traceback nor an `internal error`."""
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr


def run_cli(*args: str, check: bool = False, env: dict[str, str] | None = None, cwd: str | Path | None = None,
            timeout: float = NEVER_HANG) -> subprocess.CompletedProcess[str]:
    """`python -m elfpatch ARGS` in a child process, as a user runs it: for what only a process shows (its
    start-up and imports, signals, locks held between processes, the environment, an install)."""
    proc = subprocess.run([sys.executable, "-m", "elfpatch", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)
    _no_crash(proc.stderr)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def run_main(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`elfpatch ARGS` in this process: ``elfpatch.cli.main(argv)`` with stdout, stderr and the exit status
    captured, as run_cli returns them, for tests of what a command does to files and prints. An exception
    that would be an `internal error` propagates (ELFPATCH_DEBUG), so the test shows its traceback."""
    from elfpatch import cli, errors

    out, err = io.StringIO(), io.StringIO()
    log = logging.getLogger("elfpatch")
    saved = (log.handlers[:], log.level, log.propagate, errors._ON_FIRST_USE[:], os.environ.get("ELFPATCH_DEBUG"))
    os.environ["ELFPATCH_DEBUG"] = "1"
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = cli.main(list(args))
    finally:  # the CLI's warning handler stays with the run, not with the tests that follow it
        log.handlers[:], log.level, log.propagate, errors._ON_FIRST_USE[:] = saved[:4]
        if saved[4] is None:
            del os.environ["ELFPATCH_DEBUG"]
        else:
            os.environ["ELFPATCH_DEBUG"] = saved[4]
    proc = subprocess.CompletedProcess(["elfpatch", *args], status, out.getvalue(), err.getvalue())
    for text in (proc.stdout, proc.stderr):
        text.encode("utf-8")  # what a child's UTF-8 stdout would refuse (a lone surrogate), refused here too
    _no_crash(proc.stderr)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


# ELF header fields that locate the section headers (gABI, "ELF Header"): (e_shoff, its format, e_shnum);
# e_shstrndx follows e_shnum.
_SHDR_FIELDS = {1: (0x20, "I", 0x30), 2: (0x28, "Q", 0x3C)}  # ELFCLASS32, ELFCLASS64
_BYTE_ORDER = {1: "<", 2: ">"}  # ELFDATA2LSB, ELFDATA2MSB
EI_CLASS, EI_DATA = 4, 5


def drop_section_headers(path: Path) -> None:
    """Zero e_shoff, e_shnum and e_shstrndx, as sstrip-like tools do (glibc loads such files): for either ELF
    class and either byte order, as e_ident says."""
    data = bytearray(path.read_bytes())
    e_shoff, shoff_format, e_shnum = _SHDR_FIELDS[data[EI_CLASS]]
    order = _BYTE_ORDER[data[EI_DATA]]
    struct.pack_into(order + shoff_format, data, e_shoff, 0)
    struct.pack_into(order + "HH", data, e_shnum, 0, 0)
    path.write_bytes(bytes(data))


# The CLI as it runs where the file system keeps no user.* extended attributes (vfat, some network and
# container file systems; tmpfs before Linux 6.6): every user.* call fails with EOPNOTSUPP, as there.
NO_USER_XATTRS = """
import errno, os, sys
def refuse(real):
    def call(target, name, *args, **kwargs):
        if str(name).startswith("user."):
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        return real(target, name, *args, **kwargs)
    return call
os.setxattr, os.getxattr, os.removexattr = map(refuse, (os.setxattr, os.getxattr, os.removexattr))
listed = os.listxattr
os.listxattr = lambda *args, **kwargs: [n for n in listed(*args, **kwargs) if not n.startswith("user.")]
from elfpatch.cli import main
sys.exit(main(sys.argv[1:]))
"""
