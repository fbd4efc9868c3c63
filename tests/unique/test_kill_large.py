"""SIGKILL during a run on a ~100 MB library (and a wheel holding it), at every phase of the run for sure.

Each kill is aimed with the test-only stop point (ELFPATCH_TEST_STOP=PHASE, elfpatch.fs.teststop): the run stops
itself at the phase, the test checks where it is (for ``copying``: the run's own temp, seen through
/proc/PID/fd, is shorter than the file), then SIGKILLs it. No timer decides which phase is hit, so the
campaign holds on a loaded machine.

- Default mode: the file is byte-identical to the original (every phase before the rename) or to the fully
  patched file (after it), never anything else; the only phase that leaves a temp beside it is the one between
  naming the unnamed temp and renaming it; the next run removes that temp and leaves the file patched.
- ``--inplace``: weaker guarantee, each `st_info` byte is old or new and no other byte changes (killed after
  the first byte write: a mix); the next run completes the patch exactly.
- A wheel: the same all-or-nothing rule as the default mode.
- An extra seeded random campaign kills at moments scaled by an uninterrupted run; it checks the same
  invariants but asserts nothing about which phases it happened to hit (it reports them, `pytest -s`).
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest
from conftest import ROOT, run_cli
from targets.helpers import build_wheel, file_digest, readelf_unique, wheel_files

import elfpatch

pytestmark = pytest.mark.slow  # kill campaigns on a 100 MB library

BLOB = 100_000_000  # bytes of random data in .rodata: the library is ~100 MB
SEED = 20240611
# Phases of a default-mode run, in order (elfpatch.fs.teststop); the file is the original until "renamed".
PHASES = ("locked", "mapped", "temp", "copying", "written", "verified", "linked", "renamed")
WHEEL_PHASES = ("locked", "mapped", "temp", "written", "verified", "linked", "renamed")

RecordProperty = Callable[[str, object], None]  # pytest's record_property fixture

SOURCE = r"""
template <typename T> struct Holder { static T value; };
template <typename T> T Holder<T>::value = T(1);
inline int& counter() { static int c = 0; return ++c, c; }
inline long& other() { static long o = 7; return o; }
asm(".section .rodata.blob,\"a\",@progbits\n"
    ".globl big_blob\n.type big_blob,@object\nbig_blob:\n"
    ".incbin \"BLOB_PATH\"\n"
    ".size big_blob, .-big_blob\n.previous\n");
extern "C" const unsigned char big_blob[];
extern "C" int touch(int i) {
    return Holder<int>::value + int(Holder<long>::value) + counter() + int(other()) + big_blob[i];
}
"""

def diff_offsets(a: Path, b: Path) -> list[tuple[int, int, int]]:
    """(offset, byte in a, byte in b) wherever two files of one size differ."""
    out = []
    with open(a, "rb") as fa, open(b, "rb") as fb:
        pos = 0
        while chunk_a := fa.read(1 << 20):
            chunk_b = fb.read(1 << 20)
            if chunk_a != chunk_b:
                out += [(pos + i, x, y) for i, (x, y) in enumerate(zip(chunk_a, chunk_b)) if x != y]
            pos += len(chunk_a)
    return out



@dataclass
class Big:
    pristine: Path
    patched: Path  # the result of an uninterrupted default-mode run
    size: int
    original_digest: str
    patched_digest: str
    edits: list[tuple[int, int, int]]  # (offset, old, new) of the st_info bytes a run changes
    total: float  # seconds of an uninterrupted run (scales the random campaign only)


def elfpatch_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "elfpatch", "unique", *args]


class Run:
    """`elfpatch unique ...` stopped at a phase (``stopped``), or finished without reaching it."""

    def __init__(self, cmd: list[str], phase: str) -> None:
        env = dict(os.environ, ELFPATCH_TEST_STOP=phase)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                     env=env)
        _, status = os.waitpid(self.proc.pid, os.WUNTRACED)
        self.stopped = os.WIFSTOPPED(status)
        if not self.stopped:
            self.proc.returncode = os.waitstatus_to_exitcode(status)

    def temp_size(self) -> int | None:
        """The size of the run's own temp file (an unnamed O_TMPFILE or a named one), from /proc/PID/fd."""
        fds = Path(f"/proc/{self.proc.pid}/fd")
        for fd in fds.iterdir():
            try:
                if ".elfpatch-" in os.readlink(fd) or "#" in os.readlink(fd):
                    return os.stat(fd).st_size
            except OSError:
                continue
        return None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.communicate()


def temps(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if ".elfpatch-" in n]


def kill_at_phases(target: Path, pristine: Path, expected: Path, phases: tuple[str, ...], args: tuple[str, ...] = ()
                   ) -> list[str]:
    """Kill a run over ``target`` at each phase, on a fresh original each time; check the file is whole (the
    original before the rename, the patched file after), and that only a kill between link and rename leaves a
    temp; then the next run cleans up and patches. Returns a line per phase."""
    original, patched = file_digest(pristine), file_digest(expected)
    lines = []
    for phase in phases:
        shutil.copyfile(pristine, target)
        run = Run(elfpatch_cmd(*args, str(target)), phase)
        assert run.stopped, f"phase {phase} was not reached: {run.proc.communicate()[1]}"
        note = ""
        if phase == "copying":
            size = run.temp_size()
            assert size is not None and 0 < size < pristine.stat().st_size, size
            note = f" (temp {size / 1e6:.0f} of {pristine.stat().st_size / 1e6:.0f} MB)"
        run.kill()
        digest = file_digest(target)
        assert digest == (patched if phase == "renamed" else original), phase
        left = temps(target.parent)
        assert len(left) == (phase == "linked"), (phase, left)
        lines.append(f"{phase}: {'patched' if digest == patched else 'original'}, {len(left)} temp{note}")
    run_cli("unique", *args, str(target), check=True)
    assert file_digest(target) == patched and temps(target.parent) == []
    return lines


def random_campaign(target: Path, pristine: Path, expected: Path, total: float, n: int, seed: int) -> str:
    """Extra: kills at seeded random moments in [0, 1.2 T]. Same invariants; which phase each kill hit is only
    counted, never asserted (on a loaded machine a timer cannot aim)."""
    rng = random.Random(seed)
    original, patched = file_digest(pristine), file_digest(expected)
    counts = {"original": 0, "patched": 0, "finished": 0}
    for _ in range(n):
        shutil.copyfile(pristine, target)
        proc = subprocess.Popen(elfpatch_cmd(str(target)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, cwd=ROOT)
        time.sleep(rng.uniform(0, 1.2 * total))
        proc.kill()
        _, err = proc.communicate()
        assert proc.returncode in (0, -signal.SIGKILL), err
        digest = file_digest(target)
        assert digest in (original, patched)
        counts["finished" if proc.returncode == 0 else "patched" if digest == patched else "original"] += 1
    run_cli("unique", str(target), check=True)
    assert file_digest(target) == patched and temps(target.parent) == []
    return ", ".join(f"{v} {k}" for k, v in counts.items())


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Big]:
    """A ~100 MB shared library with 4 unique symbols (each in .dynsym and .symtab, so 8 st_info bytes, at
    both ends of the file): a few template statics and static locals, and random bytes pulled in with
    .incbin (random, so that nothing in the file is sparse or compressible). Builds in about a second."""
    d = tmp_path_factory.mktemp("big_unique")
    blob = d / "blob.bin"
    with open(blob, "wb") as f:
        for start in range(0, BLOB, 1 << 24):
            f.write(os.urandom(min(1 << 24, BLOB - start)))
    src = d / "big.cpp"
    src.write_text(SOURCE.replace("BLOB_PATH", str(blob)))
    pristine = d / "libbigunique.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", str(pristine), str(src)], check=True)
    blob.unlink()
    size = pristine.stat().st_size
    assert size >= 50_000_000
    assert readelf_unique(pristine) == 8
    (report,) = elfpatch.scan(pristine)
    assert len(report.symbols) == 8 and {s.from_ for s in report.symbols} == {"UNIQUE"}

    # The expected result, once with -o and once by an uninterrupted (timed) run on a fresh copy.
    via_output = d / "out" / pristine.name
    via_output.parent.mkdir()
    run_cli("unique", "-o", str(via_output), str(pristine), check=True)
    work = d / "timing"
    work.mkdir()
    target = work / pristine.name
    shutil.copyfile(pristine, target)
    t0 = time.monotonic()
    run_cli("unique", str(target), check=True)
    total = time.monotonic() - t0  # only to scale the extra random campaign
    patched_digest = file_digest(target)
    assert patched_digest == file_digest(via_output)
    assert os.listdir(work) == [target.name]
    edits = diff_offsets(pristine, target)
    # Exactly the 8 st_info bytes, each only in its binding nibble: UNIQUE (10) -> GLOBAL (1).
    assert len(edits) == 8
    assert all(old >> 4 == 10 and new >> 4 == 1 and old & 15 == new & 15 for _, old, new in edits)
    yield Big(pristine, via_output, size, file_digest(pristine), patched_digest, edits, total)
    shutil.rmtree(d)  # pytest keeps the last three sessions' temp dirs: not 100 MB files each


def report(record_property: RecordProperty, line: str) -> None:
    print("\n" + line)
    record_property("kills", line)


def test_kill_default_mode_large(big: Big, tmp_path: Path, record_property: RecordProperty) -> None:
    target = tmp_path / "work" / big.pristine.name
    target.parent.mkdir()
    lines = kill_at_phases(target, big.pristine, big.patched, PHASES)
    extra = random_campaign(target, big.pristine, big.patched, big.total, 6, SEED)
    report(record_property, f"default mode, {big.size / 1e6:.0f} MB: " + "; ".join(lines) + f"; random: {extra}")
    shutil.rmtree(target.parent)


def check_old_or_new(target: Path, big: Big) -> int:
    """Every st_info byte old or new, every other byte the original's; how many are new."""
    data = bytearray(target.read_bytes())
    assert len(data) == big.size
    new = 0
    for offset, old, patched in big.edits:
        assert data[offset] in (old, patched), f"byte at {offset:#x} is neither old nor new"
        new += data[offset] == patched
        data[offset] = old
    assert hashlib.sha256(data).hexdigest() == big.original_digest, "a byte other than st_info changed"
    return new


def test_kill_inplace_large(big: Big, tmp_path: Path, record_property: RecordProperty) -> None:
    """--inplace killed at its phases: before any write (original), after the first byte write (a mix: each
    st_info byte old or new, no other byte changed); the inode is kept, nothing is left beside it, and the
    next --inplace run completes the patch exactly."""
    work = tmp_path / "work"
    work.mkdir()
    target = work / big.pristine.name
    lines = []
    for phase, want in (("locked", 0), ("mapped", 0), ("inplace", 1)):
        shutil.copyfile(big.pristine, target)
        inode = target.stat().st_ino
        run = Run(elfpatch_cmd("--inplace", str(target)), phase)
        assert run.stopped, f"phase {phase} was not reached"
        run.kill()
        assert target.stat().st_ino == inode and os.listdir(work) == [target.name]
        new = check_old_or_new(target, big)
        assert new == want, (phase, new)
        lines.append(f"{phase}: {new} of {len(big.edits)} bytes new")
        run_cli("unique", "--inplace", str(target), check=True)
        assert file_digest(target) == big.patched_digest and target.stat().st_ino == inode
    report(record_property, "--inplace: " + "; ".join(lines))
    shutil.rmtree(work)


def test_kill_wheel_large(big: Big, tmp_path: Path, record_property: RecordProperty) -> None:
    """A ~100 MB wheel (the library deflated) killed at each phase: the wheel is the original or the result
    of an uninterrupted run, byte for byte; the next run removes what a killed run left."""
    src = tmp_path / "src"
    src.mkdir()
    pristine = build_wheel(src, wheel_files(big.pristine))
    out = tmp_path / "out" / pristine.name
    out.parent.mkdir()
    run_cli("unique", "-o", str(out), str(pristine), check=True)
    target = tmp_path / "work" / pristine.name
    target.parent.mkdir()
    assert file_digest(out) != file_digest(pristine)
    lines = kill_at_phases(target, pristine, out, WHEEL_PHASES)
    report(record_property, f"wheel, {pristine.stat().st_size / 1e6:.0f} MB: " + "; ".join(lines))
    for directory in (src, out.parent, target.parent):
        shutil.rmtree(directory)
