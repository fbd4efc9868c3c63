"""Reads of the program's objects that a library makes through pointer words the program defines (probe_xword):
a reference global (RELRO), an entry of a constant pointer table, a writable pointer global and a function
pointer. The library loads the word through its GOT, then loads through it (or calls it); the program's
initializers run last, so the run sees each box before it is built -- the fixture reports what it observed."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main

from elfpatch.inits.isa import decides, moved
from elfpatch.inits.state import State
from elfpatch.inits.values import Inside, held, held_by
from elfpatch.inits.x86 import _word_of
from siof.test_probe import VARIANTS, observed_early

BOXES = ["g_wd_box", "g_wfn_box", "g_wptr_box", "g_wref_box", "g_wtab_box"]
VIA = {"g_wd_box": "g_wdref", "g_wfn_box": "g_wfn", "g_wptr_box": "g_wptr", "g_wref_box": "g_wref",
       "g_wtab_box": "g_wtab"}


@pytest.fixture(scope="module")
def probe_build(siof_build: Path) -> Path:
    return siof_build.parent / "build" / "probe"


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_reads_through_the_other_modules_words_are_findings(probe_build: Path, variant: str) -> None:
    """Guarantee: with --deps on the program, each read the run saw before construction through a pointer word
    of the program (reference, constant table entry, pointer global, function pointer) is a
    `before-construction` finding of the load, reader in the library, object and constructor in the program,
    `via` naming the word's object; the library's own analysis stays incomplete for those reads. A pointer
    global the library stores into first is not followed at its load-time value (no finding on its box); one
    read by an initializer that runs none of the program's code is. The writable function pointer is followed
    for its first load (nothing ran before it), with a note that the call through it may repoint it."""
    require_tool(VARIANTS[variant], packages="g++, clang")
    exe = probe_build / variant / "probe_xword"
    assert sorted(obj for _unit, obj in observed_early(exe)) == BOXES  # the run agrees: every box read early
    load = _check(exe)
    assert any("from g_wfn of" in n and "only its first load" in n for n in load["analysis_notes"])


@pytest.mark.parametrize("variant", [case(v, needs=["aarch64-linux-gnu-g++", "qemu-aarch64"])
                                     for v in ("a64-O0", "a64-O2")])
def test_on_aarch64_too(siof_build: Path, variant: str) -> None:
    """Guarantee: the same on AArch64 (`ldr` of the word, `ldr` or `blr` through it), the run under qemu-user
    being the truth."""
    require_tool("aarch64-linux-gnu-g++", "qemu-aarch64")
    exe = siof_build / "siof" / variant / "probe_xword"
    out = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(exe)], capture_output=True,
                         text=True, timeout=120, check=True, cwd=exe.parent).stdout
    assert sorted(obj for _unit, obj, value in (line.split() for line in out.splitlines()) if value == "0") == BOXES
    doc = json.loads(run_main("inits", "--siof", "--deps", "--json", str(exe), check=True).stdout)
    if not doc["loads"][0]["missing"]:
        _check(exe)
        return
    # a load that misses the AArch64 libc (a host without it where the loader looks): printf, which the
    # readers of g_wptr and g_wfn call, is code not known (it may repoint them), so those words are not
    # followed: notes, not findings
    load = _check(exe, [b for b in BOXES if b not in ("g_wptr_box", "g_wfn_box")])
    for word in ("g_wptr", "g_wfn"):
        assert any(f"from {word} of" in n and "not judged" in n for n in load["analysis_notes"]), word


def _check(exe: Path, boxes: list[str] = BOXES) -> dict:
    doc = json.loads(run_main("inits", "--siof", "--deps", "--json", str(exe), check=True).stdout)
    load = doc["loads"][0]
    got = sorted((Path(f["reader"]["file"]).name, f["object"]["symbol"], Path(f["object"]["file"]).name,
                  Path(f["constructor"]["file"]).name, f["verdict"], tuple(f["via"])) for f in load["findings"])
    assert got == [("libprobe_xword.so", box, "probe_xword", "probe_xword", "before-construction", (VIA[box],))
                   for box in boxes]
    lib = json.loads(run_main("inits", "--siof", "--json", str(exe.parent / "libprobe_xword.so"),
                              check=True).stdout)["files"][0]
    assert not lib["analysis_complete"] and lib["findings"] == []
    # the pointer global the library repoints before loading through it is not followed: no g_wset_box read
    assert any("g_wset" in e["analysis"]["other_module_writes"] for e in lib["init"] if e["analysis"])
    return load


def test_a_compare_of_a_loaded_word_decides_nothing() -> None:
    """Guarantee: a pointer loaded from another module's word may be null or not: `cmp` of it with 0 (or with
    anything) leaves both branches to walk, where an address the GOT gave decides (it is never null)."""
    assert not decides(held("g_wptr", 0), 0) and not decides(0, held("g_wptr", 0))
    assert not decides(held("g_wptr", 0), held("g_wptr", 0))
    assert decides("g_wptr", 0)


def test_a_held_word_is_never_a_symbol() -> None:
    """Guarantee: the value of a word loaded from another module's object round-trips, and no symbol name (nor
    another module's function result, "<name>()") is taken for one."""
    assert held_by(held("g_wtab", 8)) == ("g_wtab", 8)
    assert held_by(held("_ZN1A1bE", 0)) == ("_ZN1A1bE", 0)
    for name in ("g_wtab", "_ZN1A1bE", "stdout@GLIBC_2.2.5", "_Z7get_boxv()", "*", "*x+", "*+?", None, 8):
        assert held_by(name) is None
    assert held_by(held("g_wtab", None)) == ("g_wtab", None)  # a word at an offset not known


@pytest.mark.parametrize("variant", [case(v, needs=[VARIANTS[v]]) for v in sorted(VARIANTS)])
def test_a_stripped_programs_object_is_known_by_its_registration(probe_build: Path, tmp_path: Path,
                                                                  variant: str) -> None:
    """Guarantee: with the program stripped (no .symtab: its boxes have no name to construct), the box with a
    destructor is still known to be built by the initializer that registers it (`--dtors`): the read through
    the program's reference global is a finding on that address."""
    require_tool(VARIANTS[variant], "strip", packages="g++, clang, binutils")
    built = probe_build / variant
    shutil.copy(built / "libprobe_xword.so", tmp_path)
    exe = tmp_path / "probe_xword"
    subprocess.run(["strip", "--strip-all", "-o", str(exe), str(built / "probe_xword")], check=True)
    box = json.loads(run_main("inits", "--siof", "--dtors", "--json", str(built / "probe_xword"),
                              check=True).stdout)["files"][0]
    address = next(o["address"] for e in box["init"] if e["analysis"] for o in e["analysis"]["constructs"]
                   if o["symbol"] == "g_wd_box")
    doc = json.loads(run_main("inits", "--siof", "--dtors", "--deps", "--json", str(exe), check=True).stdout)
    found = [(f["object"]["address"], f["via"]) for f in doc["loads"][0]["findings"]]
    assert (address, ["g_wdref"]) in found


def test_a_symbol_moved_names_the_word_at_its_offset_or_none() -> None:
    """Guarantee: another module's object's address moved by a constant names the word at that offset; moved by
    an amount not known (an index), or joined at a loop head with itself moved, it names no word but one at an
    offset not known, "*<symbol>+?" (it used to name the word at offset 0 on every pass); it is never taken for
    the symbol itself (no compare of it is decided, no state or cache takes one for the other)."""
    nothing = lambda _a: None  # noqa: E731  # no object of this file
    at8 = moved("tbl", 8, nothing)
    assert at8 == Inside("tbl", 8) and at8 != "tbl" and str(at8) == "tbl"
    assert _word_of({"rax": at8}, ("rax", 8)) == held("tbl", 16)
    assert moved(at8, -8, nothing) == "tbl" and type(moved(at8, -8, nothing)) is str
    anywhere = moved("tbl", None, nothing)
    assert _word_of({"rax": anywhere}, ("rax", 0)) == held("tbl", None)
    head = State({"rax": "tbl", "rdx": held("tbl", 0)}).join(State({"rax": at8, "rdx": held("tbl", 8)}), nothing)
    assert head.values == {"rax": Inside("tbl", None), "rdx": held("tbl", None)}
    assert not decides(at8, "tbl") and not decides("tbl", at8)
    assert State({"rax": at8}) != State({"rax": "tbl"})


_B1_LIB = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* tbl[];
struct M { M() { int sum = 0; for (Obj** p = tbl; *p; ++p) sum += (*p)->v;
  std::printf("lib: sum=%d\\n", sum); } } m;
"""
_B1_MAIN = """#include <cstdio>
struct Obj { int v; Obj(int x) : v(x) { std::printf("built %d\\n", x); } };
struct Plain { int v; };
Plain c0 = {5};
extern Obj g;
Obj* tbl[3] = {(Obj*)&c0, &g, nullptr};
Obj g(2);
int main() { return 0; }
"""
_B2_LIB = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* p;
void set_p();
struct M { M() { set_p(); std::printf("lib: p->v=%d\\n", p->v); } } m;
"""
# the same, set_p run by libc's pthread_once: a call back into the program through a function handed on
_B2_ONCE = """#include <cstdio>
#include <pthread.h>
struct Obj { int v; Obj(int); };
extern Obj* p;
void set_p();
static pthread_once_t once = PTHREAD_ONCE_INIT;
struct M { M() { pthread_once(&once, set_p); std::printf("lib: p->v=%d\\n", p->v); } } m;
"""
# the same, set_p called through the program's function pointer fp
_B2_PTR = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* p;
extern void (*fp)();
struct M { M() { fp(); std::printf("lib: p->v=%d\\n", p->v); } } m;
"""
_B2_MAIN = """#include <cstdio>
struct Obj { int v; Obj(int x) : v(x) { std::printf("built %d\\n", x); } };
struct Plain { int v; };
Plain c0 = {5};
extern Obj g;
Obj* p = (Obj*)&c0;
void set_p() { p = &g; }
void (*fp)() = set_p;
Obj g(2);
int main() { return 0; }
"""


def _load(tmp_path: Path, lib: str, main: str) -> tuple[str, dict]:
    """Builds the library and the program (g++ -O2, the program exporting its symbols), runs it: (what it
    printed, the program's load as `inits --siof --deps` judges it)."""
    require_tool("g++", packages="g++")
    (tmp_path / "lib.cpp").write_text(lib)
    (tmp_path / "main.cpp").write_text(main)
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", "libm.so", "lib.cpp"], cwd=tmp_path, check=True)
    subprocess.run(["g++", "-O2", "-o", "prog", "main.cpp", "-Wl,--no-as-needed", "-L.", "-lm",
                    "-Wl,-rpath,$ORIGIN", "-rdynamic"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60, check=True).stdout
    doc = json.loads(run_main("inits", "--siof", "--deps", "--json", str(tmp_path / "prog"), check=True).stdout)
    return out, doc["loads"][0]


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 builds")
def test_a_loop_over_the_other_modules_pointer_table_is_never_silent(tmp_path: Path) -> None:
    """Guarantee: the library walks the program's pointer table with a moving pointer (`add rax, 8` in a loop);
    entry 1 points at g, read before the program builds it (the run shows it). The load judges that read or
    says in a note that it did not: the words the loop loads are at an offset not known, never taken for
    entry 0's alone (which points at constant data: no finding, no note, a false clean)."""
    out, load = _load(tmp_path, _B1_LIB, _B1_MAIN)
    assert out.splitlines()[0] == "lib: sum=5"  # g's word read before g is built (it holds 0)
    found = any(f["object"]["symbol"] == "g" for f in load["findings"])
    noted = any("from tbl of" in n and "not judged" in n for n in load["analysis_notes"])
    assert found or noted, load


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 builds")
@pytest.mark.parametrize("lib", [_B2_LIB, _B2_ONCE, _B2_PTR], ids=["direct", "callback", "through-pointer"])
def test_a_word_the_reader_may_have_repointed_by_calling_the_program_is_not_followed(tmp_path: Path,
                                                                                      lib: str) -> None:
    """Guarantee: the library calls the program's set_p() (directly, through the program's function pointer,
    or handing it to libc's pthread_once), which repoints the writable word p at g (built later), then reads
    through p: p's load-time value (constant data) is not what it reads. The load does not follow p at its
    load-time value (no judgement on that target) and says so in a note."""
    out, load = _load(tmp_path, lib, _B2_MAIN)
    assert out.splitlines()[0] == "lib: p->v=0"  # read through p repointed at g, before g is built
    assert any("from p of" in n and "not judged" in n for n in load["analysis_notes"]), load


# the library first calls a getter of the program that only reads, then reads through the program's p
_GETTER_LIB = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* p;
int get_n();
struct M { M() { int n = get_n(); std::printf("lib: p->v=%d n=%d\\n", p->v, n); } } m;
"""
_GETTER_MAIN = """#include <cstdio>
struct Obj { int v; Obj(int x) : v(x) { std::printf("built %d\\n", x); } };
extern Obj g;
Obj* p = &g;
const int n = 7;
int get_n() { return n + 1; }
Obj g(2);
int main() { return 0; }
"""


# the same getter, called through the program's function pointer fp, in an initializer before the reading one
_FNPTR_LIB = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* p;
extern int (*fp)();
__attribute__((constructor(101))) static void first() { std::printf("lib: n=%d\\n", fp()); }
__attribute__((constructor(102))) static void second() { std::printf("lib: p->v=%d\\n", p->v); }
"""
_FNPTR_MAIN = _GETTER_MAIN.replace("int main()", "int (*fp)() = get_n;\nint main()")
# two such calls in one initializer, through fp and fq: each word's value rests on the other call's
_TWO_LIB = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* p;
extern int (*fp)();
extern int (*fq)();
struct M { M() { int a = fp(); int b = fq(); std::printf("lib: p->v=%d n=%d\\n", p->v, a + b); } } m;
"""
_TWO_MAIN = _FNPTR_MAIN.replace("int main()", "int (*fq)() = get_n;\nint main()")


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 builds")
@pytest.mark.parametrize(("lib", "main", "printed"), [
    (_GETTER_LIB, _GETTER_MAIN, ["lib: p->v=0 n=8"]),
    (_FNPTR_LIB, _FNPTR_MAIN, ["lib: n=8", "lib: p->v=0"]),
    (_TWO_LIB, _TWO_MAIN, ["lib: p->v=0 n=16"]),
], ids=["direct", "through-fp-earlier", "through-fp-and-fq"])
def test_a_call_into_the_program_proven_to_store_nowhere_keeps_the_word_followed(
        tmp_path: Path, lib: str, main: str, printed: list[str]) -> None:
    """Guarantee: the library calls the program's get_n() -- directly; through the program's function pointer
    fp in an earlier initializer (its load-time value: nothing ran before); through fp and fq in one
    initializer (whichever runs first finds both words at their load-time values) -- a walk proven complete
    that stores into no object of the program (so cannot repoint p), then reads g through p before the
    program builds g (the run shows it): p is followed at its load-time value, the read is a
    `before-construction` finding via p, and no word is left unjudged."""
    out, load = _load(tmp_path, lib, main)
    assert out.splitlines()[:len(printed)] == printed  # g read through p before it is built
    assert [f["object"]["symbol"] for f in load["findings"] if f["via"] == ["p"]] == ["g"], load
    assert not any("not judged" in n or "from p of" in n for n in load["analysis_notes"]), load


_GETPP_LIB = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* p;
extern Obj g;
Obj** getpp();
struct M { M() { *getpp() = &g; std::printf("lib: p->v=%d\\n", p->v); } } m;
"""


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 builds")
def test_a_call_of_the_program_returning_the_words_address_leaves_it_unfollowed(tmp_path: Path) -> None:
    """Guarantee: the program's getpp() stores nowhere but returns p's address, through which the library
    repoints p at g before reading through it: p is not followed at its load-time value (constant data: a
    false clean) and a note says so."""
    main = _B2_MAIN.replace("int main()", "Obj** getpp() { return &p; }\nint main()")
    out, load = _load(tmp_path, _GETPP_LIB, main)
    assert out.splitlines()[0] == "lib: p->v=0"  # read through p repointed at g, before g is built
    assert any("from p of" in n and "not judged" in n for n in load["analysis_notes"]), load


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 builds")
def test_two_calls_through_the_programs_function_pointers_one_repointing_the_word_leave_it_unfollowed(
        tmp_path: Path) -> None:
    """Guarantee: as above, but fq holds rep(), which repoints p at h: p is not followed at its load-time
    value (no finding via p) and a note says so."""
    main = _TWO_MAIN.replace("int (*fq)() = get_n;", "Obj h(3);\nint rep() { p = &h; return 8; }\n"
                             "int (*fq)() = rep;")
    out, load = _load(tmp_path, _TWO_LIB, main)
    assert out.splitlines()[0] == "lib: p->v=0 n=16"  # read through p repointed at h, before h is built
    assert not [f for f in load["findings"] if f["via"] == ["p"]], load
    assert any("from p of" in n and "not judged" in n for n in load["analysis_notes"]), load


# the library repoints the program's p itself, through the program's pp (== &p) or a pointer it cannot name
_STORE_MAIN = _B2_MAIN.replace("int main()", "Obj** pp = &p;\nObj** get_pp() { return pp; }\nint main()")
_STORE_THROUGH_WORD = """#include <cstdio>
struct Obj { int v; Obj(int); };
extern Obj* p;
extern Obj** pp;
extern Obj g;
struct M { M() { *pp = &g; std::printf("lib: p->v=%d\\n", p->v); } } m;
"""
# (through-result held before this rule too: the call of get_pp, which returns an address its GOT holds, is
# no call proven to store nowhere; kept so the store rule cannot be the only thing that stops it)
_STORE_THROUGH_RESULT = _STORE_THROUGH_WORD.replace("extern Obj** pp;", "Obj** get_pp();").replace(
    "*pp = &g;", "*get_pp() = &g;")
_STORE_THROUGH_UNKNOWN = _STORE_THROUGH_WORD.replace(
    "struct M {", "Obj** volatile slot;\n__attribute__((constructor(101))) static void keep() { slot = pp; }\n"
    "struct M {").replace("*pp = &g;", "*slot = &g;")


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 builds")
@pytest.mark.parametrize("lib", [_STORE_THROUGH_WORD, _STORE_THROUGH_RESULT, _STORE_THROUGH_UNKNOWN],
                         ids=["through-word", "through-result", "through-unknown"])
def test_a_word_the_reader_repointed_through_a_pointer_is_not_followed(tmp_path: Path, lib: str) -> None:
    """Guarantee: the library stores &g into the program's p through a pointer to it (the program's pp, a
    getter's result, or a pointer the walk cannot name), then reads through p before g is built (the run
    shows it): p's load-time value is not what it reads, so the load does not follow p there and says so."""
    out, load = _load(tmp_path, lib, _STORE_MAIN)
    assert out.splitlines()[0] == "lib: p->v=0"  # p repointed at g, read before g is built
    assert any("from p of" in n and "not judged" in n for n in load["analysis_notes"]), load
