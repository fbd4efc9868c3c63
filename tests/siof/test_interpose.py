"""A shared library's own exported names bind to the first definition in the lookup scope: a program that
defines the same function or object interposes it, so the library's initializer calls the program's
``get_port()`` (which reads the program's g_port, not yet built) or reads the program's g_cfg (built later by the
program's initializer), or runs the program's ``lib_ctor`` from its own init_array slot. The library alone used
to say complete with no finding, following its own definition.
Now it says incomplete (its own interposable names, named in a note); the program's load (--deps) binds the
names as the loader does and finds the reads before construction (the run printed 0 for both)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

GET_PORT = ('#include <stdio.h>\nstruct Obj { int built; Obj(); };\nextern "C" volatile int k_seven;\n'
            "volatile int k_seven = 7;\nObj::Obj() : built(k_seven) {}\nObj g_port;\n"
            'extern "C" int get_port() { printf("g_port %d\\n", g_port.built); return g_port.built; }\n'
            "int main() {}\n")  # the program's get_port, reading its own g_port (built after the library's)
CASES = {  # what the library's initializer reaches through its GOT, and the program's interposing definition
    "function": ('extern "C" int get_port() { return 80; }\nstatic int lib_port = get_port();\n', GET_PORT,
                 "g_port"),
    "data": ('#include <stdio.h>\nstruct Cfg { int built; };\nCfg g_cfg = {7};\n'
             'static int lib_seen = printf("g_cfg %d\\n", g_cfg.built);\n',
             'extern "C" volatile int k_seven;\nvolatile int k_seven = 7;\n'
             "struct Cfg { int built; Cfg() : built(k_seven) {} };\nCfg g_cfg;\nint main() {}\n", "g_cfg"),
    # the library reaches its own get_port through a data word whose relocation names it (R_*_64 / ABS64
    # against the symbol): the loader binds that word to the program's definition, as it binds a GOT slot
    "function-pointer": ('extern "C" int get_port() { return 80; }\nstatic int (* volatile fp)() = get_port;\n'
                         "static int lib_port = fp();\n", GET_PORT, "g_port"),
    "constant-table": ('extern "C" int get_port() { return 80; }\nstatic int (* const tbl[])() = {get_port};\n'
                       "static int (* const * volatile at)() = tbl;\nstatic int lib_port = (*at)();\n",
                       GET_PORT, "g_port"),
    # the loader reads the library's init_array slot relocated against its own exported constructor function
    # (R_*_64 / ABS64 against the symbol): the program's definition of the name runs there instead
    "init-array-slot": ('extern "C" __attribute__((constructor)) void lib_ctor() {}\n',
                        GET_PORT.replace("int main", 'extern "C" void lib_ctor() { get_port(); }\nint main'),
                        "g_port"),
    "vtable": ("struct Base { virtual int get(); };\nint Base::get() { return 80; }\nstatic Base b;\n"
               "static Base* volatile pb = &b;\nstatic int lib_port = pb->get();\n",
               GET_PORT.replace("int main", "struct Base { virtual int get(); };\n"
                                "int Base::get() { return get_port(); }\nint main"), "g_port"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_library_name_the_program_interposes(tmp_path: Path, case: str) -> None:
    require_tool("g++", packages="g++")
    lib_src, prog_src, obj = CASES[case]
    (tmp_path / "lib.cpp").write_text(lib_src)
    (tmp_path / "prog.cpp").write_text(prog_src)
    lib, exe = tmp_path / "libcfg.so", tmp_path / "prog"
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(lib), str(tmp_path / "lib.cpp")], check=True,
                   capture_output=True)
    subprocess.run(["g++", "-O2", "-o", str(exe), str(tmp_path / "prog.cpp"), f"-L{tmp_path}", "-Wl,--no-as-needed",
                    "-lcfg", "-Wl,-rpath,$ORIGIN"], check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == f"{obj} 0\n"
    alone = json.loads(run_main("inits", "--siof", "--json", str(lib), check=True).stdout)["files"][0]
    assert not alone["analysis_complete"]
    assert any("may interpose" in n for n in alone["analysis_notes"])
    load = json.loads(run_main("inits", "--siof", "--deps", "--json", str(exe), check=True).stdout)["loads"][0]
    assert [(Path(f["reader"]["file"]).name, f["object"]["symbol"], f["verdict"]) for f in load["findings"]] \
        == [("libcfg.so", obj, "before-construction")]


def test_a_library_linked_symbolic_binds_its_own(tmp_path: Path) -> None:
    """-Bsymbolic: the library's own definitions come first in its lookups, so nothing interposes them (no
    note); the same holds for the program itself, first in every scope."""
    require_tool("g++", packages="g++")
    (tmp_path / "lib.cpp").write_text(CASES["function"][0])
    lib = tmp_path / "libcfg.so"
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-Wl,-Bsymbolic", "-o", str(lib), str(tmp_path / "lib.cpp")],
                   check=True, capture_output=True)
    alone = json.loads(run_main("inits", "--siof", "--json", str(lib), check=True).stdout)["files"][0]
    assert not any("may interpose" in n for n in alone["analysis_notes"])


def test_a_library_that_builds_the_interposing_object_itself_reads_it_built(tmp_path: Path) -> None:
    """The library's initializer constructs g_obj through its GOT (bound to the program's g_obj), then reads it:
    built (the run prints 7), though the program's initializer builds it again later -- no finding of the load."""
    require_tool("g++", packages="g++")
    obj = ('#include <stdio.h>\nextern "C" volatile int k_seven;\n'
           "struct Obj { int built; Obj() : built(k_seven) {} ~Obj() {} };\n")
    (tmp_path / "lib.cpp").write_text(obj + 'Obj g_obj;\nstatic int a = printf("g_obj %d\\n", g_obj.built);\n')
    (tmp_path / "prog.cpp").write_text(obj + "volatile int k_seven = 7;\nObj g_obj;\nint main() {}\n")
    lib, exe = tmp_path / "libobj.so", tmp_path / "prog"
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(lib), str(tmp_path / "lib.cpp")], check=True,
                   capture_output=True)
    subprocess.run(["g++", "-O2", "-o", str(exe), str(tmp_path / "prog.cpp"), f"-L{tmp_path}", "-Wl,--no-as-needed",
                    "-lobj", "-Wl,-rpath,$ORIGIN"], check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "g_obj 7\n"
    load = json.loads(run_main("inits", "--siof", "--deps", "--json", str(exe), check=True).stdout)["loads"][0]
    assert load["findings"] == []


INLINE = ("static volatile int k_seven = 7;\nstruct U { int v; U() : v(k_seven) {} };\n"
          "inline U g_inl;\n")  # clang: weak, with a weak guard; GCC: STB_GNU_UNIQUE


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_an_inline_variable_bound_to_another_library_is_built_by_the_readers_guarded_init(
        tmp_path: Path, cxx: str, opt: str) -> None:
    """Two libraries define an inline variable; the program names libb first (the load binds g_inl and its
    guard to libb's copies) but liba's initializers run first: liba's guarded initialization builds libb's copy
    through its GOT before liba reads it (the run prints 7). The load used to judge the read by libb's
    initializer alone: a false before-construction finding with clang, whose copies are weak."""
    require_tool(cxx, packages="g++ clang")
    (tmp_path / "u.h").write_text(INLINE)
    (tmp_path / "a.cpp").write_text('#include <cstdio>\n#include "u.h"\n'
                                    'static int seen = printf("g_inl %d\\n", g_inl.v);\n')
    (tmp_path / "b.cpp").write_text('#include "u.h"\nint get_inl() { return g_inl.v; }\n')
    for lib in ("a", "b"):
        subprocess.run([cxx, opt, "-std=c++17", "-fPIC", "-shared", "-o", str(tmp_path / f"lib{lib}.so"),
                        str(tmp_path / f"{lib}.cpp")], check=True, capture_output=True)
    (tmp_path / "main.cpp").write_text("int main() {}\n")
    exe = tmp_path / "prog"
    subprocess.run([cxx, opt, "-o", str(exe), str(tmp_path / "main.cpp"), f"-L{tmp_path}", "-Wl,--no-as-needed",
                    "-lb", "-la", "-Wl,-rpath,$ORIGIN"], check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "g_inl 7\n"
    load = json.loads(run_main("inits", "--siof", "--deps", "--json", str(exe), check=True).stdout)["loads"][0]
    assert not any(f["object"]["symbol"] == "g_inl" for f in load["findings"]), load["findings"]
