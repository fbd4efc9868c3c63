"""The real loader judges the patch: before it, two RTLD_LOCAL versions share Holder<int>::value and the first
stays resident after dlclose; after it, each sees its own value and both unload."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import run_main

from unique.helpers import run_driver


@pytest.fixture
def pair(unique_build: Path, tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "libholder_v1.so", tmp_path / "libholder_v2.so"
    shutil.copy(unique_build / "libholder_v1.so", a)
    shutil.copy(unique_build / "libholder_v2.so", b)
    return a, b


def test_unpatched_libraries_share_and_stay_resident(unique_build: Path, pair: tuple[Path, Path]) -> None:
    r = run_driver(unique_build / "unique_driver", *pair)
    assert (r["a.value"], r["b.value"], r["shared"], r["a.resident"]) == ("1", "1", "yes", "yes")


@pytest.mark.parametrize("to", ["global", "weak"])
def test_patched_libraries_are_isolated_and_unload(unique_build: Path, pair: tuple[Path, Path], to: str) -> None:
    proc = run_main("unique", "--to", to, str(pair[0]), str(pair[1]), check=True)
    assert "8 patched" in proc.stdout
    r = run_driver(unique_build / "unique_driver", *pair)
    assert (r["a.value"], r["b.value"], r["shared"]) == ("1", "2", "no")
    assert (r["a.resident"], r["b.resident"]) == ("no", "no")


def test_inplace_patch_is_equivalent(unique_build: Path, pair: tuple[Path, Path]) -> None:
    run_main("unique", "--inplace", str(pair[0]), str(pair[1]), check=True)
    r = run_driver(unique_build / "unique_driver", *pair)
    assert (r["shared"], r["a.resident"]) == ("no", "no")


def test_symbol_filter_keeps_the_rest_unique(unique_build: Path, pair: tuple[Path, Path]) -> None:
    """Only counter()'s static is rewritten: Holder<int>::value stays unique, so sharing (and NODELETE) stay."""
    proc = run_main("unique", "--json", "--symbol", "counter()::c", str(pair[0]), str(pair[1]), check=True)
    assert '"kept": 2' in proc.stdout
    r = run_driver(unique_build / "unique_driver", *pair)
    assert (r["shared"], r["a.resident"]) == ("yes", "yes")
    # The rest can be done in a second run, selecting by mangled name.
    run_main("unique", "--symbol", "_ZN6HolderIiE5valueE", str(pair[0]), str(pair[1]), check=True)
    r = run_driver(unique_build / "unique_driver", *pair)
    assert (r["shared"], r["a.resident"]) == ("no", "no")


def test_executable_with_unique_symbols_still_runs(unique_build: Path, tmp_path: Path) -> None:
    import subprocess

    for name in ("unique_exe", "unique_exe_nopie"):
        exe = tmp_path / name
        shutil.copy(unique_build / name, exe)
        before = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        run_main("unique", str(exe), check=True)
        assert exe.stat().st_mode & 0o111, "the executable bit is kept"
        assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == before
        assert "UNIQUE" not in subprocess.run(["readelf", "-sW", str(exe)], capture_output=True, text=True).stdout


def test_relocatable_object_links_without_unique(unique_build: Path, tmp_path: Path) -> None:
    """Binding 10 in a .o's .symtab becomes a unique dynamic symbol at link time; patched, it does not."""
    import subprocess

    obj = tmp_path / "holder_v1.o"
    shutil.copy(unique_build / "holder_v1.o", obj)
    proc = run_main("unique", "--json", str(obj), check=True)
    assert '".symtab"' in proc.stdout and '".dynsym"' not in proc.stdout
    lib = tmp_path / "libfromobj.so"
    subprocess.run(["g++", "-shared", "-o", str(lib), str(obj)], check=True)
    syms = subprocess.run(["readelf", "-sW", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "_ZN6HolderIiE5valueE" in syms and "UNIQUE" not in syms
