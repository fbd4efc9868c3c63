"""The shared test helpers (tests/helpers.py), held to what they claim: section headers dropped from either
ELF class in either byte order, and the in-process CLI run reporting what a child process would."""
from __future__ import annotations

import io
import os
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from helpers import build_lock, drop_section_headers, native_build, run_cli, run_main

# (EI_CLASS, EI_DATA, e_machine): x86-64, 64-bit PowerPC (big-endian), i386, 32-bit PowerPC (big-endian).
SHAPES = {"64-lsb": (2, 1, 62), "64-msb": (2, 2, 21), "32-lsb": (1, 1, 3), "32-msb": (1, 2, 20)}
FIELDS = ("e_type", "e_machine", "e_version", "e_entry", "e_phoff", "e_shoff", "e_flags", "e_ehsize",
          "e_phentsize", "e_phnum", "e_shentsize", "e_shnum", "e_shstrndx")


def elf_header(elf_class: int, elf_data: int, machine: int) -> tuple[bytes, dict[str, int]]:
    """A file of 4 KiB that starts with an ELF header (gABI layout) whose every field is non-zero."""
    layout = "HHIQQQIHHHHHH" if elf_class == 2 else "HHIIIIIHHHHHH"
    ehsize = 16 + struct.calcsize(layout)
    values = dict(zip(FIELDS, (3, machine, 1, 0x1234, ehsize, 0x800, 0x5, ehsize,
                               56 if elf_class == 2 else 32, 0, 64 if elf_class == 2 else 40, 9, 8)))
    ident = b"\x7fELF" + bytes([elf_class, elf_data, 1]) + bytes(9)
    order = "<" if elf_data == 1 else ">"
    return (ident + struct.pack(order + layout, *values.values())).ljust(4096, b"\0"), values


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_drop_section_headers_zeroes_only_the_section_header_fields(tmp_path: Path, shape: str) -> None:
    """Guarantee: e_shoff, e_shnum and e_shstrndx read 0 afterwards (read by pyelftools), and every other
    header field and byte keeps its value, for ELFCLASS32 and ELFCLASS64 in either byte order."""
    image, values = elf_header(*SHAPES[shape])
    path = tmp_path / "lib.so"
    path.write_bytes(image)
    drop_section_headers(path)
    after = path.read_bytes()
    header = ELFFile(io.BytesIO(after)).header
    expected = dict(values, e_shoff=0, e_shnum=0, e_shstrndx=0)
    assert {f: header[f] for f in FIELDS if f not in ("e_type", "e_machine", "e_version")} == \
        {f: expected[f] for f in FIELDS if f not in ("e_type", "e_machine", "e_version")}
    changed = [i for i, (x, y) in enumerate(zip(image, after)) if x != y]
    assert len(after) == len(image) and changed and max(changed) < values["e_ehsize"]


@pytest.mark.parametrize("args", [("--version",), ("unique", "--check", "/nonexistent/lib.so"), ("unique",),
                                  ("inits", "--json", "/nonexistent/lib.so"), ("no-such-command",)],
                         ids=["version", "missing-file", "usage-error", "json-error", "unknown-command"])
def test_run_main_reports_what_the_child_process_does(args: tuple[str, ...]) -> None:
    """Guarantee: the in-process run gives the exit status, stdout and stderr a user's `python -m elfpatch`
    gives: success, a missing file, a usage error, an unknown command."""
    child, here = run_cli(*args), run_main(*args)
    assert (here.returncode, here.stdout, here.stderr) == (child.returncode, child.stdout, child.stderr)


def test_run_main_leaves_no_warning_handler_behind(tmp_path: Path) -> None:
    """Guarantee: the CLI's warning line handler is the run's only: the library's logger afterwards is as it
    was, so a later API call in the same process does not print."""
    import logging

    log = logging.getLogger("elfpatch")
    before = (log.handlers[:], log.level, log.propagate)
    (tmp_path / "empty.so").write_bytes(b"")
    run_main("unique", "--check", str(tmp_path / "empty.so"))
    assert (log.handlers, log.level, log.propagate) == before


# A topic whose recipe would fail if run twice at once (`mkdir` without -p) and logs each of its runs.
RACY_MAKEFILE = "build/out.txt:\n\tmkdir build\n\techo ran >> runs.log\n\tprintf 'one\\ntwo\\n' > build/out.txt\n"
BOUND = 120  # seconds: a bound so that a failure cannot hang the suite, never a measure of speed


def flock_waiters(pid: int) -> int:
    """How many flock requests of process ``pid`` are waiting (``->`` lines of /proc/locks)."""
    with open("/proc/locks") as f:  # "N: -> FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END"
        return sum(1 for fields in map(str.split, f) if fields[1:3] == ["->", "FLOCK"] and fields[5] == str(pid))


def test_concurrent_builds_of_one_topic_take_turns(tmp_path: Path) -> None:
    """Guarantee: two native_build calls of the same topic at once (two pytest-xdist workers without `make
    fixtures` first) both succeed with one result: the second waits for the first and finds it up to date.
    Deterministic: the test holds the topic's lock until /proc/locks shows both builds waiting for it."""
    topic = tmp_path / "racy"
    topic.mkdir()
    (topic / "Makefile").write_text(RACY_MAKEFILE)
    with ThreadPoolExecutor(2) as pool:
        with build_lock(topic):
            builds = [pool.submit(native_build, "racy", root=tmp_path) for _ in range(2)]
            deadline = time.monotonic() + BOUND
            while flock_waiters(os.getpid()) < 2 and time.monotonic() < deadline and not any(
                    b.done() for b in builds):
                time.sleep(0.01)
            assert flock_waiters(os.getpid()) == 2, "the builds did not wait for the topic's lock"
        assert [b.result(timeout=BOUND) for b in builds] == [topic / "build"] * 2
    assert (topic / "runs.log").read_text() == "ran\n"
    assert (topic / "build" / "out.txt").read_text() == "one\ntwo\n"
