"""The demangler against c++filt: a glob on demangled names (--symbol, --keep) is never silently blind.

elfpatch demangles with libstdc++'s own __cxa_demangle after bounding the demangled length by a walk of the
mangled name (elfpatch.mangled); a name the walk cannot bound, or whose demangled form is too long, is not
demangled, and a glob that could have matched it warns. The reference is `c++filt -i` (no verbose
expansion of std::string and the like: what `nm -C` prints and __cxa_demangle prints)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_main
from jsonschema_check import cli_json

from elfpatch import mangled, symbols
from elfpatch.symbols import NameFilter

COUNTER = ("_ZZ7counterINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESt6vectorIS5_SaIS5_EEEDTplcldtfp_5count"
           "fp0_Ecldtfp_4sizeEERKSt3mapIT_T0_St4lessISB_ESaISt4pairIKSB_SC_EEERSG_E5calls")
# Names whose length is in their references: a function template over a long argument (and a pack of them),
# its parameters and a decltype repeating them.
_LONG = "N3std6vectorI" + "300" + "w" * 300 + "EE"
WIDE = [f"_Z1fI{_LONG}EvT_T_T_T_T_", f"_Z1fIJ{_LONG}{_LONG}EEvDpT_", f"_Z1fI{_LONG}EDTplfp_fp_ET_T_T_",
        f"_ZN1AI{_LONG}E1gIiEEvT_T_T_"]
LIBRARIES = ("libLLVM-15.so.1", "libQt5Core.so.5", "libprotobuf.so.32", "libboost_regex.so.1.74.0",
             "libboost_serialization.so.1.74.0", "libboost_program_options.so.1.74.0")


def needs_tools() -> None:
    if symbols._cxa_demangle() is None or shutil.which("c++filt") is None or shutil.which("nm") is None:
        pytest.skip("needs libstdc++'s __cxa_demangle, c++filt and nm")


def mangled_names(*libs: Path) -> list[str]:
    """Every C++ name of the libraries' symbol tables (defined and undefined, dynamic and static)."""
    names: set[str] = set()
    for lib in libs:
        for flags in (["-D"], []):
            out = subprocess.run(["nm", *flags, str(lib)], capture_output=True, text=True).stdout
            names |= {line.split()[-1].split("@")[0] for line in out.splitlines() if " _Z" in line}
    return sorted(names)


def compare(names: list[str]) -> dict[str, list]:
    """Each name's demangled form against c++filt's (one batch call): agree, differ, or not demangled (and
    then whether a glob could be blind to it without a warning); and any bound below the real length."""
    filt = subprocess.run(["c++filt", "-i"], input="\n".join(names) + "\n", capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert len(filt) == len(names)
    out: dict[str, list] = {"agree": [], "differ": [], "not_demangled": [], "silent": [], "unsound": []}
    probe = NameFilter(["no such name*"])
    for name, theirs in zip(names, filt):
        ours = symbols.demangle(name)
        if ours == theirs or (ours is None and theirs == name):
            out["agree"].append(name)
        elif ours is None:
            out["not_demangled"].append(name)
            if probe.blind_spot(name, None) is None:
                out["silent"].append(name)
        else:
            out["differ"].append((name, ours, theirs))
        real = symbols._demangle_unbounded(name)
        if real is not None and mangled.demangled_bound(name) < len(real):
            out["unsound"].append(name)
    return out


def runtime_libraries() -> list[Path]:
    """The C++ runtime the demangler comes from (loaded by asking for the demangler)."""
    symbols._cxa_demangle()
    maps = Path("/proc/self/maps").read_text().split()
    return sorted({Path(w) for w in maps if "libstdc++" in w})


def test_decltype_static_is_demangled_and_selected(unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: a glob on demangled names sees a static of a function with a `-> decltype(...)` return type.
    Its name holds an expression, which the length bound gave up on: `demangled: null`, so `--check --symbol
    'counter<*'` exited 0 and `--keep 'counter<*'` kept nothing."""
    needs_tools()
    lib = tmp_path / "libdecltype.so"
    shutil.copyfile(unique_build / "libdecltype.so", lib)
    (theirs,) = subprocess.run(["c++filt", "-i", COUNTER], capture_output=True, text=True).stdout.splitlines()
    assert symbols.demangle(COUNTER) == theirs and theirs.startswith("counter<std::")
    proc = run_main("unique", "--check", "--json", "--symbol", "counter<*", str(lib))
    assert proc.returncode == 1, proc.stderr
    (row,) = {(s["name"], s["demangled"]) for s in cli_json(proc.stdout)["files"][0]["symbols"]}
    assert row == (COUNTER, theirs)
    before = lib.read_bytes()
    proc = run_main("unique", "--json", "--keep", "counter<*", str(lib))
    assert proc.returncode == 0, proc.stderr
    (entry,) = cli_json(proc.stdout)["files"]
    assert entry["symbols"] == [] and entry["kept"] >= 1 and entry["warnings"] == []
    assert lib.read_bytes() == before


def test_demangler_agrees_with_cxxfilt_on_the_runtime_and_fixtures(unique_build: Path) -> None:
    """Guarantee: the demangled names globs match are c++filt's. Every C++ name of libstdc++ and of the
    fixtures (and a few whose length is in their references), in one batch: each agrees with `c++filt -i` or
    is reported as not demangled (never silently), and the length bound is never below the real length."""
    needs_tools()
    libs = [*runtime_libraries(), *sorted(unique_build.glob("*.so")), unique_build / "holder_v1.o"]
    names = mangled_names(*libs) + WIDE
    result = compare(names)
    assert len(names) > 1000, f"only {len(names)} names from {libs}"
    assert result["differ"] == [] and result["silent"] == [] and result["unsound"] == [], \
        {k: v[:5] for k, v in result.items() if k != "agree"}
    assert len(result["agree"]) + len(result["not_demangled"]) == len(names)


@pytest.mark.slow
def test_demangler_agrees_with_cxxfilt_on_large_libraries() -> None:
    """The same over the large C++ libraries installed here (libLLVM, Qt, protobuf, boost): no name silently
    blind, no bound below the real length, and agreement but for spelling differences between libstdc++'s
    demangler and c++filt's (two copies of libiberty; c++filt 2.40 parenthesizes a call's callee)."""
    needs_tools()
    found = [Path(d) / n for n in LIBRARIES for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
             if (Path(d) / n).exists()]
    if not found:
        pytest.skip(f"none of {LIBRARIES} is installed")
    names = mangled_names(*found)
    result = compare(names)
    assert result["silent"] == [] and result["unsound"] == [], {k: v[:5] for k, v in result.items() if k != "agree"}
    assert len(result["differ"]) * 1000 < len(names), result["differ"][:5]
    for name, ours, theirs in result["differ"]:
        assert ours.replace("(", "").replace(")", "") == theirs.replace("(", "").replace(")", ""), (name, ours, theirs)


def test_a_name_not_demangled_makes_a_glob_warn(tmp_path: Path) -> None:
    """Guarantee: a glob on demangled names is never silently blind. A unique name whose demangled form is
    too long to build is matched on its mangled name only, and a --symbol or --keep glob that could have
    matched its demangled form says so in the file's warnings; without globs nothing is said."""
    from unique.test_hostile_inputs import doubling_name

    name = doubling_name(14)  # demangles to ~200 KB: past MAX_DEMANGLED
    assert symbols.demangle(name) is None
    asm = tmp_path / "long.s"
    asm.write_text(f'.globl {name}\n.type {name}, @gnu_unique_object\n.size {name}, 4\n'
                   f'.section .bss\n{name}:\n.zero 4\n.section .note.GNU-stack,"",@progbits\n')
    lib = tmp_path / "liblong.so"
    subprocess.run(["gcc", "-shared", "-o", str(lib), str(asm)], check=True)
    for args, status in ((["--symbol", "f(X<*"], 0), (["--keep", "f(X<*"], 1), ([], 1), (["--symbol", "_Z1f*"], 1)):
        proc = run_main("unique", "--check", "--json", *args, str(lib))
        assert proc.returncode == status, (args, proc.stderr)
        warnings = cli_json(proc.stdout)["files"][0]["warnings"]
        blind = [w for w in warnings if "not demangled" in w]
        if args and args[1] == "f(X<*":
            assert blind and "matched against its mangled name only" in blind[0], (args, warnings)
        else:
            assert blind == [], (args, warnings)


@pytest.mark.slow
def test_the_bound_holds_on_mutated_names() -> None:
    """Guarantee: the length bound is an upper bound, also on names no compiler wrote. The C++ names of
    libstdc++ with their back-references replaced at random (substitutions, template and function
    parameters, decltype and expression arguments, packs): wherever the bound lets the demangler run, the
    demangled name is no longer than the bound."""
    import random
    import re

    needs_tools()
    refs = re.compile(r"S[0-9A-Z]*_|T[0-9]*_")
    pool = [n for n in mangled_names(*runtime_libraries()) if refs.search(n)]
    pieces = ["S_", "S0_", "S1_", "S3_", "T_", "T0_", "T1_", "fp_", "DTplS_S0_E", "DTcl3fooT_EE", "DpT_",
              "JS_S0_E", "IS_S_E", "IXadL_Z1fvEEE", "Xsr1A1xE"]
    pool += WIDE
    rng = random.Random(23)
    checked = 0
    for _ in range(4000):
        name = rng.choice(pool)
        for _ in range(rng.randint(1, 3)):
            spots = list(refs.finditer(name))
            if spots:
                m = rng.choice(spots)
                name = name[: m.start()] + rng.choice(pieces) + name[m.end():]
        bound = mangled.demangled_bound(name)
        if bound > 1 << 22:
            continue
        real = symbols._demangle_unbounded(name)
        if real is not None:
            checked += 1
            assert bound >= len(real), (name, bound, len(real))
    assert checked > 500, f"only {checked} mutated names demangled"
