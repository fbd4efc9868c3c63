"""Fixtures for the harness tests: the no_destruction build, patched copies of the unique fixtures, and small
libraries compiled on the spot for the cases no fixture covers (a crash, a self-pinning library)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
from conftest import require_tool
from helpers import native_build, run_main
from jsonschema_check import cli_json

# The unique/ fixtures that `elfpatch unique` gets to patch (libuser.so has no unique symbol of its own).
UNIQUE_LIBS = ("libholder_v1.so", "libholder_v2.so", "libplugin.so", "libnodelete.so", "libtls.so")


@pytest.fixture(scope="session")
def nd_build() -> Path:
    """native_tests/no_destruction/build, built once per session."""
    return native_build("no_destruction")


@pytest.fixture(scope="session")
def dl_build() -> Path:
    """native_tests/dlcheck/build (scopes, root causes, hostile libraries), built once per session."""
    return native_build("dlcheck")


@pytest.fixture(scope="session")
def patched(unique_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unique/ libraries after `elfpatch unique -o`, under their own names (libuser.so, copied as it is,
    finds the patched libholder_v1.so through its $ORIGIN runpath)."""
    out = tmp_path_factory.mktemp("patched")
    for name in UNIQUE_LIBS:
        run_main("unique", "-o", str(out / name), str(unique_build / name), check=True)
    shutil.copy(unique_build / "libuser.so", out / "libuser.so")
    return out


@pytest.fixture(scope="session")
def build_lib(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_lib(name, c_source, *gcc_flags) -> path of a freshly compiled shared library."""
    require_tool("gcc")
    where = tmp_path_factory.mktemp("libs")

    def build(name: str, source: str, *flags: str) -> Path:
        src = where / f"{name}.c"
        src.write_text(source)
        out = where / f"{name}.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src), *flags], check=True)
        return out

    return build


def dlcheck_cli(*paths: Path | str, human: bool = False, options: Sequence[str] = (),
                **run_args: Any) -> tuple[int, dict | str, str]:
    """`elfpatch dlcheck [--json] [OPTIONS] PATH...` in this process: (exit status, parsed JSON or text, stderr).
    With ``run_args`` (env, cwd, for subprocess.run), in a child process."""
    args = ["dlcheck", *options, *map(str, paths)] if human else ["dlcheck", "--json", *options, *map(str, paths)]
    if run_args:
        proc = subprocess.run([sys.executable, "-m", "elfpatch", *args], capture_output=True, text=True,
                              **run_args)
        assert "Traceback" not in proc.stderr, proc.stderr
    else:
        proc = run_main(*args)
    return proc.returncode, (proc.stdout if human else cli_json(proc.stdout)), proc.stderr
