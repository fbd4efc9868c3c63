"""Fixtures for the pipeline-target tests: objects, libraries and an outside tool or two."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool

from targets.helpers import compile_c, compile_holder


@pytest.fixture(scope="session")
def objs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """holder.cpp compiled as version 1 and 2 (each with two unique symbols), and a plain C object."""
    d = tmp_path_factory.mktemp("objs")
    return {
        "v1": compile_holder(d / "holder_v1.o", 1),
        "v2": compile_holder(d / "holder_v2.o", 2),
        "plain": compile_c(d / "plain.o", "int plain_answer(void) { return 42; }\n"),
    }


@pytest.fixture(scope="session")
def big_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A holder library with ~3 MB of varied read-only data between .dynsym and .symtab, so that its deflate
    stream has many blocks and a patched wheel reuses most of them."""
    d = tmp_path_factory.mktemp("big")
    src = d / "blob.c"
    lines = [f"const unsigned int blob_{i}[256] = {{" + ",".join(str((i * 2654435761 + j * 40503) % 65521)
                                                         for j in range(256)) + "};" for i in range(3000)]
    src.write_text("\n".join(lines) + "\n")
    blob = d / "blob.o"
    subprocess.run(["gcc", "-fPIC", "-c", "-o", str(blob), str(src)], check=True)
    obj = compile_holder(d / "holder.o", 1)
    lib = d / "libholder_big.so"
    subprocess.run(["g++", "-shared", "-o", str(lib), str(obj), str(blob)], check=True)
    return lib


@pytest.fixture
def llvm_ar() -> str:
    require_tool("llvm-ar", packages="llvm (for --format=bsd)")
    return shutil.which("llvm-ar") or "llvm-ar"
