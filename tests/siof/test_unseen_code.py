"""Code an initializer runs without calling it itself is never taken as seen: a function of the file handed to
another module's function (qsort's comparator, pthread_once's routine, a signal handler raised at once), an
ifunc's implementation (the PLT slot an R_*_IRELATIVE fills: its resolver is not what runs), and a DT_INIT
function named by ``-Wl,-init`` (it runs before the init arrays and is not walked), a callback or vptr stored
in memory another module's function is handed or can name (a sigaction struct, a streambuf's vptr, a
library's hook), std::call_once's callable (stored in libstdc++'s TLS), a dlopen'ed plugin's initializers
calling back into the program, a library function reading the program's exported object, and a libc function that
fills a buffer another initializer reads (``snprintf(g_host, ...)``: nothing here builds it, so it read as
constant). Each program's code reads
g_obj, built by a later unit, and prints what it saw (0: before construction); the analysis must say the
entry or the file is incomplete, where it used to say complete with no finding."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

OBJ = ('#include <stdio.h>\nextern "C" volatile int k_seven;\nstruct Obj { int built; Obj() : built(k_seven) {} };\n'
       "extern Obj g_obj;\n")
LATER = '#include "obj.hpp"\nvolatile int k_seven = 7;\nObj g_obj;\n'
READ = 'static int look() { printf("g_obj %d\\n", g_obj.built); return 0; }\n'
USERS = {
    "qsort": "#include <stdlib.h>\n" + READ + "static int cmp(const void*, const void*) { return look(); }\n"
             "static int run() { int v[2] = {2, 1}; qsort(v, 2, sizeof v[0], cmp); return 0; }\n"
             "static int seen = run();\n",
    "pthread_once": "#include <pthread.h>\n" + READ + "static pthread_once_t once = PTHREAD_ONCE_INIT;\n"
                    "static void fn() { look(); }\nstatic int seen = pthread_once(&once, fn);\n",
    "signal": "#include <signal.h>\n" + READ + "static void on(int) { look(); }\n"
              "static int run() { signal(SIGUSR1, on); raise(SIGUSR1); return 0; }\nstatic int seen = run();\n",
    "sigaction": "#include <signal.h>\n" + READ + "static void on(int) { look(); }\n"
                 "static int run() { struct sigaction sa = {}; sa.sa_handler = on; sigaction(SIGUSR1, &sa, 0);\n"
                 "  raise(SIGUSR1); return 0; }\nstatic int seen = run();\n",
    "streambuf": "#include <ostream>\n#include <streambuf>\n" + READ
                 + "struct Buf : std::streambuf { int overflow(int c) override { look(); return c; } };\n"
                 "static int run() { Buf b; std::ostream os(&b); os.put('x'); return 0; }\nstatic int seen = run();\n",
    "call_once": "#include <mutex>\n" + READ + "static std::once_flag fl;\n"
                 "static int seen = [] { std::call_once(fl, [] { look(); }); return 0; }();\n",
    # the callback stored in a frame struct, handed to qsort by one of the file's own helpers (it loads it from
    # the struct: a value the helper's walk does not know)
    "helper": "#include <stdlib.h>\n" + READ + "struct Box { int (*cmp)(const void*, const void*); int pad; };\n"
              "static int cmp(const void*, const void*) { return look(); }\n"
              "__attribute__((noinline)) void sorter(Box* b) { int v[2] = {2, 1}; qsort(v, 2, sizeof v[0], b->cmp); }\n"
              "static int run() { Box b{cmp, 0}; sorter(&b); return 0; }\nstatic int seen = run();\n",
    "ifunc": READ + 'extern "C" { static int impl() { return look(); }\n'
             "static int (*pick())() { return impl; }\nint chosen() __attribute__((ifunc(\"pick\"))); }\n"
             "static int seen = chosen();\n",
}


def _build(tmp: Path, user: str, *link: str, cxx: str = "g++") -> Path:
    (tmp / "obj.hpp").write_text(OBJ)
    (tmp / "user.cpp").write_text('#include "obj.hpp"\n' + user)
    (tmp / "later.cpp").write_text(LATER)
    (tmp / "main.cpp").write_text("int main() {}\n")
    exe = tmp / "prog"
    subprocess.run([cxx, "-O2", "-o", str(exe), *(str(tmp / f) for f in ("user.cpp", "later.cpp", "main.cpp")),
                    *link], check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split() == ["g_obj", "0"]
    return exe


def _run_units(tmp: Path, files: dict[str, str], opt: str, printed: str, cxx: str = "g++") -> Path:
    """The program ``cxx opt`` builds from ``files`` (its .cpp units), which must print ``printed``."""
    for name, text in files.items():
        (tmp / name).write_text(text)
    exe = tmp / "prog"
    subprocess.run([cxx, opt, "-o", str(exe), *(str(tmp / n) for n in files if n.endswith(".cpp"))], check=True,
                   capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == printed
    return exe


def _analysis(path: Path) -> dict:
    return json.loads(run_main("inits", "--dtors", "--siof", "--json", str(path), check=True).stdout)["files"][0]


@pytest.mark.parametrize("how", sorted(USERS))
def test_code_run_on_the_initializers_behalf_is_not_seen(tmp_path: Path, how: str) -> None:
    require_tool("g++", packages="g++")
    f = _analysis(_build(tmp_path, USERS[how], "-lpthread"))
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    found = {(x["reader"]["source"], x["object"]["symbol"]) for x in f["findings"]}
    assert ("user.cpp", "g_obj") in found or not user["analysis"]["complete"]
    assert not f["analysis_complete"]
    if how != "ifunc":  # the callback: one indirect call the walk does not follow
        assert user["analysis"]["unanalyzed"]["indirect_calls"] >= 1


def test_a_callback_copied_by_a_vector_move_is_stored(tmp_path: Path) -> None:
    """clang -O2 builds ``Box b{cmp, 0}`` by one 16-byte load of a relocated constant and a store into the
    frame (``movups xmm0, [rip + ...]; movaps [rsp], xmm0``): the callback is stored though no register holds
    its address."""
    require_tool("clang++", packages="clang")
    f = _analysis(_build(tmp_path, USERS["helper"], cxx="clang++"))
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert user["analysis"]["unanalyzed"]["indirect_calls"] >= 1 and not f["analysis_complete"]


@pytest.mark.cross
def test_an_aarch64_callback_copied_by_a_vector_load_is_stored(tmp_path: Path) -> None:
    """The same on AArch64 (clang -O2: ``ldr q0, [x8, #:lo12:...]; str q0, [sp]``), run under qemu."""
    require_tool("clang++", packages="clang")
    require_tool("aarch64-linux-gnu-g++", packages="g++-aarch64-linux-gnu")
    require_tool("qemu-aarch64", packages="qemu-user")
    (tmp_path / "obj.hpp").write_text(OBJ)
    (tmp_path / "user.cpp").write_text('#include "obj.hpp"\n' + USERS["helper"])
    (tmp_path / "later.cpp").write_text(LATER + "int main() {}\n")
    exe = tmp_path / "prog"
    subprocess.run(["clang++", "--target=aarch64-linux-gnu", "-O2", "-o", str(exe), str(tmp_path / "user.cpp"),
                    str(tmp_path / "later.cpp")], check=True, capture_output=True)
    run = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(exe)], capture_output=True, text=True,
                         check=True)
    assert run.stdout.split() == ["g_obj", "0"]
    f = _analysis(exe)
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert user["analysis"]["unanalyzed"]["indirect_calls"] >= 1 and not f["analysis_complete"]


def test_a_dt_init_function_is_not_taken_as_seen(tmp_path: Path) -> None:
    require_tool("g++", packages="g++")
    (tmp_path / "lib.cpp").write_text(
        '#include <stdio.h>\nstruct Obj { int built; Obj() : built(7) {} };\nObj g_lib_obj;\n'
        'extern "C" void my_dt_init() { printf("g_lib_obj %d\\n", g_lib_obj.built); }\n')
    lib = tmp_path / "libobj.so"
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-Wl,-init,my_dt_init", "-o", str(lib),
                    str(tmp_path / "lib.cpp")], check=True, capture_output=True)
    f = _analysis(lib)
    assert any(e["kind"] == "init" and e["symbol"] == "my_dt_init" and not e["toolchain"] for e in f["init"])
    assert not f["analysis_complete"]
    assert any("DT_INIT function my_dt_init is not analysed" in n for n in f["analysis_notes"])


def _two_units(tmp: Path, files: dict[str, str], printed: str) -> tuple[dict, dict]:
    """The file's analysis and user.cpp's entry, of a program of ``files`` built with g++ -O2 whose run prints
    ``printed`` (the truth: a read before construction)."""
    for name, text in files.items():
        (tmp / name).write_text(text)
    exe = tmp / "prog"
    subprocess.run(["g++", "-O2", "-o", str(exe), *(str(tmp / n) for n in files if n.endswith(".cpp"))],
                   check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == printed
    f = _analysis(exe)
    return f, next(e for e in f["init"] if e["source"] == "user.cpp")


def test_a_buffer_another_module_fills_is_not_constant(tmp_path: Path) -> None:
    require_tool("g++", packages="g++")
    f, user = _two_units(tmp_path, {
        "user.cpp": '#include <stdio.h>\nextern char g_host[16];\n'
                    'static int seen = printf("g_host %d\\n", g_host[0]);\nint main() {}\n',
        "host.cpp": '#include <stdio.h>\nchar g_host[16];\n'
                    'static int n = snprintf(g_host, sizeof g_host, "host-%d", 7);\n'}, "g_host 0\n")
    assert not user["analysis"]["complete"] and not f["analysis_complete"]
    assert any("hands to another module's function" in n and "g_host" in n for n in f["analysis_notes"])


def test_a_read_of_what_a_store_not_seen_may_build_is_not_proven(tmp_path: Path) -> None:
    """GCC -O2 builds g_b's array in a loop after registering g_a's destructors: the pointer it stores through
    is no longer known (callee-saved registers across __cxa_atexit), so the walk does not see g_b built. An
    earlier unit's read of g_b was "constant" in an entry that said complete (the file said incomplete)."""
    require_tool("g++", packages="g++")
    f, user = _two_units(tmp_path, {
        "obj.hpp": OBJ.replace("extern Obj g_obj;\n", "")
        + "struct ObjD { int built; ObjD() : built(k_seven) {} ~ObjD() {} };\n",
        "user.cpp": '#include "obj.hpp"\nextern Obj g_b[4];\n'
                    'static int seen = printf("g_b %d\\n", g_b[k_seven & 3].built);\nint main() {}\n',
        "arr.cpp": '#include "obj.hpp"\nvolatile int k_seven = 7;\nObjD g_a[8];\nObj g_b[4];\n'}, "g_b 0\n")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == "user.cpp"}
    assert "g_b" in found or not user["analysis"]["complete"]


@pytest.mark.cross
def test_an_aarch64_static_program_is_analysed(tmp_path: Path) -> None:
    """A static AArch64 C++ program has no .plt section (its ifuncs' stubs are .iplt): every call target was
    then swept as a possible stub, each sweep asking for the next -- a RecursionError, exit 2 on a valid file."""
    require_tool("aarch64-linux-gnu-g++", packages="g++-aarch64-linux-gnu")
    (tmp_path / "s.cpp").write_text("#include <string>\nstd::string g_s(40, (char)120);\nint main() {}\n")
    exe = tmp_path / "prog"
    subprocess.run(["aarch64-linux-gnu-g++", "-O2", "-static", "-o", str(exe), str(tmp_path / "s.cpp")], check=True,
                   capture_output=True)
    proc = run_main("inits", "--dtors", "--siof", "--json", str(exe))
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["files"][0]["init"]


LIB = ('extern "C" { struct Ops { int (*cb)(); };\nvoid run_ops(Ops* o) { o->cb(); }\n'
       "void run_table(Ops* const* t) { t[0]->cb(); }\n"
       "int (*lib_hook)();\nvoid lib_fire() { lib_hook(); }\n}\n")
LIB_USERS = {
    "struct": 'extern "C" { struct Ops { int (*cb)(); }; void run_ops(Ops*); }\n' + READ
              + "static int cb() { return look(); }\n"
              "static int seen = [] { Ops o = {cb}; run_ops(&o); return 0; }();\n",
    "hook": 'extern "C" { extern int (*lib_hook)(); void lib_fire(); }\n' + READ
            + "static int cb() { return look(); }\nstatic int seen = [] { lib_hook = cb; lib_fire(); return 0; }();\n",
    # the callback in the load-time words of an object handed on: constant (RELRO), writable, two hops away
    "const": 'extern "C" { struct Ops { int (*cb)(); }; void run_ops(const Ops*); }\n' + READ
             + "static int cb() { return look(); }\nstatic const Ops kOps = {cb};\n"
             "static int seen = (run_ops(&kOps), 0);\n",
    "data": 'extern "C" { struct Ops { int (*cb)(); }; void run_ops(Ops*); }\n' + READ
            + "static int cb() { return look(); }\nOps g_ops = {cb};\nstatic int seen = (run_ops(&g_ops), 0);\n",
    "table": 'extern "C" { struct Ops { int (*cb)(); }; void run_table(Ops* const*); }\n' + READ
             + "static int cb() { return look(); }\nstatic Ops kOps = {cb};\nstatic Ops* const kTable[] = {&kOps};\n"
             "static int seen = (run_table(kTable), 0);\n",
}


@pytest.mark.parametrize("how", sorted(LIB_USERS))
def test_a_callback_a_library_reaches_through_memory(tmp_path: Path, how: str) -> None:
    require_tool("g++", packages="g++")
    (tmp_path / "lib.cpp").write_text(LIB)
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(tmp_path / "libcb.so"), str(tmp_path / "lib.cpp")],
                   check=True, capture_output=True)
    f = _analysis(_build(tmp_path, LIB_USERS[how], f"-L{tmp_path}", "-lcb", "-Wl,-rpath,$ORIGIN"))
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert not user["analysis"]["complete"] and user["analysis"]["unanalyzed"]["indirect_calls"] >= 1


@pytest.mark.parametrize("deps", [False, True], ids=["alone", "deps"])
def test_a_library_function_reading_the_programs_object_is_not_seen(tmp_path: Path, deps: bool) -> None:
    """The program's initializer calls the library's lib_peek, which reads the program's g_obj (exported because
    the library names it) before later.cpp builds it: the call's code is not seen here, so the entry is not
    proven -- it said complete with no finding, alone and with --deps."""
    require_tool("g++", packages="g++")
    (tmp_path / "lib.cpp").write_text(OBJ + 'extern "C" int lib_peek() { printf("g_obj %d\\n", g_obj.built); '
                                      "return 0; }\n")
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(tmp_path / "libpeek.so"), str(tmp_path / "lib.cpp")],
                   check=True, capture_output=True)
    exe = _build(tmp_path, 'extern "C" int lib_peek();\nstatic int seen = lib_peek();\n', f"-L{tmp_path}", "-lpeek",
                 "-Wl,-rpath,$ORIGIN")
    doc = json.loads(run_main("inits", "--siof", "--json", *(["--deps"] if deps else []), str(exe),
                              check=True).stdout)
    f = doc["files"][0]
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert not user["analysis"]["complete"] and not f["analysis_complete"]
    assert any("lib_peek" in n and "g_obj" in n for n in f["analysis_notes"])


def test_a_replacement_operator_new_another_module_calls_back_is_walked(tmp_path: Path) -> None:
    """libstdc++'s std::runtime_error constructor calls the program's replacement operator new (exported:
    libstdc++ names it), which reads g_obj before later.cpp builds it: the call into libstdc++ may run it, so
    the entry is not proven (it said complete with no finding)."""
    require_tool("g++", packages="g++")
    user = ("#include <stdlib.h>\n#include <new>\n#include <stdexcept>\n" + READ
            + "static bool once;\nvoid* operator new(size_t n) { if (!once) { once = true; look(); } "
              "return malloc(n ? n : 1); }\n"
            "void operator delete(void* p) noexcept { free(p); }\n"
            "void operator delete(void* p, size_t) noexcept { free(p); }\n"
            'static int seen = [] { std::runtime_error e("a message long enough to need the heap, surely"); '
            "return 0; }();\n")
    f = _analysis(_build(tmp_path, user))
    entry = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert not entry["analysis"]["complete"] and not f["analysis_complete"]
    assert any("_Znwm" in n for n in f["analysis_notes"])


def test_a_library_calling_back_the_programs_function_by_name_is_walked(tmp_path: Path) -> None:
    """The library's lib_call_host calls host_cb, which the program defines (and exports: the library names
    it) and which reads g_obj before later.cpp builds it: the entry is not proven (it said complete)."""
    require_tool("g++", packages="g++")
    (tmp_path / "lib.cpp").write_text('extern "C" int host_cb();\nextern "C" void lib_call_host() { host_cb(); }\n')
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(tmp_path / "libhost.so"), str(tmp_path / "lib.cpp")],
                   check=True, capture_output=True)
    user = READ + 'extern "C" { void lib_call_host(); int host_cb() { return look(); } }\n' \
        "static int seen = (lib_call_host(), 0);\n"
    f = _analysis(_build(tmp_path, user, f"-L{tmp_path}", "-lhost", "-Wl,-rpath,$ORIGIN"))
    entry = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert not entry["analysis"]["complete"] and not f["analysis_complete"]
    assert any("host_cb" in n for n in f["analysis_notes"])


@pytest.mark.parametrize("how", ["pick", "memcpy"])
def test_a_frame_slot_a_callee_is_handed_is_not_kept(tmp_path: Path, how: str) -> None:
    """clang -O2 keeps p = &g_mine in a stack slot, hands its address to pick() (or memcpy), which stores
    &g_obj there, and loads p back: the walk kept the slot's old value (g_mine, "own": complete, no finding);
    a call handed a frame pointer may store into any slot."""
    require_tool("clang++", packages="clang")
    fill = {"pick": "__attribute__((noinline)) void pick(Obj** out) { *out = &g_obj; }\n",
            "memcpy": "#include <string.h>\nObj* const g_src = &g_obj;\nvolatile size_t g_n = sizeof(Obj*);\n"
                      "static void pick(Obj** out) { memcpy(out, &g_src, g_n); }\n"}[how]
    user = (fill + "static Obj g_mine;\nstatic int seen = [] { Obj* p = &g_mine; pick(&p); "
            'printf("g_obj %d\\n", p->built); return 0; }();\n')
    f = _analysis(_build(tmp_path, user, cxx="clang++"))
    entry = next(e for e in f["init"] if e["source"] == "user.cpp")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == "user.cpp"}
    assert "g_obj" in found or not entry["analysis"]["complete"]


def test_an_ifunc_resolver_reading_an_object_is_not_proven(tmp_path: Path) -> None:
    """The loader runs an ifunc's resolver while it relocates the program, before any initializer: one that
    reads g_obj reads it unbuilt, always. Resolvers were not walked (complete, no finding)."""
    require_tool("g++", packages="g++")
    exe = _run_units(tmp_path, {
        "obj.hpp": OBJ, "later.cpp": LATER,
        "user.cpp": '#include "obj.hpp"\nint seen = -1;\nextern "C" int impl() { return 1; }\n'
                    'extern "C" void* resolve_f() { seen = g_obj.built; return (void*)impl; }\n'
                    'extern "C" int f() __attribute__((ifunc("resolve_f")));\n'
                    'int main() { printf("g_obj %d\\n", seen + f() - 1); }\n'}, "-O2", "g_obj 0\n")
    f = _analysis(exe)
    assert not f["analysis_complete"]
    assert any("ifunc resolver" in n and "g_obj" in n for n in f["analysis_notes"]), f["analysis_notes"]


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_a_pointer_an_ifunc_resolver_retargets_is_not_followed_by_its_load_time_word(tmp_path: Path,
                                                                                      opt: str) -> None:
    """g_ptr's load-time word is &g_plain (built: constant), but the resolver, run during relocation, points it
    at g_obj before any initializer: the reader's *g_ptr reads g_obj unbuilt. Followed by its word, the reader
    said complete with no finding."""
    require_tool("g++", packages="g++")
    exe = _run_units(tmp_path, {
        "obj.hpp": OBJ,
        "user.cpp": '#include "obj.hpp"\nint g_plain = 5;\nint* g_ptr = &g_plain;\n'
                    'extern "C" int impl() { return 1; }\n'
                    'extern "C" void* resolve_f() { g_ptr = &g_obj.built; return (void*)impl; }\n'
                    'extern "C" int f() __attribute__((ifunc("resolve_f")));\n'
                    'static int seen = printf("g_obj %d\\n", *g_ptr);\nint main() { return f() - 1; }\n',
        "later.cpp": LATER},
        opt, "g_obj 0\n")
    f = _analysis(exe)
    entry = next(e for e in f["init"] if e["source"] == "user.cpp")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == "user.cpp"}
    assert "g_obj" in found or not entry["analysis"]["complete"]
    assert not f["analysis_complete"]


def test_a_plugin_opened_by_an_initializer_is_not_seen(tmp_path: Path) -> None:
    """dlopen runs the plugin's initializers, which here call the program's exported host_get (reading g_obj
    before later.cpp builds it): the call of dlopen is an indirect call."""
    require_tool("g++", packages="g++")
    (tmp_path / "plug.cpp").write_text('extern "C" int host_get();\nstatic int p = host_get();\n')
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-o", str(tmp_path / "libplug.so"), str(tmp_path / "plug.cpp")],
                   check=True, capture_output=True)
    user = ("#include <dlfcn.h>\n" + READ + 'extern "C" int host_get() { return look(); }\n'
            'static void* h = dlopen("' + str(tmp_path / "libplug.so") + '", RTLD_NOW);\n')
    f = _analysis(_build(tmp_path, user, "-rdynamic", "-ldl"))
    entry = next(e for e in f["init"] if e["source"] == "user.cpp")
    assert not entry["analysis"]["complete"] and entry["analysis"]["unanalyzed"]["indirect_calls"] >= 1
    # the plugin's own load (--deps) has no object defining host_get: its call is not seen, never clean
    plug = json.loads(run_main("inits", "--siof", "--deps", "--json", str(tmp_path / "libplug.so"),
                               check=True).stdout)["files"][0]
    assert not plug["analysis_complete"] and not any(e["analysis"]["complete"] for e in plug["init"]
                                                     if e.get("analysis"))
    assert any("no object of its load defines" in n and "host_get" in n for n in plug["analysis_notes"])


def test_a_read_of_what_code_not_followed_may_build_is_not_proven(tmp_path: Path) -> None:
    """GCC -O0 builds a std::string array in a helper past --depth: the reader of an element said complete with
    the array "constant" (the builder's entry, and the file, said incomplete)."""
    require_tool("g++", packages="g++")
    exe = _run_units(tmp_path, {
        "user.cpp": '#include <stdio.h>\n#include <string>\nextern std::string g_names[3];\n'
                    'static int a = printf("g_names %d\\n", (int)g_names[1].size());\nint main() {}\n',
        "names.cpp": '#include <string>\nstd::string g_names[3] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaa",'
                     ' "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "c"};\n'}, "-O0", "g_names 0\n")
    f = _analysis(exe)
    user = next(e for e in f["init"] if e["source"] == "user.cpp")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == "user.cpp"}
    assert "_Z7g_namesB5cxx11" in found or not user["analysis"]["complete"]


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_exit_in_an_initializer_runs_the_exit_time_code_registered_before(tmp_path: Path, opt: str) -> None:
    """An earlier unit registers bye() (it reads g_obj); the next one calls exit(0) (a configuration check
    failing): exit runs bye before later.cpp builds g_obj. The exiting entry said complete, the file too."""
    require_tool("g++", packages="g++")
    exe = _run_units(tmp_path, {
        "obj.hpp": OBJ,
        "reg.cpp": '#include "obj.hpp"\n#include <stdlib.h>\n'
                   'static void bye() { printf("g_obj %d\\n", g_obj.built); }\nstatic int r = atexit(bye);\n',
        "quit.cpp": '#include <stdlib.h>\nextern "C" volatile int k_seven;\n'
                    "static int q = (k_seven ? (exit(0), 0) : 0);\nint main() {}\n",
        "later.cpp": LATER}, opt, "g_obj 0\n")
    f = _analysis(exe)
    quit_entry = next(e for e in f["init"] if e["source"] == "quit.cpp")
    assert not quit_entry["analysis"]["complete"] and not f["analysis_complete"]


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_an_address_in_the_frame_handed_to_another_module_is_read_by_it(tmp_path: Path, opt: str, cxx: str) -> None:
    """writev(fd, &iov, 1) with iov.iov_base = &g_obj: the kernel reads g_obj through the frame's iovec. The
    walk took a frame pointer handed on for a place the callee may store into, never read pointers from; and
    clang -O2 builds the iovec by one vector move from constant data, whose words the frame then holds."""
    require_tool(cxx, packages="g++ clang")
    exe = _run_units(tmp_path, {
        "obj.hpp": OBJ,
        "user.cpp": '#include "obj.hpp"\n#include <sys/uio.h>\n#include <unistd.h>\n'
                    "static int seen = [] { int p[2]; if (pipe(p)) return 1;\n"
                    "  struct iovec iov = {&g_obj, sizeof(int)};\n"
                    "  writev(p[1], &iov, 1); int v = -1; if (read(p[0], &v, sizeof v) < 0) return 1;\n"
                    '  printf("g_obj %d\\n", v); return 0; }();\nint main() {}\n',
        "later.cpp": LATER}, opt, "g_obj 0\n", cxx)
    f = _analysis(exe)
    entry = next(e for e in f["init"] if e["source"] == "user.cpp")
    found = {x["object"]["symbol"] for x in f["findings"] if x["reader"]["source"] == "user.cpp"}
    assert "g_obj" in found or not entry["analysis"]["complete"]
    assert found or not f["analysis_complete"]
