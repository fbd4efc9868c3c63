"""Corrupted code and tables: the analysis ends in a result or in the project's own error, never in another
exception (the CLI would print `internal error`, the API would leak it)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case

from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfPatchError
from elfpatch.inits.analysis import analyze
from elfpatch.inits.order import initializers


@pytest.mark.parametrize("fixture", ["gcc-O2/libdtors.so", case("clang-O0/dtors", needs=["clang++"]),
                                     case("a64-gcc-O2/libdtors.so", needs=["aarch64-linux-gnu-g++"])])
def test_mutants_end_in_a_result_or_our_error(siof_build: Path, fixture: str) -> None:
    compiler = {"gcc": "g++", "clang": "clang++", "a64": "aarch64-linux-gnu-g++"}[fixture.split("-")[0]]
    require_tool(compiler, packages="g++, clang, g++-aarch64-linux-gnu")
    original = (siof_build / fixture).read_bytes()
    rng = random.Random(fixture)
    outcomes = {"result": 0, "error": 0}
    for _ in range(40):
        data = bytearray(original)
        for _ in range(rng.randint(1, 200)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
        try:
            elf = ElfFile(bytes(data), "mutant")
            listing = {"init": initializers(elf)["init"]}
            analyze(elf, listing)
            outcomes["result"] += 1
        except ElfPatchError:
            outcomes["error"] += 1
    assert outcomes["result"] and outcomes["error"]  # both paths were exercised
