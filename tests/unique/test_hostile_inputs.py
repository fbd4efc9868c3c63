"""Bounded time and memory on hostile input: inputs that are valid (or nearly) but built to make work or memory
explode. Each runs in a child process whose peak RSS (VmHWM) is measured, or whose CPU time is capped with a
limit far above what a linear run needs and far below what the old quadratic or exponential code took: the
bound is a resource limit, never a wall-clock comparison."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest
from jsonschema_check import cli_json

import elfpatch
from elfpatch.elf import mangled, symbols
from elfpatch.formats import zipfmt, zsplice
from elfpatch.formats.spans import Span

# Peak RSS of the child's own process image, printed last on stderr (ru_maxrss would count the forking parent).
_PEAK = (
    "import re, sys\n"
    "def _peak():\n"
    "    hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
    "    print(int(hwm) * 1024, file=sys.stderr)\n"
)


def run_child(code: str, *args: str, cpu_seconds: int = 60) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``code`` (which calls ``_peak()`` at its end) in a child with at most ``cpu_seconds`` of CPU time;
    its result and its peak RSS in bytes (-1 when it died before printing it)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    r = subprocess.run([sys.executable, "-c", _PEAK + code, *args], capture_output=True, text=True,
                       preexec_fn=limit)
    tail = r.stderr.split()[-1:] or ["-1"]
    return r, int(tail[0]) if tail[0].isdigit() else -1


def test_initializer_name_parsing_is_linear() -> None:
    """A 1 MB initializer name of clone-suffix look-alikes: a regex anchored with ``$`` retried its match from
    every dot (60 KB took 4-8 s, 1 MB would take hours); the suffixes are now taken off the end in one pass.
    The child gets 20 s of CPU for names totalling 4 MB."""
    code = (
        "from elfpatch.inits.order import parse_cdtor_name\n"
        "n = 1 << 20\n"
        "for name in ('_GLOBAL__sub_I_a' + '.part' * (n // 5) + 'x', '_GLOBAL__sub_I_a.cc' + '.part.1' * (n // 7),\n"
        "             '_GLOBAL__sub_I_' + '.cold' * (n // 5), '_GLOBAL__sub_I_00101_' + '9.' * (n // 2)):\n"
        "    print(parse_cdtor_name(name))\n"
        "_peak()\n"
    )
    r, _ = run_child(code, cpu_seconds=20)
    assert r.returncode == 0, f"killed by the CPU limit ({r.returncode}): {r.stderr[-300:]}"
    assert r.stdout.splitlines()[1:] == ["('a.cc', None)", "(None, None)", f"('{'9.' * (1 << 19)}', 101)"]


def sparse_archive(path: Path, obj: Path, pad: int) -> Path:
    """A GNU archive of one member: the object ``obj`` followed by ``pad`` zero bytes (a hole: cheap to make)."""
    data = obj.read_bytes()
    size = len(data) + pad
    size += size & 1
    header = f"{obj.name + '/':<16}{'0':<12}{'0':<6}{'0':<6}{'644':<8}{size:<10}`\n".encode()
    with open(path, "wb") as f:
        f.write(b"!<arch>\n" + header + data)
        f.truncate(8 + len(header) + size)
    return path


def test_a_large_archive_member_is_read_in_place(unique_build: Path, tmp_path: Path) -> None:
    """An archive whose ELF member is 128 MiB (a real object, then zeros): the member is read in place in the
    archive's map, not copied (a 1 GiB member took 2-3 GB before, against 14 MB for the same object as a
    plain file), in --check and in a patch to -o, whose verification reads the new file in place too."""
    size = 128 << 20
    archive = sparse_archive(tmp_path / "libbig.a", unique_build / "holder_v1.o", size)
    out = tmp_path / "out.a"
    for args in (["--check", str(archive)], ["-o", str(out), str(archive)]):
        r, rss = run_child("from elfpatch.cli import main\nrc = main(sys.argv[1:])\n_peak()\nsys.exit(rc)\n",
                           "unique", *args)
        assert r.returncode == (1 if args[0] == "--check" else 0), r.stderr
        assert 0 < rss < size // 4, f"peak RSS {rss >> 20} MB for a {size >> 20} MiB member ({args[0]})"
    assert "2 patched" in r.stdout
    assert run_child("from elfpatch.cli import main\nsys.exit(main(sys.argv[1:]))\n", "unique", "--check",
                     str(out))[0].returncode == 0


def empty_blocks(n: int, final: bool = True) -> bytes:
    """``n`` empty fixed-Huffman deflate blocks (10 bits each: header, end-of-block code), the last final."""
    assert n % 4 == 0
    four = (0b0000000010 * (1 | 1 << 10 | 1 << 20 | 1 << 30)).to_bytes(5, "little")  # BFINAL=0, BTYPE=01, EOB
    return four * (n // 4) + (b"\x03\x00" if final else b"")  # and a final empty block (BFINAL=1)


def many_blocks_stream(payload: bytes, n: int) -> bytes:
    """``payload`` deflated and sync-flushed (byte-aligned, not final), then ``n`` empty blocks."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = c.compress(payload) + c.flush(zlib.Z_SYNC_FLUSH) + empty_blocks(n)
    assert zlib.decompress(raw, -15) == payload
    return raw


def test_millions_of_empty_deflate_blocks_are_not_indexed(unique_build: Path, monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The block index of a member stops growing past its budget (one boundary per 4 KiB of output, plus a
    constant): a stream of a million empty blocks costs a bounded number of inflate calls, and is inflated
    exactly, with no index (its member is then re-deflated whole)."""
    lib = zsplice.libz()
    if lib is None:
        pytest.skip("needs the system libz.so.1 for inflate(Z_BLOCK)")

    class Counting:
        calls = 0

        def __getattr__(self, name: str) -> object:
            return getattr(lib, name)

        def inflate(self, *args: object) -> int:
            Counting.calls += 1
            return lib.inflate(*args)

    monkeypatch.setattr(zsplice, "_libz", Counting())
    payload = (unique_build / "libholder_v1.so").read_bytes()
    raw = many_blocks_stream(payload, 1_000_000)
    fd = os.memfd_create("raw")
    os.write(fd, raw)
    out = bytearray()
    boundaries = zsplice.inflate_indexed(Span(fd, 0, len(raw)), len(payload), out.extend, "m", "w.whl")
    os.close(fd)
    assert out == payload and boundaries == []
    assert Counting.calls < 3 * (zsplice.INDEX_BLOCKS + len(payload) // zsplice.BLOCK_OUTPUT) + 100


def test_a_wheel_of_millions_of_empty_blocks_patches_in_bounded_memory(unique_build: Path, tmp_path: Path) -> None:
    """A 5 MB wheel whose library member is followed by four million empty deflate blocks: patched to -o with
    a small peak RSS (745-910 MB and about a minute before), and the member inflates to the patched library."""
    lib = (unique_build / "libholder_v1.so").read_bytes()
    whl = raw_wheel(tmp_path / "empties-1.0-py3-none-any.whl",
                    [("pkg/lib.so", many_blocks_stream(lib, 4_000_000), lib)])
    out = tmp_path / "out.whl"
    r, rss = run_child("from elfpatch.cli import main\nrc = main(sys.argv[1:])\n_peak()\nsys.exit(rc)\n",
                       "unique", "-o", str(out), str(whl))
    assert r.returncode == 0, r.stderr
    assert 0 < rss < 100 << 20, f"peak RSS {rss >> 20} MB"
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None
        assert len(z.read("pkg/lib.so")) == len(lib)
    assert run_child("from elfpatch.cli import main\nsys.exit(main(sys.argv[1:]))\n", "unique", "--check",
                     str(out))[0].returncode == 0


def raw_wheel(path: Path, members: list[tuple[str, bytes, bytes]], extra_entries: list[tuple[str, int]] = (),
              ) -> Path:
    """A zip written field by field: ``members`` are (name, raw deflate data, inflated bytes);
    ``extra_entries`` are (name, index of a member) central directory entries naming that member's data again.
    A RECORD that lists nothing comes last."""
    members = [*members, ("pkg-1.0.dist-info/RECORD", zlib.compress(b"", 6)[2:-4], b"")]
    body, central, offsets = bytearray(), bytearray(), []
    for name, raw, data in members:
        offsets.append(len(body))
        body += zipfmt.LFH.pack(b"PK\x03\x04", 20, 0, zipfmt.DEFLATED, 0, 0x21, zlib.crc32(data), len(raw),
                                len(data), len(name.encode()), 0) + name.encode() + raw
    for name, index in [(name, i) for i, (name, _, _) in enumerate(members)] + list(extra_entries):
        _, raw, data = members[index]
        central += zipfmt.CDH.pack(b"PK\x01\x02", 20, 20, 0, zipfmt.DEFLATED, 0, 0x21, zlib.crc32(data), len(raw),
                                   len(data), len(name.encode()), 0, 0, 0, 0, 0, offsets[index]) + name.encode()
    count = len(members) + len(extra_entries)
    path.write_bytes(bytes(body) + bytes(central) + zipfmt.EOCD.pack(b"PK\x05\x06", 0, 0, count, count,
                                                                     len(central), len(body), 0))
    return path


def test_overlapping_members_are_refused(unique_build: Path, tmp_path: Path) -> None:
    """64 central-directory entries naming one member's data (a 256 KB wheel inflated 64 times to 16 GiB):
    refused when the directory is read, before anything is inflated, with one line naming the file."""
    lib = (unique_build / "libholder_v1.so").read_bytes() + bytes(64 << 20)  # the same ELF image, then zeros
    raw = zlib.compress(lib, 9)[2:-4]
    whl = raw_wheel(tmp_path / "overlap-1.0-py3-none-any.whl", [("pkg/a.so", raw, lib)],
                    [(f"pkg/b{i}.so", 0) for i in range(63)])
    before = whl.read_bytes()
    for mode in ("--check", "--dry-run", "--fsync"):
        r, rss = run_child("from elfpatch.cli import main\nrc = main(sys.argv[1:])\n_peak()\nsys.exit(rc)\n",
                           "unique", mode, str(whl), cpu_seconds=30)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.splitlines()[:-1]  # the last line is the child's peak RSS
        assert len(lines) == 1 and lines[0].startswith(f"elfpatch: error: {whl}: zip member 'pkg/a.so' overlaps "
                                                       "member 'pkg/b0.so'"), lines
        assert rss < 64 << 20, "refused before the member was inflated"
    assert whl.read_bytes() == before


def test_a_member_running_into_the_directory_is_refused(unique_build: Path, tmp_path: Path) -> None:
    lib = (unique_build / "libholder_v1.so").read_bytes()
    whl = raw_wheel(tmp_path / "w-1.0-py3-none-any.whl", [("pkg/a.so", zlib.compress(lib)[2:-4], lib)])
    data = bytearray(whl.read_bytes())
    central = data.rfind(b"PK\x01\x02")  # RECORD's entry: its compressed size grows into the directory
    data[central + 20 : central + 24] = (int.from_bytes(data[central + 20 : central + 24], "little") + 50
                                         ).to_bytes(4, "little")
    whl.write_bytes(bytes(data))
    with pytest.raises(elfpatch.ElfPatchError, match="RECORD' overlaps the central directory"):
        elfpatch.scan(whl)


@pytest.mark.slow
@pytest.mark.parametrize("patch", [False, True])
def test_a_wheel_of_many_members_costs_a_small_record_each(unique_build: Path, tmp_path: Path, patch: bool) -> None:
    """A library then 50,000 empty members (the 81 MB wheel of a million took 1.4 GB): the traced peak of a
    scan, and of a patch to -o, is a small record per member (386 and 1,030 bytes before; ~90 and ~120 now)."""
    lib = (unique_build / "libholder_v1.so").read_bytes()
    empty = zlib.compress(b"")[2:-4]
    n = 50_000
    whl = raw_wheel(tmp_path / "many-1.0-py3-none-any.whl",
                    [("pkg/lib.so", zlib.compress(lib)[2:-4], lib)] + [(f"pkg/m{i:07d}", empty, b"") for i in range(n)])
    out = tmp_path / "out.whl"
    elfpatch.scan(unique_build / "libholder_v1.so")  # imports and first-call caches
    tracemalloc.start()
    try:
        reports = elfpatch.patch(whl, output=str(out)) if patch else elfpatch.scan(whl)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert [r.status for r in reports] == ["patched" if patch else "would-patch"]
    assert peak < n * 200, f"{peak / n:.0f} bytes per member"
    if patch:
        with zipfile.ZipFile(out) as z:
            assert len(z.infolist()) == n + 2 and z.testzip() is None


def _seq(k: int) -> str:
    """The substitution reference to candidate ``k``: S_, S0_, S1_, ..."""
    if k == 0:
        return "S_"
    digits, k = "", k - 1
    while True:
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[k % 36] + digits
        k //= 36
        if k == 0:
            return f"S{digits}_"


def doubling_name(levels: int) -> str:
    """f(X<A, A>, X<X<A, A>, X<A, A> >, ...): each parameter is a type holding the one before it twice, so
    the demangled length doubles every 10 mangled bytes (24 levels: 253 bytes, ~400 MB demangled)."""
    name, last = "_Z1f1XI1AS0_E", 2  # candidates: X, A, X<A, A>
    for _ in range(levels):
        name += "S_I" + _seq(last) + _seq(last) + "E"
        last += 1
    return name


def test_the_demangled_length_bound_holds(unique_build: Path) -> None:
    """The bound found before demangling is never below the real length, on the fixtures' names, the names
    of the C++ runtime, and doubling names small enough to demangle, and stays close to it (the cap then
    falls back only where it must)."""
    if symbols._cxa_demangle() is None:
        pytest.skip("no C++ demangler on this machine (libstdc++'s __cxa_demangle)")
    maps = Path("/proc/self/maps").read_text().split()
    runtime = sorted({word for word in maps if "libstdc++" in word or "libc++" in word})  # the demangler's own
    names = {doubling_name(k) for k in range(12)}
    for lib in [unique_build / "libholder_v1.so", *runtime]:
        nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
        names |= {line.split()[-1].split("@")[0] for line in nm.splitlines() if " _Z" in line}
    ratios = []
    for name in sorted(names):
        out = symbols._demangle_unbounded(name)
        if out is None:
            continue
        bound = mangled.demangled_bound(name)
        assert bound >= len(out), (name, bound, len(out))
        ratios.append(bound / len(out))
    assert len(ratios) > 1000, f"only {len(ratios)} names from {runtime}"
    ratios.sort()
    assert ratios[len(ratios) * 9 // 10] < 8, "the bound is near the real length for nine names in ten"


def test_an_exploding_name_is_not_demangled(tmp_path: Path) -> None:
    """A 253-byte name that demangles to ~400 MB: its bound exceeds the limit, so it is never handed to the
    demangler (the mangled name is shown), at almost no memory; a name whose bound fits still demangles."""
    bomb = doubling_name(24)
    assert len(bomb) < 267 and mangled.demangled_bound(bomb) > 1 << 30
    symbols.demangle.cache_clear()
    tracemalloc.start()
    try:
        assert symbols.demangle(bomb) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert symbols.demangle(doubling_name(3)).startswith("f(X<A, A>, X<X<A, A>, X<A, A> >")
    assert symbols.demangle(doubling_name(14)) is None  # demangles to ~200 KB: past MAX_DEMANGLED


def test_check_on_a_library_with_an_exploding_unique_name(tmp_path: Path) -> None:
    """A shared library whose one unique symbol has that name: --check --json stays small in memory and in
    output (1 GB RSS and a 436 MB report before), and reports the mangled name only."""
    bomb = doubling_name(24)
    asm = tmp_path / "bomb.s"
    asm.write_text(f'.globl {bomb}\n.type {bomb}, @gnu_unique_object\n.size {bomb}, 4\n'
                   f'.section .bss\n{bomb}:\n.zero 4\n.section .note.GNU-stack,"",@progbits\n')
    lib = tmp_path / "libbomb.so"
    subprocess.run(["gcc", "-shared", "-o", str(lib), str(asm)], check=True)
    r, rss = run_child("from elfpatch.cli import main\nrc = main(sys.argv[1:])\n_peak()\nsys.exit(rc)\n",
                       "unique", "--check", "--json", str(lib), cpu_seconds=30)
    assert r.returncode == 1, r.stderr
    assert 0 < rss < 100 << 20, f"peak RSS {rss >> 20} MB"
    assert len(r.stdout) < 16 << 10
    rows = cli_json(r.stdout)["files"][0]["symbols"]
    assert {(row["name"], row["demangled"]) for row in rows} == {(bomb, None)}
