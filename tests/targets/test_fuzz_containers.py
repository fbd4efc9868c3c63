"""Property-based fuzzing of the container targets: mutated GNU ar archives and mutated wheels (deflated and
stored ELF member). Only elfpatch's own errors leave the API, as one line; the CLI exits 0, 1 or 2, and 2
with one stderr line naming the file; a failed run leaves its input byte-identical and no temp file; a
successful one changes only st_info bytes of symbols, from UNIQUE (10) to GLOBAL (1) in the high nibble.

Mutations are byte pokes (half of them aimed at structural bytes: ar headers and their size fields, zip
local headers, central directory and end record, the ELF member's compressed data), whole-field rewrites
of sizes and offsets, truncation, and for wheels an optional CRC fix-up so that pokes into member data get
past the CRC check and reach the readers behind it. ELFPATCH_FUZZ_EXAMPLES sets the number of API cases
(`make fuzz` runs 20,000); the CLI, a child process per case, runs a twentieth of them."""
from __future__ import annotations

import csv
import io
import os
import shutil
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers import run_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_error_line, assert_own_error
from unique.helpers import info_offsets

import elfpatch
from elfpatch.formats import arfmt
from targets.helpers import DIST, build_wheel, record_hash, wheel_files

EXAMPLES = int(os.environ.get("ELFPATCH_FUZZ_EXAMPLES", "150"))
CLI_EXAMPLES = max(3, EXAMPLES // 20)
LONG = "holder_member_with_a_name_longer_than_sixteen_bytes.o"  # lands in the `//` long-name table
SO = "holderpkg/libholder.so"
RECORD = f"{DIST}/RECORD"
ELFMAG = b"\x7fELF"

pytestmark = pytest.mark.slow  # hypothesis campaigns and the corpus replay

ZIP_VARIANTS = ("deflated", "stored")

Poke = tuple[int, bytes]


class Region(NamedTuple):
    start: int
    stop: int  # exclusive


class Field(NamedTuple):
    offset: int
    width: int  # bytes, little-endian (zip) or a decimal text field of this width (ar)
    original: int


class Seed(NamedTuple):
    data: bytes
    regions: list[Region]  # structural bytes that pokes aim at
    fields: list[Field]  # integers worth rewriting whole
    members: list[tuple[Region, Region]]  # zip only: (local header, data) of each member, for the CRC fix-up
    infos: list[int]  # st_info bytes of the ELF member(s) where they are stored as they are (not deflated)


# -- oracles ------------------------------------------------------------------------------------------------

def unique_to_global(before: bytes, after: bytes, allowed: set[int]) -> int:
    """Assert ``after`` differs from ``before`` only at ``allowed`` bytes, each from binding UNIQUE to GLOBAL
    with its type kept; return how many changed."""
    assert len(after) == len(before), "a patch never changes a size"
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert set(changed) <= allowed, f"bytes other than st_info changed: {sorted(set(changed) - allowed)[:8]}"
    for i in changed:
        assert before[i] >> 4 == 10 and after[i] >> 4 == 1, f"st_info at {i:#x}: {before[i]:#x} -> {after[i]:#x}"
        assert before[i] & 0xF == after[i] & 0xF, f"st_info at {i:#x}: symbol type changed"
    return len(changed)


def patched_count(reports: list[elfpatch.FileReport]) -> int:
    return sum(r.patched for r in reports)


def assert_clean_dir(path: Path) -> None:
    """Nothing but the input is left beside it: no temp file, no scratch file."""
    assert [p.name for p in path.parent.iterdir()] == [path.name]




def patch_or_refused(path: Path, data: bytes, inplace: bool = False) -> list[elfpatch.FileReport] | None:
    """Patch ``path`` (holding ``data``); None when elfpatch refused it, as one line, leaving it untouched."""
    try:
        return elfpatch.patch(path, inplace=inplace)
    except elfpatch.ElfPatchError as exc:
        assert_own_error(exc)
        assert path.read_bytes() == data, "a failed run leaves its input byte-identical"
        assert_clean_dir(path)
        return None


def check_cli(proc: subprocess.CompletedProcess, path: Path, data: bytes, check_mode: bool) -> bool:
    """The CLI's contract on one run; True when it reported success (and may have written)."""
    assert proc.returncode in ((0, 1, 2) if check_mode else (0, 2)), (proc.returncode, proc.stderr)
    if proc.returncode == 2:
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"elfpatch: error: {path}"), proc.stderr
        assert_error_line(lines[0])
        assert path.read_bytes() == data, "a failed run leaves its input byte-identical"
    if check_mode:
        assert path.read_bytes() == data, "--check writes nothing"
    assert_clean_dir(path)
    return proc.returncode == 0 and not check_mode


# -- strategies ---------------------------------------------------------------------------------------------

# Bytes that mean something to the ar and zip readers: digits and padding of decimal fields, the header
# magic, name terminators, zip signature bytes, and the extremes.
INTERESTING = b"0123456789 /`\n\x00\x01\x08\x7f\x80\xfePK\x03\x04\x05\x06\x07\xff"
byte_values = st.one_of(st.integers(0, 255), st.sampled_from(INTERESTING))
# st_info values: LOCAL, GLOBAL, WEAK, UNIQUE (and one undefined binding) with the usual symbol types.
INFO_VALUES = [bytes([bind << 4 | typ]) for bind in (0, 1, 2, 10, 13) for typ in (0, 1, 2, 6)]


def pokes(seed: Seed, decimal: bool) -> st.SearchStrategy[list[Poke]]:
    """Up to 6 edits (more leave few inputs sound enough to patch): a byte anywhere, a byte in a structural
    region, a whole field rewritten (a decimal text field for ar, a little-endian integer for zip) near its
    value, at an extreme or anywhere, or a stored st_info byte set to another binding."""
    anywhere = st.tuples(st.integers(0, len(seed.data) - 1), byte_values.map(lambda b: bytes([b])))
    structural = st.sampled_from(seed.regions).flatmap(
        lambda r: st.tuples(st.integers(r.start, r.stop - 1), byte_values.map(lambda b: bytes([b]))))

    def rewrite(f: Field) -> st.SearchStrategy[Poke]:
        top = 10**f.width - 1 if decimal else (1 << (8 * f.width)) - 1
        value = st.one_of(st.integers(max(0, f.original - 64), min(top, f.original + 64)),
                          st.sampled_from([0, 1, top, top - 1, len(seed.data)]), st.integers(0, top))
        if decimal:
            return value.map(lambda v: (f.offset, str(min(v, top)).ljust(f.width).encode()))
        return value.map(lambda v: (f.offset, min(v, top).to_bytes(f.width, "little")))

    fields = st.sampled_from(seed.fields).flatmap(rewrite)
    choices = [anywhere, structural, fields]
    if seed.infos:  # a binding edited to another one (or to UNIQUE), so that the patched count varies
        choices.append(st.tuples(st.sampled_from(seed.infos), st.sampled_from(INFO_VALUES)))
    return st.lists(st.one_of(choices), min_size=1, max_size=6)


cuts = st.one_of(st.none(), st.none(), st.integers(min_value=0))  # two in three runs keep the whole file


def mutate(data: bytes, edits: list[Poke], cut: int | None) -> bytearray:
    out = bytearray(data)
    for pos, value in edits:
        out[pos : pos + len(value)] = value
    del out[len(data) :]  # a field rewritten at the very end must not grow the file
    if cut is not None:
        del out[cut % len(out) :]
    return out


# -- archives -----------------------------------------------------------------------------------------------

def archive_seed(data: bytes) -> Seed:
    """The archive's bytes with every member header (name, size field) as targets; also the holder member's
    ELF header and its st_info bytes, so that edited bindings reach the writer."""
    _, members = arfmt.parse(data, "seed")
    regions, fields, infos = [Region(0, 8)], [], []
    for m in members:
        regions.append(Region(m.header_offset, m.data_offset))
        regions.append(Region(m.header_offset + 48, m.header_offset + 58))  # the size, once more: the likeliest
        fields.append(Field(m.header_offset + 48, 10, m.size))
        if not m.is_index and data[m.data_offset : m.data_offset + 4] == ELFMAG:
            image = data[m.data_offset : m.data_offset + m.size]
            regions.append(Region(m.data_offset, m.data_offset + 64))
            infos += [m.data_offset + i for i in sorted(info_offsets(image))]
        if m.name == "//":
            regions.append(Region(m.data_offset, m.data_offset + m.size))
    return Seed(data, regions, fields, [], infos)


@pytest.fixture(scope="module")
def ar_seed(unique_build: Path, objs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Seed:
    """`ar rcs` of holder_v1.o under a long name, a plain C object and an odd-sized text member (padded)."""
    d = tmp_path_factory.mktemp("ar_seed")
    shutil.copy(unique_build / "holder_v1.o", d / LONG)
    shutil.copy(objs["plain"], d / "plain.o")
    (d / "notes.txt").write_text("not an object\n!")
    subprocess.run(["ar", "rcs", "libfuzz.a", LONG, "plain.o", "notes.txt"], check=True, cwd=d)
    seed = archive_seed((d / "libfuzz.a").read_bytes())
    assert b"//              " in seed.data, "the seed must exercise the GNU long-name table"
    return seed


def archive_allowed(data: bytes) -> set[int]:
    """The st_info offsets (in the archive) of every ELF member, as the archive reader splits it."""
    allowed: set[int] = set()
    for m in arfmt.parse(data, "after")[1]:
        if not m.is_index:
            allowed |= {m.data_offset + i for i in info_offsets(data[m.data_offset : m.data_offset + m.size])}
    return allowed


def check_archive_success(data: bytes, after: bytes, reports: list[elfpatch.FileReport] | None) -> None:
    changed = unique_to_global(data, after, archive_allowed(data))
    if reports is not None:
        assert changed == patched_count(reports), "one byte per reported symbol"


def ar_mutation() -> st.SearchStrategy:
    # A thin magic now and then: the same headers, read as a thin archive whose members are outside files.
    return st.tuples(st.booleans(), cuts, st.integers(0, 19).map(lambda n: n == 0))


def apply_ar(seed: Seed, edits: list[Poke], cut: int | None, thin: bool) -> bytes:
    data = mutate(seed.data, edits, cut)
    if thin and len(data) >= 8:
        data[:8] = arfmt.THIN_MAGIC
    return bytes(data)


def test_fuzz_archive_api(ar_seed: Seed, tmp_path_factory: pytest.TempPathFactory) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pokes(ar_seed, decimal=True), ar_mutation())
    def run(edits: list[Poke], mutation: tuple[bool, int | None, bool]) -> None:
        inplace, cut, thin = mutation
        data = apply_ar(ar_seed, edits, cut, thin)
        path = tmp_path_factory.mktemp("fuzz_ar") / "libfuzz.a"
        path.write_bytes(data)
        reports = patch_or_refused(path, data, inplace)
        if reports is None:
            return
        check_archive_success(data, path.read_bytes(), reports)
        assert_clean_dir(path)

    run()


def test_fuzz_archive_cli(ar_seed: Seed, tmp_path_factory: pytest.TempPathFactory) -> None:
    @settings(max_examples=CLI_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pokes(ar_seed, decimal=True), ar_mutation(), st.sampled_from(["", "--inplace", "--check"]))
    def run(edits: list[Poke], mutation: tuple[bool, int | None, bool], flag: str) -> None:
        _, cut, thin = mutation
        data = apply_ar(ar_seed, edits, cut, thin)
        path = tmp_path_factory.mktemp("fuzz_ar_cli") / "libfuzz.a"
        path.write_bytes(data)
        proc = run_main("unique", *([flag] if flag else []), str(path))
        if check_cli(proc, path, data, flag == "--check"):
            check_archive_success(data, path.read_bytes(), None)

    run()


# -- wheels -------------------------------------------------------------------------------------------------

def wheel_seed(data: bytes) -> Seed:
    """The wheel's bytes with its local headers, central directory entries, end record and the ELF member's
    compressed data as targets, and their sizes, offsets, counts and name lengths as fields."""
    eocd = data.rfind(b"PK\x05\x06")
    regions, fields, members, infos = [Region(eocd, eocd + 22)], [], [], []
    fields += [Field(eocd + off, w, int.from_bytes(data[eocd + off : eocd + off + w], "little"))
               for off, w in ((8, 2), (10, 2), (12, 4), (16, 4), (20, 2))]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        entries = z.infolist()
    cd = struct.unpack_from("<I", data, eocd + 16)[0]
    for info in entries:
        lfh = info.header_offset
        nlen, elen = struct.unpack_from("<HH", data, lfh + 26)
        start = lfh + 30 + nlen + elen
        regions.append(Region(lfh, start))
        fields += [Field(lfh + off, w, int.from_bytes(data[lfh + off : lfh + off + w], "little"))
                   for off, w in ((6, 2), (8, 2), (14, 4), (18, 4), (22, 4), (26, 2), (28, 2))]
        members.append((Region(lfh, start), Region(start, start + info.compress_size)))
        if info.filename == SO:
            regions.append(Region(start, start + info.compress_size))
            if info.compress_type == zipfile.ZIP_STORED:  # with the CRC fixed up, a binding edit is an input
                infos += [start + i for i in sorted(info_offsets(data[start : start + info.compress_size]))]
        cnlen, celen, cclen = struct.unpack_from("<HHH", data, cd + 28)
        regions.append(Region(cd, cd + 46 + cnlen))
        fields += [Field(cd + off, w, int.from_bytes(data[cd + off : cd + off + w], "little"))
                   for off, w in ((8, 2), (10, 2), (16, 4), (20, 4), (24, 4), (28, 2), (30, 2), (42, 4))]
        cd += 46 + cnlen + celen + cclen
    return Seed(data, regions, fields, members, infos)


def fix_crcs(data: bytearray, seed: Seed) -> None:
    """Make each member's CRC and size (local header and directory entry, at the seed's layout) agree with
    what its possibly poked data now inflates to, so that the poke reaches the reader behind the CRC."""
    eocd = seed.data.rfind(b"PK\x05\x06")
    cd = struct.unpack_from("<I", seed.data, eocd + 16)[0]
    for lfh, body in seed.members:
        method = struct.unpack_from("<H", seed.data, lfh.start + 8)[0]
        raw = bytes(data[body.start : body.stop])
        try:
            content = raw if method == zipfile.ZIP_STORED else zlib.decompressobj(-15).decompress(raw)
        except zlib.error:
            content = None
        if content is not None and len(data) >= cd + 46:
            for field in (lfh.start + 14, cd + 16):
                struct.pack_into("<I", data, field, zlib.crc32(content))
            for field in (lfh.start + 22, cd + 24):
                struct.pack_into("<I", data, field, len(content))
        cnlen, celen, cclen = struct.unpack_from("<HHH", seed.data, cd + 28)
        cd += 46 + cnlen + celen + cclen


def zip_contents(data: bytes) -> list[tuple[str, bytes | None]] | None:
    """(name, content) of each member in directory order, as zipfile reads them (content None where it cannot);
    None when zipfile cannot open the file at all. zipfile is the oracle here, so anything it raises counts."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            out: list[tuple[str, bytes | None]] = []
            for info in z.infolist():
                try:
                    out.append((info.filename, z.read(info)))
                except Exception:  # noqa: BLE001 - a member zipfile cannot read
                    out.append((info.filename, None))
            return out
    except Exception:  # noqa: BLE001 - a file zipfile cannot open
        return None


def record_rows(record: bytes) -> set[tuple[str, ...]]:
    return {tuple(row) for row in csv.reader(io.StringIO(record.decode("utf-8"), newline=""))}


def check_wheel_success(data: bytes, after: bytes, reports: list[elfpatch.FileReport] | None,
                        before: list[tuple[str, bytes | None]] | None = None) -> None:
    """A patched wheel opens with zipfile when its input did, keeps every member (names, order, content) but
    the ELF ones, which differ only at st_info bytes, UNIQUE -> GLOBAL, and RECORD, which lists their new
    hashes."""
    if after == data:
        assert reports is None or patched_count(reports) == 0, "symbols reported patched, nothing written"
        return
    assert reports is None or patched_count(reports) > 0, "a wheel is rewritten only when something changed"
    if before is None:
        before = zip_contents(data)
    new = zip_contents(after)
    if before is None:  # zipfile refused the input (say a "version needed" of 6.4): fields are copied as they are
        return
    assert new is not None, "the patched wheel must open with zipfile"
    assert [n for n, _ in new] == [n for n, _ in before], "members, and their order, are kept"
    changed_total = compare_members(before, new)
    if all(c is not None for _, c in before):
        with zipfile.ZipFile(io.BytesIO(after)) as z:
            assert z.testzip() is None, "every CRC of the patched wheel checks"
        if reports is not None:
            assert changed_total == patched_count(reports), "one byte per reported symbol"


def compare_members(before: list[tuple[str, bytes | None]], new: list[tuple[str, bytes | None]]) -> int:
    """Member by member: an ELF member differs only at st_info bytes, UNIQUE -> GLOBAL, and RECORD (when
    readable) lists its new hash; any other member is kept byte for byte. Returns the st_info bytes changed."""
    record = dict(new).get(RECORD)
    changed_total = 0
    for (name, old), (_, content) in zip(before, new):
        if old is None:
            continue  # unreadable before (zipfile is stricter than the reader here): nothing to compare
        assert content is not None, f"{name}: readable before, unreadable after"
        if name.endswith(".dist-info/RECORD"):
            continue
        if old[:4] == ELFMAG and content != old:
            changed_total += unique_to_global(old, content, info_offsets(old))
            if record is not None:
                assert (name, record_hash(content), str(len(content))) in record_rows(record)
        else:
            assert content == old, f"{name}: a member that is not ELF is never changed"
    return changed_total


def seeds_of_wheel(lib: Path, directory: Path) -> dict[str, Seed]:
    out = {}
    for variant in ZIP_VARIANTS:
        d = directory / variant
        d.mkdir()
        stored = (SO,) if variant == "stored" else ()
        out[variant] = wheel_seed(build_wheel(d, wheel_files(lib), stored=stored).read_bytes())
    return out


@pytest.fixture(scope="module")
def whl_seeds(unique_build: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Seed]:
    return seeds_of_wheel(unique_build / "libholder_v1.so", tmp_path_factory.mktemp("whl_seed"))


def whl_mutation() -> st.SearchStrategy:
    return st.tuples(cuts, st.booleans())  # (truncation, fix the CRCs after the pokes)


def apply_whl(seed: Seed, edits: list[Poke], cut: int | None, fix: bool) -> bytes:
    data = mutate(seed.data, edits, None)
    if fix:
        fix_crcs(data, seed)
    if cut is not None:
        del data[cut % len(data) :]
    return bytes(data)


@pytest.mark.parametrize("variant", ZIP_VARIANTS)
def test_fuzz_wheel_api(whl_seeds: dict[str, Seed], tmp_path_factory: pytest.TempPathFactory,
                        variant: str) -> None:
    seed = whl_seeds[variant]

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pokes(seed, decimal=False), whl_mutation())
    def run(edits: list[Poke], mutation: tuple[int | None, bool]) -> None:
        data = apply_whl(seed, edits, *mutation)
        path = tmp_path_factory.mktemp("fuzz_whl") / "holderpkg-1.0-py3-none-linux_x86_64.whl"
        path.write_bytes(data)
        reports = patch_or_refused(path, data)  # a wheel has no --inplace: its members are compressed
        if reports is None:
            return
        check_wheel_success(data, path.read_bytes(), reports)
        assert_clean_dir(path)

    run()


@pytest.mark.parametrize("variant", ZIP_VARIANTS)
def test_fuzz_wheel_cli(whl_seeds: dict[str, Seed], tmp_path_factory: pytest.TempPathFactory,
                        variant: str) -> None:
    seed = whl_seeds[variant]

    @settings(max_examples=CLI_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pokes(seed, decimal=False), whl_mutation(), st.booleans())
    def run(edits: list[Poke], mutation: tuple[int | None, bool], check_mode: bool) -> None:
        data = apply_whl(seed, edits, *mutation)
        path = tmp_path_factory.mktemp("fuzz_whl_cli") / "holderpkg-1.0-py3-none-linux_x86_64.whl"
        path.write_bytes(data)
        proc = run_main("unique", *(["--check"] if check_mode else []), str(path))
        if check_cli(proc, path, data, check_mode):
            check_wheel_success(data, path.read_bytes(), None)

    run()


# Member contents of a freshly built wheel, poked before it is zipped: every CRC is right, so the pokes reach
# the ELF reader, the partial re-deflate of the patched member and the RECORD rewrite.

@pytest.fixture(scope="module")
def whl_files(unique_build: Path) -> list[tuple[str, bytes]]:
    files = wheel_files(unique_build / "libholder_v1.so")
    rows = "".join(f"{n},{record_hash(b)},{len(b)}\n" for n, b in files.items()) + f"{RECORD},,\n"
    return [*files.items(), (RECORD, rows.encode())]


def member_pokes(files: list[tuple[str, bytes]]) -> st.SearchStrategy[list[tuple[int, int, int]]]:
    """(member index, position, byte): mostly into the ELF member (a third of those at its header or st_info
    bytes), else into RECORD (with CSV's own delimiters among the values) or any other member."""
    names = [n for n, _ in files]
    so, record = names.index(SO), names.index(RECORD)
    elf = files[so][1]
    hot = sorted(info_offsets(elf)) + list(range(64))
    text_values = st.one_of(byte_values, st.sampled_from(b',"\r\n\x00=/'))
    one = st.one_of(
        st.tuples(st.just(so), st.integers(0, len(elf) - 1), byte_values),
        st.tuples(st.just(so), st.sampled_from(hot), byte_values),
        st.tuples(st.just(record), st.integers(0, len(files[record][1]) - 1), text_values),
        st.integers(0, len(files) - 1).flatmap(
            lambda i: st.tuples(st.just(i), st.integers(0, max(0, len(files[i][1]) - 1)), text_values)),
    )
    return st.lists(one, min_size=1, max_size=8)


@pytest.mark.parametrize("variant", ZIP_VARIANTS)
def test_fuzz_wheel_members(whl_files: list[tuple[str, bytes]], tmp_path_factory: pytest.TempPathFactory,
                            variant: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(member_pokes(whl_files))
    def run(edits: list[tuple[int, int, int]]) -> None:
        contents = [bytearray(b) for _, b in whl_files]
        for index, pos, value in edits:
            if contents[index]:
                contents[index][pos % len(contents[index])] = value
        files = {name: bytes(c) for (name, _), c in zip(whl_files, contents)}
        d = tmp_path_factory.mktemp("fuzz_whl_members")
        path = build_wheel(d, files, stored=(SO,) if variant == "stored" else (), record=False)
        data = path.read_bytes()
        reports = patch_or_refused(path, data)
        if reports is None:
            return
        check_wheel_success(data, path.read_bytes(), reports, list(files.items()))
        assert_clean_dir(path)

    run()


# -- regressions: every input the fuzzers found a bug with, replayed under the same properties --------------

CORPUS = Path(__file__).resolve().parent / "corpus"


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.iterdir() if p.name != "README"))
def test_fuzz_corpus(name: str, tmp_path: Path) -> None:
    data = (CORPUS / name).read_bytes()
    is_wheel = name.endswith(".whl")
    for mode in ("atomic", "inplace", "cli") if not is_wheel else ("atomic", "cli"):
        path = tmp_path / mode / name
        path.parent.mkdir()
        path.write_bytes(data)
        if mode == "cli":
            if not check_cli(run_main("unique", str(path)), path, data, check_mode=False):
                continue
            reports = None
        else:
            reports = patch_or_refused(path, data, inplace=mode == "inplace")
            if reports is None:
                continue
        if is_wheel:
            check_wheel_success(data, path.read_bytes(), reports)
        else:
            check_archive_success(data, path.read_bytes(), reports)
        assert_clean_dir(path)
