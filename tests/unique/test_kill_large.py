"""SIGKILL at random moments of a run on a ~100 MB library (and a wheel holding it): the kill lands in the
middle of the copy, not only before or after it as it does with the 16 KB library of test_safety.py.

- Default mode: the file is byte-identical to the original or to the fully patched file, never anything else;
  a killed run's temp file is named `.NAME.elfpatch-PID-HEX.tmp` (PID of a killed run), and the next run removes
  every such temp and leaves the file patched.
- ``--inplace``: weaker guarantee, each `st_info` byte is old or new and no other byte changes; the next run
  completes the patch exactly. Some runs get a slowed `os.pwrite` so that kills land between the byte writes.
- A wheel: the same all-or-nothing rule as the default mode.

Delays are seeded and scaled by the measured duration of an uninterrupted run; as a run's phases are only a few
tens of milliseconds long, a few extra kills aimed at a phase are added when the random ones missed it. The
outcome counts are printed (`pytest -s`) and recorded as properties ("kills").
"""
from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest
from conftest import ROOT, run_cli
from targets.helpers import build_wheel, file_digest, readelf_unique, wheel_files

import elfpatch

BLOB = 100_000_000  # bytes of random data in .rodata: the library is ~100 MB
SEED = 20240611
FIXED_DELAYS = (0.0, 0.001, 0.005)
MAX_EXTRA = 20  # kills aimed at a phase the random delays missed, per phase
# Where a kill of an atomic run can land, in time order: before its temp exists, while the temp is shorter than
# the file (the copy), once it is whole (edits, verification), after the rename, after the exit.
PHASES = ("before", "copying", "written", "after", "finished")
SLOW_WRITE = 0.005  # seconds slept before each pwrite in the slowed --inplace runs

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

# `python -m elfpatch` with every os.pwrite delayed: write.py looks os.pwrite up at each call.
SLOW_PWRITE = (
    "import os, runpy, time\n"
    "real = os.pwrite\n"
    "def slow(fd, data, offset):\n"
    f"    time.sleep({SLOW_WRITE!r})\n"
    "    return real(fd, data, offset)\n"
    "os.pwrite = slow\n"
    "runpy.run_module('elfpatch', run_name='__main__', alter_sys=True)\n"
)


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


def temp_re(target: Path) -> re.Pattern[str]:
    return re.compile(rf"^\.{re.escape(target.name)}\.elfpatch-(\d+)-[0-9a-f]{{8}}\.tmp$")


@dataclass
class Phases:
    """Seconds from Popen: the temp file appears, it is renamed into place, the process has exited."""

    temp: float
    rename: float
    total: float


@dataclass
class Big:
    pristine: Path
    patched: Path  # the result of an uninterrupted default-mode run
    size: int
    original_digest: str
    patched_digest: str
    edits: list[tuple[int, int, int]]  # (offset, old, new) of the st_info bytes a run changes
    phases: Phases


@dataclass
class Tally:
    original: int = 0
    patched: int = 0  # killed after the rename
    finished: int = 0  # exited (patched) before the signal was sent
    temps: int = 0  # kills that left their own temp file
    partial: int = 0  # of them, temps shorter than the file: killed in the middle of the copy (or wheel write)
    extra: int = 0  # kills aimed at a missed phase
    killed_pids: set[int] = field(default_factory=set)

    def line(self, what: str) -> str:
        return (f"{what}: {self.original} original, {self.patched} patched, {self.finished} finished before the "
                f"kill, temps seen {self.temps} ({self.partial} partial), {self.extra} aimed kills")


def elfpatch_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "elfpatch", "unique", *args]


def kill_after(cmd: list[str], delay: float) -> tuple[int, int, str]:
    """Start ``cmd``, SIGKILL it after ``delay`` s (unless it is done); (pid, return code, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    time.sleep(delay)
    proc.kill()  # a no-op once it has exited
    _, err = proc.communicate()
    return proc.pid, proc.returncode, err


def time_run(cmd: list[str], target: Path) -> Phases:
    """One uninterrupted run, its directory polled every 0.5 ms to see when its temp appears and goes."""
    directory = target.parent
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen = gone = None
    while proc.poll() is None:
        now = time.monotonic() - t0
        tmp = any(n.endswith(".tmp") for n in os.listdir(directory))
        if tmp and seen is None:
            seen = now
        elif not tmp and seen is not None and gone is None:
            gone = now
        time.sleep(0.0005)
    total = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr.read()
    proc.stderr.close()
    # A phase shorter than the polling step was not seen: place it just before the end.
    seen = total * 0.6 if seen is None else seen
    gone = max(seen, total * 0.7) if gone is None else gone
    return Phases(seen, gone, total)


def median_phases(cmd: list[str], target: Path, pristine: Path, runs: int = 3) -> Phases:
    timed = []
    for _ in range(runs):
        shutil.copyfile(pristine, target)
        timed.append(time_run(cmd, target))
    timed.sort(key=lambda p: p.total)
    return timed[len(timed) // 2]


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
    phases = median_phases(elfpatch_cmd(str(target)), target, pristine)
    patched_digest = file_digest(target)
    assert patched_digest == file_digest(via_output)
    assert os.listdir(work) == [target.name]
    edits = diff_offsets(pristine, target)
    # Exactly the 8 st_info bytes, each only in its binding nibble: UNIQUE (10) -> GLOBAL (1).
    assert len(edits) == 8
    assert all(old >> 4 == 10 and new >> 4 == 1 and old & 15 == new & 15 for _, old, new in edits)
    yield Big(pristine, via_output, size, file_digest(pristine), patched_digest, edits, phases)
    shutil.rmtree(d)  # pytest keeps the last three sessions' temp dirs: not 100 MB files each


def delays_for(rng: random.Random, phases: Phases, uniform: int, in_window: int, after: int) -> list[float]:
    """The fixed early delays, ``uniform`` over [0, 1.1 T], and, since a run's phases are short, ``in_window``
    while the temp is written and ``after`` between the rename and the exit."""
    delays = list(FIXED_DELAYS)
    delays += [rng.uniform(0, 1.1 * phases.total) for _ in range(uniform)]
    delays += [rng.uniform(phases.temp, phases.rename) for _ in range(in_window)]
    delays += [rng.uniform(phases.rename, phases.total) for _ in range(after)]
    rng.shuffle(delays)
    return delays


def aim(rng: random.Random, lo: float, hi: float, attempt: Callable[[float], int]) -> int:
    """Kill at delays in [lo, hi] until ``attempt(delay)`` says it hit the phase wanted (0), narrowing the range
    on each miss (< 0: too early, > 0: too late), as the measured phases drift with the machine's load; at most
    MAX_EXTRA kills. Returns how many were made."""
    for n in range(1, MAX_EXTRA + 1):
        if hi - lo < 0.01:  # collapsed on a noisy boundary: reopen it a little
            mid = (lo + hi) / 2
            lo, hi = max(0.0, mid - 0.01), mid + 0.01
        delay = rng.uniform(lo + (hi - lo) / 4, hi - (hi - lo) / 4)
        got = attempt(delay)
        if got == 0:
            return n
        lo, hi = (delay, hi) if got < 0 else (lo, delay)
    return MAX_EXTRA


def kill_campaign(target: Path, pristine: Path, expected: Path, phases: Phases, delays: list[float],
                  rng: random.Random) -> Tally:
    """Kill `elfpatch unique TARGET` after each delay, on a fresh original each time: the file must be whole
    (byte-identical to ``pristine`` or to ``expected``), the other files in its directory only killed runs'
    temps. Then the next uninterrupted run removes every temp and patches the file."""
    tally = Tally()
    original, patched = file_digest(pristine), file_digest(expected)
    sizes = {pristine.stat().st_size, expected.stat().st_size}
    pattern = temp_re(target)
    cmd = elfpatch_cmd(str(target))

    def one(delay: float) -> str:
        """One kill and its checks; the phase (PHASES) it hit."""
        shutil.copyfile(pristine, target)
        pid, code, err = kill_after(cmd, delay)
        assert code in (0, -signal.SIGKILL), err
        assert target.stat().st_size in sizes
        digest = file_digest(target)
        assert digest in (original, patched), f"neither original nor patched after a kill at {delay:.4f} s"
        if code == 0:
            assert digest == patched, err
            tally.finished += 1
        else:
            tally.killed_pids.add(pid)
            if digest == patched:
                tally.patched += 1
            else:
                tally.original += 1
        own_temp = partial = False
        for name in os.listdir(target.parent):
            if name == target.name:
                continue
            m = pattern.match(name)
            assert m, f"{name!r} beside the target is not a temp file by its name"
            assert int(m.group(1)) in tally.killed_pids, f"{name!r} is not a killed run's temp"
            if int(m.group(1)) == pid:
                own_temp = True
                partial = (target.parent / name).stat().st_size < min(sizes)
        tally.temps += own_temp
        tally.partial += partial
        if code == 0:
            return "finished"
        return "after" if digest == patched else "copying" if partial else "written" if own_temp else "before"

    def attempt(want: str) -> Callable[[float], int]:
        return lambda delay: PHASES.index(one(delay)) - PHASES.index(want)

    for delay in delays:
        one(delay)
    # A phase the random delays missed: aim kills at it.
    if not tally.partial:
        tally.extra += aim(rng, 0.0, 1.1 * phases.total, attempt("copying"))
    if not tally.patched:
        tally.extra += aim(rng, 0.0, 1.1 * phases.total, attempt("after"))
    assert tally.original and tally.patched and tally.partial, tally.line("kills")
    # Leave at least one temp for the final run to clean (a later killed run may have removed the others).
    if len(os.listdir(target.parent)) == 1:
        tally.extra += aim(rng, 0.0, 1.1 * phases.total, attempt("copying"))
    assert len(os.listdir(target.parent)) > 1, "no temp left for the final run to clean"
    run_cli("unique", str(target), check=True)
    assert file_digest(target) == patched
    assert os.listdir(target.parent) == [target.name], "the next run removes every temp of a killed run"
    return tally


def report(record_property: RecordProperty, line: str) -> None:
    print("\n" + line)
    record_property("kills", line)


def test_kill_default_mode_large(big: Big, tmp_path: Path, record_property: RecordProperty) -> None:
    """17 seeded kills of the default mode: 3 early, 8 uniform over [0, 1.1 T], 4 while the temp is written,
    2 after the rename."""
    target = tmp_path / "work" / big.pristine.name
    target.parent.mkdir()
    rng = random.Random(SEED)
    delays = delays_for(rng, big.phases, uniform=8, in_window=4, after=2)
    tally = kill_campaign(target, big.pristine, big.patched, big.phases, delays, rng)
    p = big.phases
    report(record_property, tally.line(f"default mode, {big.size / 1e6:.0f} MB, T={p.total * 1e3:.0f} ms "
                                       f"(temp at {p.temp * 1e3:.0f}, renamed at {p.rename * 1e3:.0f})"))
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


def write_window(cmd: list[str], target: Path, big: Big) -> tuple[float, float, float]:
    """(first st_info byte written, last written, exit) of one uninterrupted --inplace run, by polling."""
    shutil.copyfile(big.pristine, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        first = last = None
        while proc.poll() is None:
            now = time.monotonic() - t0
            new = sum(os.pread(fd, 1, off) == bytes((b,)) for off, _, b in big.edits)
            if new and first is None:
                first = now
            if new == len(big.edits) and last is None:
                last = now
            time.sleep(0.0005)
        total = time.monotonic() - t0
    finally:
        os.close(fd)
    assert proc.returncode == 0 and file_digest(target) == big.patched_digest
    first = total * 0.5 if first is None else first
    last = max(first, total * 0.6) if last is None else last
    return first, last, total


def test_kill_inplace_large(big: Big, tmp_path: Path, record_property: RecordProperty) -> None:
    """--inplace killed at random moments: the size and inode are kept, each st_info byte is old or new and no
    other byte changes, no file is left beside it, and the next --inplace run completes the patch exactly.
    Half of the runs sleep before each byte write, so that kills land between writes and leave a mix."""
    work = tmp_path / "work"
    work.mkdir()
    target = work / big.pristine.name
    plain = elfpatch_cmd("--inplace", str(target))
    slowed = [sys.executable, "-c", SLOW_PWRITE, "unique", "--inplace", str(target)]
    _, _, t_plain = write_window(plain, target, big)
    first, last, _ = write_window(slowed, target, big)
    rng = random.Random(SEED + 1)
    runs = [(plain, d) for d in FIXED_DELAYS] + [(plain, rng.uniform(0, 1.1 * t_plain)) for _ in range(5)]
    runs += [(slowed, rng.uniform(first - SLOW_WRITE, last)) for _ in range(8)]
    counts = {"original": 0, "mixed": 0, "patched": 0, "finished": 0}

    def one(cmd: list[str], delay: float) -> int:
        """One kill and its checks; -1, 0 or 1 as it came before, in the middle of or after the byte writes."""
        shutil.copyfile(big.pristine, target)
        inode = target.stat().st_ino
        _, code, err = kill_after(cmd, delay)
        assert code in (0, -signal.SIGKILL), err
        assert target.stat().st_ino == inode and os.listdir(work) == [target.name]
        new = check_old_or_new(target, big)
        if code == 0:
            assert new == len(big.edits), err
            counts["finished"] += 1
        else:
            counts["original" if new == 0 else "patched" if new == len(big.edits) else "mixed"] += 1
        run_cli("unique", "--inplace", str(target), check=True)
        assert file_digest(target) == big.patched_digest and target.stat().st_ino == inode
        return -1 if new == 0 else 1 if new == len(big.edits) else 0

    for cmd, delay in runs:
        one(cmd, delay)
    extra = 0 if counts["mixed"] else aim(rng, 0.0, 1.5 * last, lambda delay: one(slowed, delay))
    report(record_property, f"--inplace, T={t_plain * 1e3:.0f} ms (slowed: writes {first * 1e3:.0f}-"
                            f"{last * 1e3:.0f} ms): {counts['original']} original, {counts['mixed']} mixed, "
                            f"{counts['patched']} patched, {counts['finished']} finished before the kill, "
                            f"{extra} aimed kills")
    assert counts["mixed"] and counts["original"], counts
    shutil.rmtree(work)


def test_kill_wheel_large(big: Big, tmp_path: Path, record_property: RecordProperty) -> None:
    """A ~100 MB wheel (the library deflated) killed at random moments: the wheel is the original or the result
    of an uninterrupted run, byte for byte; the next run removes the killed runs' temps."""
    src = tmp_path / "src"
    src.mkdir()
    pristine = build_wheel(src, wheel_files(big.pristine))
    out = tmp_path / "out" / pristine.name
    out.parent.mkdir()
    run_cli("unique", "-o", str(out), str(pristine), check=True)
    target = tmp_path / "work" / pristine.name
    target.parent.mkdir()
    phases = median_phases(elfpatch_cmd(str(target)), target, pristine, runs=1)
    patched = file_digest(target)
    assert patched == file_digest(out) != file_digest(pristine)
    rng = random.Random(SEED + 2)
    delays = delays_for(rng, phases, uniform=5, in_window=3, after=2)
    tally = kill_campaign(target, pristine, out, phases, delays, rng)
    report(record_property, tally.line(f"wheel, {pristine.stat().st_size / 1e6:.0f} MB, T={phases.total * 1e3:.0f}"
                                       f" ms (temp at {phases.temp * 1e3:.0f}, renamed at "
                                       f"{phases.rename * 1e3:.0f})"))
    for directory in (src, out.parent, target.parent):
        shutil.rmtree(directory)
