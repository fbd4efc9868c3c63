"""Coverage-guided fuzzing of `elfpatch unique` with atheris (libFuzzer for Python). Not part of CI: pytest
collects only tests/ (pyproject's testpaths), and this file is not named test_*.py.

Install atheris into the venv (it is not a test dependency; wheels exist for CPython 3.8-3.11 on x86-64
Linux, other platforms build it from source with clang):

    .venv/bin/pip install atheris

Run (the native fixtures must be built: `make -C native_tests/unique`):

    .venv/bin/python fuzz/atheris_unique.py -max_total_time=180 [CORPUS_DIR ...] [libFuzzer flags]

Without a corpus directory the seeds (libholder_v1.so, holder_v1.o, a GNU archive and a deflated and a
stored wheel built from them) are written to a fresh temp dir, which libFuzzer then grows. An input's first
byte picks the target: 0-1 a plain ELF file (also read in memory by ElfFile), 2-3 an ar archive, 4-5 a
wheel; odd values use --inplace (wheels refuse it). The rest is the file. The property is the fuzz tests':
only elfpatch.ElfPatchError leaves the API, as one line; a failed run leaves the input byte-identical and
nothing beside it; a successful one keeps the size (ELF, archive) and only flips UNIQUE bindings to GLOBAL.
A violation raises, and libFuzzer saves the input as crash-<sha1> in the working directory.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    import elfpatch
    import elfpatch.api
    import elfpatch.elf.file
    import elfpatch.elf.symbols
    import elfpatch.formats.arfmt
    import elfpatch.formats.spans
    import elfpatch.formats.zipfmt
    import elfpatch.formats.zsplice
    import elfpatch.fs.commit
    import elfpatch.patching.plan
    import elfpatch.targets
    import elfpatch.targets.archive
    import elfpatch.targets.elf
    import elfpatch.targets.wheel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from oracle import assert_own_error  # noqa: E402 - the tests' oracle, found through the path just set

BUILD = ROOT / "native_tests" / "unique" / "build"
ELF, ARCHIVE, WHEEL = 0, 1, 2
NAMES = {ELF: "lib.so", ARCHIVE: "lib.a", WHEEL: "pkg-1.0-py3-none-linux_x86_64.whl"}

WORK = Path(tempfile.mkdtemp(prefix="elfpatch-atheris-"))


def read_elf(data: bytes) -> None:
    """The in-memory reader alone: headers, tables, every symbol with its name."""
    elf = elfpatch.elf.file.ElfFile(data)
    for table in elf.symbol_tables():
        for sym in table:
            _ = sym.name, sym.bind
    _ = elf.dynamic(), elf.loader_table(), elf.warnings


def zip_ok(data: bytes) -> bool:
    """Whether zipfile opens ``data`` and every member reads back with its CRC."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return z.testzip() is None
    except Exception:  # noqa: BLE001 - zipfile is the oracle: anything it raises means "not sound"
        return False


def check_changes(before: bytes, after: bytes, kind: int) -> None:
    if kind == WHEEL:
        # Members elfpatch does not patch are copied byte for byte, broken ones included: a rewritten wheel
        # must be sound when its input was.
        if after != before and zip_ok(before) and not zip_ok(after):
            raise AssertionError("a sound wheel was rewritten into one that zipfile cannot read back")
        return
    if len(after) != len(before):
        raise AssertionError("a patch changed the file size")
    for a, b in zip(before, after):
        if a != b and not (a >> 4 == 10 and b >> 4 == 1 and a & 0xF == b & 0xF):
            raise AssertionError(f"byte changed from {a:#x} to {b:#x}, not a UNIQUE -> GLOBAL binding")


def test_one_input(raw: bytes) -> None:
    if len(raw) < 2:
        return
    kind, inplace, data = (raw[0] >> 1) % 3, bool(raw[0] & 1), raw[1:]
    if kind == ELF:
        try:
            read_elf(data)
        except elfpatch.ElfPatchError as exc:
            assert_own_error(exc)
    path = WORK / NAMES[kind]
    path.write_bytes(data)
    try:
        elfpatch.patch(path, inplace=inplace)
    except elfpatch.ElfPatchError as exc:
        assert_own_error(exc)
        if path.read_bytes() != data:
            raise AssertionError("a failed run modified its input") from exc
    else:
        check_changes(data, path.read_bytes(), kind)
    left = sorted(os.listdir(WORK))
    if left != [path.name]:
        raise AssertionError(f"files left beside the input: {left}")
    path.unlink()


def wheel(lib: bytes, stored: bool) -> bytes:
    out = io.BytesIO()
    files = {"pkg/__init__.py": b"", "pkg/lib.so": lib, "pkg-1.0.dist-info/METADATA": b"Name: pkg\n"}
    files["pkg-1.0.dist-info/RECORD"] = "".join(f"{n},,\n" for n in files).encode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in files.items():
            info = zipfile.ZipInfo(name, (2021, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if stored and name.endswith(".so") else zipfile.ZIP_DEFLATED
            z.writestr(info, body)
    return out.getvalue()


def seeds(directory: Path) -> None:
    so, obj = (BUILD / "libholder_v1.so").read_bytes(), (BUILD / "holder_v1.o").read_bytes()
    ar_dir = Path(tempfile.mkdtemp(prefix="elfpatch-atheris-ar-"))
    shutil.copy(BUILD / "holder_v1.o", ar_dir / "holder_member_with_a_long_name.o")
    (ar_dir / "notes.txt").write_text("text\n")
    subprocess.run(["ar", "rcs", "lib.a", "holder_member_with_a_long_name.o", "notes.txt"], check=True,
                   cwd=ar_dir)
    archive = (ar_dir / "lib.a").read_bytes()
    shutil.rmtree(ar_dir)
    for name, body in {"elf_so": bytes([0]) + so, "elf_o": bytes([1]) + obj, "ar": bytes([2]) + archive,
                       "ar_inplace": bytes([3]) + archive, "whl_deflated": bytes([4]) + wheel(so, False),
                       "whl_stored": bytes([4]) + wheel(so, True)}.items():
        (directory / name).write_bytes(body)
    # Headers that lie (the loader's view and the section view part ways): tests/unique/lies.py makes them.
    sys.path.insert(0, str(ROOT / "tests"))
    from unique.lies import EXTENDED, LOADER_LIES

    for name, lie in {**LOADER_LIES, **EXTENDED}.items():
        (directory / f"elf_lie_{name}").write_bytes(bytes([0]) + lie(so))


def main() -> None:
    if not (BUILD / "libholder_v1.so").exists():
        sys.exit("build the fixtures first: make -C native_tests/unique")
    argv = list(sys.argv)
    if not any(not a.startswith("-") for a in argv[1:]):  # no corpus directory given: start from the seeds
        corpus = Path(tempfile.mkdtemp(prefix="elfpatch-atheris-corpus-"))
        seeds(corpus)
        argv.append(str(corpus))
        print(f"corpus: {corpus}", file=sys.stderr)
    try:
        atheris.Setup(argv, test_one_input)
        atheris.Fuzz()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
