"""`elfpatch inits --deps`: the library search and the order of a whole load, against glibc itself
(LD_DEBUG=files prints every "calling init:" and "calling fini:" in the order it makes the calls) and against
the fixtures' traces, at start-up, at exit, at dlopen and at dlclose."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main
from jsonschema_check import cli_json

from elfpatch.elf.loadorder import LdCache, resolve
from inits.helpers import FINI_KINDS, INIT_KINDS, run_trace, token, user_entries, variant_dir

CHAIN = {"chain_main", "libchain_mid.so", "libchain_base.so"}


def loader_order(command: list[str],
                 env: dict[str, str] | None = None) -> tuple[list[str], list[str], list[str]]:
    """(preinit, init, fini) object paths as glibc reports them with LD_DEBUG=files; the main program's own
    init is not reported (it runs from __libc_start_main), its fini is, with an empty name. The loader writes
    to LD_DEBUG_OUTPUT, a file of its own: a program may close stderr before its finalizers run (ls does)."""
    with tempfile.TemporaryDirectory() as d:
        run_env = dict(os.environ if env is None else env, LD_DEBUG="files",
                       LD_DEBUG_OUTPUT=os.path.join(d, "ld"))
        proc = subprocess.run(command, capture_output=True, text=True, env=run_env, timeout=60)
        assert proc.returncode == 0, (command, proc.returncode, proc.stderr[-2000:])
        logs = [os.path.join(d, n) for n in os.listdir(d)]
        assert len(logs) == 1, f"one process, one LD_DEBUG_OUTPUT.PID file: {logs}"
        with open(logs[0]) as f:
            log = f.read()
    out: dict[str, list[str]] = {"preinit": [], "init": [], "fini": []}
    for line in log.splitlines():
        m = re.search(r"calling (preinit|init|fini): (.*?)(?: \[\d+\])?$", line)
        if m:
            out[m.group(1)].append(m.group(2).strip())
    return out["preinit"], out["init"], out["fini"]


def same_files(ours: list[str], glibc: list[str]) -> bool:
    return [os.path.realpath(p) for p in ours] == [os.path.realpath(p) for p in glibc]


def assert_matches_loader(program: Path, env: dict[str, str] | None = None) -> None:
    load = resolve(str(program), env=env if env is not None else os.environ)
    assert not load.missing
    pre, init, fini = loader_order([str(program)], env)
    paths = [o.info.path for o in load.objects]
    assert pre == [str(program)]
    assert same_files([paths[i] for i in load.init_order[:-1]], init)  # the program itself last, unreported
    assert load.init_order[-1] == 0
    assert fini[0] == "" and load.fini_order[0] == 0
    assert same_files([paths[i] for i in load.fini_order[1:]], fini[1:])


@pytest.mark.parametrize("variant", ["gnu", "relr", case("lld", needs=["ld.lld"]), "stripped"])
def test_chain_order_matches_glibc(init_build: Path, variant: str) -> None:
    assert_matches_loader(variant_dir(init_build, variant) / "chain_main")


# Real programs with real dependency graphs (clang: 18 objects, with libLLVM's 1300-odd initializers).
SYSTEM_ARGS = {"/bin/ls": ["/"], "/usr/bin/python3": ["-c", "pass"], "/usr/bin/clang": ["--version"]}


@pytest.mark.parametrize("program", ["/bin/ls", case("/usr/bin/clang", needs=["clang"]), "/usr/bin/python3"])
def test_system_program_order_matches_glibc(program: str) -> None:
    require_tool(program, packages="coreutils, python3, clang")  # under CI, a missing program is a failure
    load = resolve(program)
    _pre, init, fini = loader_order([program, *SYSTEM_ARGS[program]])
    paths = [o.info.path for o in load.objects]
    assert same_files([paths[i] for i in load.init_order[:-1]], init)
    assert fini and fini[0] == "", fini  # the program's own fini first, reported with an empty name
    assert same_files([paths[i] for i in load.fini_order[1:]], fini[1:])


def test_ld_library_path_loses_to_rpath(init_build: Path, tmp_path: Path) -> None:
    """libchain_mid.so has DT_RPATH $ORIGIN: searched before LD_LIBRARY_PATH, so the copy there is ignored."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    shutil.copy(init_build / "relr" / "libchain_base.so", decoy)
    env = dict(os.environ, LD_LIBRARY_PATH=str(decoy))
    load = resolve(str(init_build / "gnu" / "chain_main"), env=env)
    base = next(o.info.path for o in load.objects if o.name == "libchain_base.so")
    assert Path(base).parent.resolve() == (init_build / "gnu").resolve()
    assert_matches_loader(init_build / "gnu" / "chain_main", env)


def test_ld_library_path_beats_runpath(init_build: Path, tmp_path: Path) -> None:
    """chain_main has DT_RUNPATH $ORIGIN: LD_LIBRARY_PATH comes first, so its libchain_mid.so wins, and that
    copy's DT_RPATH $ORIGIN then finds its own libchain_base.so."""
    other = tmp_path / "other"
    other.mkdir()
    for lib in ("libchain_mid.so", "libchain_base.so"):
        shutil.copy(init_build / "relr" / lib, other)
    # "::" is an empty element: the current directory.
    env = dict(os.environ, LD_LIBRARY_PATH=f"/nonexistent::{other}")
    load = resolve(str(init_build / "gnu" / "chain_main"), env=env)
    found = {o.name: Path(o.info.path).parent for o in load.objects if o.name in CHAIN}
    assert found == {"libchain_mid.so": other, "libchain_base.so": other}
    assert_matches_loader(init_build / "gnu" / "chain_main", env)


def test_origin_of_a_symlinked_program(init_build: Path, tmp_path: Path) -> None:
    """ld.so takes the main program's $ORIGIN from /proc/self/exe, with symlinks resolved."""
    link = tmp_path / "chain_main"
    link.symlink_to(init_build / "gnu" / "chain_main")
    assert_matches_loader(link)


def test_deps_entries_match_trace(init_build: Path) -> None:
    program = init_build / "gnu" / "chain_main"
    proc = run_main("inits", "--deps", "--json", str(program), check=True)
    load = cli_json(proc.stdout)["loads"][0]
    ours = [e for e in load["init"] if Path(e["object"]).name in CHAIN]
    trace = run_trace(program)
    assert [token(e) for e in user_entries(ours, INIT_KINDS)] == trace.of("preinit", "init")
    ours_fini = [e for e in load["fini"] if Path(e["object"]).name in CHAIN]
    assert [token(e) for e in user_entries(ours_fini, FINI_KINDS)] == trace.of("fini")
    assert load["init"][0]["kind"] == "preinit_array"  # before any library's initializer
    assert [Path(p).name for p in load["init_order"] if Path(p).name in CHAIN] == \
        ["libchain_base.so", "libchain_mid.so", "chain_main"]


@pytest.mark.parametrize("variant", ["gnu", "relr", case("lld", needs=["ld.lld"])])
def test_dlopen_and_dlclose(init_build: Path, variant: str) -> None:
    """A library as PATH: what dlopen runs (dependencies first) and what dlclose runs (the reverse)."""
    lib = variant_dir(init_build, variant) / "libchain_mid.so"
    trace = run_trace(variant_dir(init_build, variant) / "chain_dlopen")
    load = cli_json(run_main("inits", "--deps", "--json", str(lib), check=True).stdout)["loads"][0]
    assert not load["main_program"]
    ours = [e for e in load["init"] if Path(e["object"]).name in CHAIN]
    assert [token(e) for e in user_entries(ours, INIT_KINDS)] == \
        trace.of("init", events=trace.between("dlopen-begin", "dlopen-end"))
    ours_fini = [e for e in load["fini"] if Path(e["object"]).name in CHAIN]
    assert [token(e) for e in user_entries(ours_fini, FINI_KINDS)] == \
        trace.of("fini", events=trace.between("dlclose-begin", "dlclose-end"))


def test_missing_dependency(init_build: Path, tmp_path: Path) -> None:
    shutil.copy(init_build / "gnu" / "chain_main", tmp_path)
    program = str(tmp_path / "chain_main")
    doc = cli_json(run_main("inits", "--deps", "--json", program, check=True).stdout)
    assert doc["loads"][0]["missing"] == [{"name": "libchain_mid.so", "needed_by": program}]
    text = run_main("inits", "--deps", program, check=True).stdout
    assert f"not found: libchain_mid.so (needed by {program})" in text


def test_ld_so_cache_agrees_with_ldconfig() -> None:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    if not os.path.exists(ldconfig):
        pytest.skip("no ldconfig")
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    cache = LdCache()
    pairs = re.findall(r"^\s+(\S+) \(([^)]*)\) => (\S+)$", out, re.MULTILINE)
    assert pairs
    for name, _flags, path in pairs:
        assert path in cache.lookup(name), (name, path)


def test_each_load_is_resolved_once(init_build: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Guarantee: `inits --deps` resolves each file's load once. With --siof the analysis orders reads by the
    load and the whole load is listed from it: one resolution shared, not two (each one a library search)."""
    import elfpatch.commands.run as run_module
    import elfpatch.elf.loadorder as loadorder
    from elfpatch.cli import main

    real = loadorder.resolve
    resolved: list[str] = []

    def counting(root: str, *args: object, **kwargs: object) -> loadorder.Load:
        resolved.append(root)
        return real(root, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loadorder, "resolve", counting)
    monkeypatch.setattr(run_module, "on_logger", lambda hook: None)  # the CLI's warning lines stay out of this process
    files = [str(init_build / "gnu" / "chain_main"), str(init_build / "gnu" / "libchain_mid.so")]
    assert main(["inits", "--deps", "--siof", "--json", *files]) == 0
    doc = cli_json(capsys.readouterr().out)
    assert [ld["path"] for ld in doc["loads"]] == files and all(f["status"] == "listed" for f in doc["files"])
    assert resolved == files
