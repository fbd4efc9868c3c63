"""The library search of `inits --deps` is bounded by what the search directories hold, not by DT_NEEDED
entries x search directories (2,000 x 5,000 were 10 M open() calls for one 160 KB file)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import elfpatch.elf.loadorder as loadorder

NEEDED, DIRS = 40, 200


def link(out: Path, *args: str) -> Path:
    subprocess.run(["ld", "-shared", "-o", str(out), *args], check=True, capture_output=True)
    return out


def test_search_opens_only_files_that_exist_under_the_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guarantee: the search opens (at most) the files that exist under a needed name, each once, while
    finding what ld.so finds: the first directory, in DT_RPATH order, holding an ELF file of the right kind;
    a file of that name that is no such ELF file is passed over."""
    empty = tmp_path / "empty.o"
    subprocess.run(["cc", "-c", "-x", "c", "/dev/null", "-o", str(empty)], check=True)
    dirs = [tmp_path / f"d{i:03d}" for i in range(DIRS)]
    libs = dirs[-1]
    libs.mkdir(parents=True)
    dirs[DIRS // 2].mkdir()
    (dirs[DIRS // 2] / "libn0.so").write_bytes(b"not an ELF file")  # skipped, as ld.so skips it
    names = [f"libn{i}.so" for i in range(NEEDED)]
    for name in names:
        link(libs / name, "-soname", name, str(empty))
    root = link(tmp_path / "root.so", str(empty), "--no-as-needed", "--disable-new-dtags",
                "-rpath", ":".join(map(str, dirs)), *(str(libs / n) for n in names))
    opened: list[str] = []
    real = loadorder._arch_of

    def counting(path: str):
        opened.append(path)
        return real(path)

    monkeypatch.setattr(loadorder, "_arch_of", counting)
    load = loadorder.resolve(str(root), env={}, cache=loadorder.LdCache(str(tmp_path / "no-cache")))
    found = {o.name: o.info.path for o in load.objects[1:] if o.name in names}
    assert found == {n: str(libs / n) for n in names}
    searched = [p for p in opened if p.startswith(str(tmp_path))]
    assert sorted(searched) == sorted([str(dirs[DIRS // 2] / "libn0.so")] + list(found.values())), \
        f"{len(searched)} files opened for {NEEDED} names over {DIRS} directories"


def test_ld_so_cache_that_is_a_fifo_does_not_block(tmp_path: Path) -> None:
    """Guarantee: no open may block. A FIFO where the loader's cache is read is no cache (as for ld.so, which
    maps only a regular file), not a wait for a writer that never comes."""
    fifo = tmp_path / "ld.so.cache"
    os.mkfifo(fifo)
    code = "import sys\nfrom elfpatch.elf.loadorder import LdCache\nprint(len(LdCache(sys.argv[1]).entries))\n"
    proc = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "0\n", proc.stderr
