"""A stripped program's objects without a symbol: known by address and section, found by the reads that reach
them (directly, or through a local getter known only by its FDE), and never a finding on what is no object of
the program (a guard byte, crtstuff's clone-table bounds, a function-local static)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

pytestmark = pytest.mark.skipif(sys.platform != "linux" or __import__("platform").machine() != "x86_64",
                                reason="x86-64 Linux builds")

_OBJ = """
struct Obj { int v; Obj(); ~Obj(); };
"""
_PAIR = """
struct Pair { int a; int b; Pair(); };
"""
# The units in link order: the readers first, then the unit that builds ``built`` (init_array runs in link
# order), then one whose inline variable and function-local static two units test and build.
_SOURCES = {
    "obj.cpp": _OBJ + "Obj::Obj() : v(5) {}\nObj::~Obj() { v = 0; }\nint next_value() { static int n; return ++n; }\n"
               "struct Plain { int v; Plain(); };\nPlain::Plain() : v(next_value()) {}\n",
    "by_getter.cpp": _OBJ + "Obj& built_ref();\nint seen_by_getter = built_ref().v;\n",
    "direct.cpp": _OBJ + "extern Obj built;\nint seen_directly = built.v + 1;\n",
    "shared1.cpp": '#include "shared.h"\nint seen_shared1 = inline_obj.v + via2().v + plain2().v;\n',
    "shared2.cpp": '#include "shared.h"\nint seen_shared2 = inline_obj.v + local_obj().v + local_plain().v;\n',
    "pair_reader.cpp": _PAIR + "extern Pair pair;\nint seen_pair = pair.b;\n",
    # a function-local static's guarded initialization, inlined ahead of ``built``'s: it ends at its release
    "builder.cpp": _OBJ + "static Obj& first_use() { static Obj l; return l; }\nint touched = first_use().v;\n"
                   "Obj built;\n__attribute__((noinline)) Obj& built_ref() { return built; }\n",
    "pair.cpp": _PAIR + "int next_value();\nPair::Pair() : a(next_value()), b(next_value()) {}\nPair pair;\n",
    "main.cpp": "int main() { return 0; }\n",
}
_SHARED_H = _OBJ + """
inline Obj inline_obj;
__attribute__((noinline)) inline Obj& local_obj() { static Obj o; return o; }
struct Plain { int v; Plain(); };  // no destructor: nothing registered under the guard
__attribute__((noinline)) inline Plain& local_plain() { static Plain p; return p; }
// A getter chain longer than --depth 1: the walk knows what it returns (o) but does not see it build o.
#define VIA(n, m) __attribute__((noinline)) inline auto& n() { auto& r = m(); asm volatile("" ::: "memory"); return r; }
VIA(via0, local_obj)
VIA(via1, via0)
VIA(via2, via1)
VIA(plain0, local_plain)
VIA(plain1, plain0)
VIA(plain2, plain1)
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the program, built with g++ -O2 as a PIE, and its copy stripped of .symtab)."""
    require_tool("g++", "strip", packages="g++, binutils")
    d = tmp_path_factory.mktemp("stripped_objects")
    (d / "shared.h").write_text(_SHARED_H)
    for name, text in _SOURCES.items():
        (d / name).write_text(text)
    full = d / "prog"
    subprocess.run(["g++", "-std=c++17", "-O2", "-fPIE", "-pie", "-o", str(full), *_SOURCES], cwd=d, check=True,
                   capture_output=True)
    stripped = d / "prog.stripped"
    subprocess.run(["strip", "--strip-all", "-o", str(stripped), str(full)], check=True, capture_output=True)
    return full, stripped


def _analysis(path: Path, depth: int = 3) -> dict:
    proc = run_main("inits", "--dtors", "--siof", "--depth", str(depth), "--json", str(path))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["files"][0]


def _objects(path: Path) -> dict[str, tuple[int, int]]:
    """The data objects of the unstripped program: name -> (address, size)."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return {f[3]: (int(f[0], 16), int(f[1], 16)) for f in (line.split() for line in out.splitlines())
            if len(f) == 4 and f[2] in "bBdDuV"}


def _covering(objects: dict[str, tuple[int, int]], address: int) -> str:
    return next((n for n, (a, size) in objects.items() if a <= address < a + max(size, 1)), "")


def test_crtstuff_jump_through_the_got_cuts_nothing(program: tuple[Path, Path]) -> None:
    """crtstuff's register_tm_clones (no FDE, no symbol: frame_dummy is an entry of a stripped file) ends in
    ``jmp *%rax`` to the function a GOT slot holds: a tail call, not a function whose end is unknown, so the
    work budget names no function "not seen whole" (it used to make every entry of every stripped GCC program
    incomplete for that reason)."""
    f = _analysis(program[1])
    assert not any("not seen whole" in n for n in f["analysis_notes"]), f["analysis_notes"]
    assert f["analysis_complete"] is False  # stripped: never a proof


def test_objects_without_a_symbol_are_found_by_address(program: tuple[Path, Path]) -> None:
    """``built`` has no symbol in the stripped program (nothing exports it): its reads before construction --
    one direct, one through a local getter whose only extent is its FDE -- are findings naming it by address
    and section, as the unstripped program's findings name it by symbol. Its unit's initializer first runs a
    function-local static's guarded initialization: what it builds after the guard's release is no first use."""
    full, stripped = program
    built = _objects(full)["built"][0]
    f = _analysis(stripped)
    early = {(x["reader"]["index"], x["object"]["address"], x["object"]["section"]) for x in f["findings"]
             if x["verdict"] == "before-construction"}
    named = {(x["reader"]["index"], x["object"]["symbol"]) for x in _analysis(full)["findings"]
             if x["verdict"] == "before-construction"}
    readers = {(i, built, ".bss") for i, name in named if name == "built"}
    assert len(readers) == 2, named  # both readers, with symbols
    assert readers <= early, (named, early)
    assert all(x["object"]["symbol"] is None for x in f["findings"] if x["object"]["address"] == built)


def test_the_text_names_an_object_without_a_symbol_by_its_section_and_address(program: tuple[Path, Path]) -> None:
    """The text report of the stripped program names ``built`` as the JSON does: the section and the address
    (it used to print ``? @ ADDRESS``)."""
    _full, stripped = program
    built = next(x["object"] for x in _analysis(stripped)["findings"] if x["object"]["symbol"] is None)
    proc = run_main("inits", "--dtors", "--siof", str(stripped))
    assert f"an object in {built['section']} @ {built['address']:#x} is read" in proc.stdout, proc.stdout
    assert "? @" not in proc.stdout


def test_no_finding_on_what_is_no_object(program: tuple[Path, Path]) -> None:
    """Every finding in the stripped program lies in an object of the program and is a finding of the
    unstripped program on that object: none on the function-local static's guard or storage (built on first
    use by whichever initializer gets there first: at --depth 1 the first reader reaches it only through a
    getter chain that returns it, the second builds it), nor on the guard byte that both units test and set around
    the inline variable's initialization, nor on crtstuff's .tm_clone_table bounds (frame_dummy, an entry here,
    hands them to _ITM_registerTMCloneTable). The second field of ``pair``, which its inlined constructor
    stores and an earlier unit reads, is a finding at that field's address: where an object without a symbol
    starts is not known."""
    full, stripped = program
    objects = _objects(full)
    found = {(x["verdict"], x["reader"]["index"], x["object"]["address"])
             for x in _analysis(stripped, depth=1)["findings"]}
    named = {(x["verdict"], x["reader"]["index"], x["object"]["symbol"])
             for x in _analysis(full, depth=1)["findings"]}
    covering = {(v, i, _covering(objects, a)) for v, i, a in found}
    assert all(name and not name.startswith(("_ZGV", "_ZZ")) for _v, _i, name in covering), covering
    assert covering <= named, (covering, named)
    pair, _size = objects["pair"]
    assert any(a == pair + 4 for _v, _i, a in found), found  # pair.b, read before pair.cpp runs


def _stripped_library(tmp: Path, name: str, asm: str) -> Path:
    """A shared library assembled from ``asm`` (x86-64, Intel syntax), stripped of .symtab."""
    require_tool("gcc", "strip", packages="gcc, binutils")
    src = tmp / f"{name}.s"
    src.write_text(".intel_syntax noprefix\n" + asm + '\n.section .note.GNU-stack,"",@progbits\n')
    lib = tmp / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-nostdlib", "-o", str(lib), str(src)], check=True, capture_output=True)
    subprocess.run(["strip", "--strip-all", str(lib)], check=True, capture_output=True)
    return lib


def _local(name: str, body: str) -> str:
    """A local function: no symbol once stripped, only its FDE."""
    return f"{name}:\n.cfi_startproc\n{body}\n.cfi_endproc\n"


def test_a_local_function_storing_through_its_first_argument_builds_the_object(tmp_path: Path) -> None:
    """A stripped file's constructor has no name unless exported: a local function that stores through its
    first argument (``this``) builds the object there, so one initializer that loads ``obj`` and then calls
    it on ``obj`` reads it before construction (an object known by address: no symbol)."""
    asm = (".text\n" + _local("ctor", "mov dword ptr [rdi], 1\nret")
           + _local("init", "mov eax, dword ptr [rip + obj]\nlea rdi, [rip + obj]\njmp ctor")
           + '.bss\nobj: .zero 8\n.section .init_array,"aw"\n.balign 8\n.quad init\n')
    f = _analysis(_stripped_library(tmp_path, "this", asm))
    assert [(x["verdict"], x["reader"]["index"], x["constructor"]["index"], x["object"]["symbol"],
             x["object"]["section"]) for x in f["findings"]] == [("before-construction", 0, 0, None, ".bss")]


def test_a_registrar_storing_through_this_builds_nothing_an_initializer_builds(tmp_path: Path) -> None:
    """A local function storing through its first argument may be a registrar inserting into an object (a
    map another unit builds), not its constructor: where an initializer builds the object for sure (here a
    registered destructor), the registrar called on it (by an exported function, two calls down: it costs no
    depth but is not given the arguments, so its stores stay stores through ``this``) only reads it -- before
    it is built."""
    asm = (".text\n.globl reg\n.type reg, @function\n" + _local("reg", "lea rdi, [rip + obj]\njmp insert")
           + ".size reg, .-reg\n" + _local("insert", "mov dword ptr [rdi], 1\nret")
           + _local("registrar", "mov eax, dword ptr [rip + obj]\njmp reg@PLT")
           + _local("builder", "lea rdi, [rip + dtor]\nlea rsi, [rip + obj]\nlea rdx, [rip + obj]\n"
                    "jmp __cxa_atexit@PLT") + _local("dtor", "ret")
           + '.bss\nobj: .zero 8\n.section .init_array,"aw"\n.balign 8\n.quad registrar\n.quad builder\n')
    f = _analysis(_stripped_library(tmp_path, "registrar", asm))
    assert [(x["verdict"], x["reader"]["index"], x["constructor"]["index"]) for x in f["findings"]] == \
        [("before-construction", 0, 1)], f["findings"]


@pytest.mark.parametrize("reader", ["mov eax, dword ptr [rip + obj]\nret",
                                    "test edi, edi\njne cold\nback:\nmov eax, dword ptr [rip + obj]\nret"],
                         ids=["plain", "cold-part"])
def test_a_guarded_build_read_by_a_whole_walk_is_judged(tmp_path: Path, reader: str) -> None:
    """clang builds an inline variable under ``__cxa_guard_acquire`` in an initializer of its own, as a
    function-local static is built on first use: stripped, the two look alike. A read by an initializer whose
    walk saw every call it makes (so it would have seen a first use's initialization) is judged like any
    other: read by the first entry, built by the second, it is read before construction. A ``.cold`` part's
    jump back into the reader is no call (it hides no first use)."""
    build = ("sub rsp, 8\nlea rdi, [rip + guard]\ncall __cxa_guard_acquire@PLT\ntest eax, eax\nje 1f\n"
             "lea rdi, [rip + obj]\ncall ctor\nlea rdi, [rip + guard]\ncall __cxa_guard_release@PLT\n"
             "1:\nadd rsp, 8\nret")
    asm = (".text\n" + _local("ctor", "mov dword ptr [rdi], 1\nret") + _local("builder", build)
           + _local("reader", reader) + (_local("cold", "jmp back") if "cold" in reader else "")
           + '.bss\nguard: .zero 8\nobj: .zero 8\n.section .init_array,"aw"\n.balign 8\n.quad reader\n'
           ".quad builder\n")
    f = _analysis(_stripped_library(tmp_path, "guarded", asm))
    assert [(x["verdict"], x["reader"]["index"], x["constructor"]["index"]) for x in f["findings"]] == \
        [("before-construction", 0, 1)], f["findings"]


def test_a_jump_back_from_a_cold_part_enters_no_new_function(tmp_path: Path) -> None:
    """GCC moves an initializer's unlikely paths into a ``.cold`` part with an FDE of its own, which jumps back
    into the middle of the initializer. Stripped, that address starts no FDE: like a symbol's extent, the FDE
    covering it says whose code it is -- the initializer's, on the walk's stack, so the jump is no call to
    follow (noted) -- where each such jump was taken for a function of its own, jumping to the cold part
    again, hundreds of calls deep on a GCC -O3 LTO build."""
    hot = ("test edi, edi\njne cold\nback:\nmov eax, dword ptr [rip + obj]\ntest eax, eax\njne cold\n"
           "mov dword ptr [rip + obj], 1\nret")
    asm = (".text\n" + _local("init", hot) + _local("cold", "mov dword ptr [rip + flag], 1\njmp back")
           + '.bss\nobj: .zero 8\nflag: .zero 8\n.section .init_array,"aw"\n.balign 8\n.quad init\n')
    f = _analysis(_stripped_library(tmp_path, "cold", asm))
    notes = [n for n in f["analysis_notes"] if n.startswith("initializer 0")]
    assert any("no function starts at" in n for n in notes), notes
    assert not any("past depth" in n or "unproven provenance" in n for n in notes), notes


def test_unnamed_helpers_cost_no_depth_two_levels_down(tmp_path: Path) -> None:
    """GCC's LTO-merged initializer calls each unit's ``_GLOBAL__sub_I_`` function, which calls the unit's
    helper: stripped, neither has a name, and both cost no depth as their named forms do, so a read at the
    default depth below them (the helper, then three calls) is still seen."""
    chain = ["unit", "helper", "f1", "f2", "f3"]
    body = "".join(_local(a, f"sub rsp, 8\ncall {b}\nadd rsp, 8\nret") for a, b in zip(chain, chain[1:]))
    body += _local("f3", "mov eax, dword ptr [rip + obj]\nret")
    body += _local("merged", "sub rsp, 8\ncall unit\nadd rsp, 8\nret")
    body += _local("builder", "mov dword ptr [rip + obj], 1\nlea rdi, [rip + dtor]\nlea rsi, [rip + obj]\n"
                   "lea rdx, [rip + obj]\njmp __cxa_atexit@PLT") + _local("dtor", "ret")
    asm = ".text\n" + body + '.bss\nobj: .zero 8\n.section .init_array,"aw"\n.balign 8\n.quad merged\n.quad builder\n'
    f = _analysis(_stripped_library(tmp_path, "levels", asm))
    assert not any("past depth" in n for n in f["analysis_notes"]), f["analysis_notes"]
    assert [(x["verdict"], x["reader"]["index"], x["constructor"]["index"]) for x in f["findings"]] == \
        [("before-construction", 0, 1)], f["findings"]


_TM_CLONE_ASM = """.intel_syntax noprefix
.text
.globl _ZN3ObjC1Ev
.type _ZN3ObjC1Ev, @function
_ZN3ObjC1Ev:
.cfi_startproc
mov dword ptr [rdi], 1
ret
.cfi_endproc
.size _ZN3ObjC1Ev, .-_ZN3ObjC1Ev
reader:
.cfi_startproc
mov eax, dword ptr [rip + obj]
ret
.cfi_endproc
bounds:
.cfi_startproc
lea rdi, [rip + obj]
xor esi, esi
jmp _ITM_registerTMCloneTable@PLT
.cfi_endproc
builder:
.cfi_startproc
lea rdi, [rip + obj]
jmp _ZN3ObjC1Ev@PLT
.cfi_endproc
.weak _ITM_registerTMCloneTable
.bss
obj: .zero 8
.section .init_array,"aw"
.balign 8
.quad reader
.quad bounds
.quad builder
.section .note.GNU-stack,"",@progbits
"""


def test_clone_table_bounds_are_no_read(tmp_path: Path) -> None:
    """An address handed to _ITM_registerTMCloneTable is the bound of .tm_clone_table (crtstuff's frame_dummy,
    which a stripped file lists as an initializer, passes its end: the next section's first object), never a
    read of an object: of the three entries of this stripped library, the one that loads ``obj`` before
    ``builder`` constructs it is a finding; the one that passes its address as a table bound is not."""
    require_tool("gcc", "strip", packages="gcc, binutils")
    src = tmp_path / "tm.s"
    src.write_text(_TM_CLONE_ASM)
    lib = tmp_path / "libtm.so"
    subprocess.run(["gcc", "-shared", "-nostdlib", "-o", str(lib), str(src)], check=True, capture_output=True)
    subprocess.run(["strip", "--strip-all", str(lib)], check=True, capture_output=True)
    f = _analysis(lib)
    assert [(x["verdict"], x["reader"]["index"], x["constructor"]["index"]) for x in f["findings"]] == \
        [("before-construction", 0, 2)], f["findings"]
