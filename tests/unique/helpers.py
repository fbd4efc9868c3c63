"""Small helpers for the unique tests: run the driver, compare files byte by byte."""
from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import drop_section_headers as drop_section_headers  # its home is tests/helpers.py


def run_driver(driver: Path, a: Path, b: Path, prefix: tuple[str, ...] = ()) -> dict[str, str]:
    """Run unique_driver (optionally under qemu) and return its key=value lines."""
    out = subprocess.run([*prefix, str(driver), str(a.resolve()), str(b.resolve())],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def changed_offsets(before: bytes, after: bytes) -> list[int]:
    assert len(before) == len(after)
    return [i for i, (x, y) in enumerate(zip(before, after)) if x != y]


def temps(directory: Path) -> list[str]:
    """Names of the temp files in ``directory`` (a run's, finished or killed)."""
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def info_offsets(image: bytes) -> set[int]:
    """Offsets of every st_info byte of every symbol table in ``image`` (empty if it does not parse)."""
    import elfpatch
    from elfpatch.elf.file import ElfFile

    try:
        elf = ElfFile(image)
        return {t.info_offset(i) for t in elf.symbol_tables() for i in range(t.count)}
    except elfpatch.ElfPatchError:
        return set()
