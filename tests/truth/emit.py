"""C++ (and the C runtime) for a generated program: file name -> text."""
from __future__ import annotations

from truth.generator import Obj, Program, Read

RUNTIME = r"""/* What each initializer observed, one line each on stdout (write(2): no stdio state to construct). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static int cur;
static void say(const char *fmt, int a, int b, int c) {
  char buf[96];
  int n = snprintf(buf, sizeof buf, fmt, a, b, c);
  (void)!write(1, buf, (size_t)n);
}
void truth_enter(int ctx) { cur = ctx; say("ENTER %d\n", ctx, 0, 0); }
void truth_ctor(int obj) { say("CTOR %d %d\n", obj, cur, 0); }
void truth_obs(int obj, int value) { say("OBS %d %d %d\n", cur, obj, value); }
void truth_dtor(int obj) { (void)obj; }
void truth_touch(int value) { (void)value; }
int truth_pick(int value) { return value; }
/* A callback an initializer leaves here, run when a later one fires it (the analysed file's view: another
   module keeps a function of it and may call it at any later call). */
static int (*hooks[4096])(void);
void truth_hook(int site, int (*fn)(void)) { hooks[site & 4095] = fn; }
int truth_fire(int site, int *value) {
  if (!hooks[site & 4095]) return 0;
  *value = hooks[site & 4095]();
  return 1;
}
"""

HEADER = """#pragma once
extern "C" void truth_enter(int);
extern "C" void truth_ctor(int);
extern "C" void truth_obs(int, int);
extern "C" void truth_dtor(int);
extern "C" void truth_touch(int);
extern "C" int truth_pick(int);
extern "C" void truth_hook(int, int (*)());
extern "C" int truth_fire(int, int*);
struct TruthMark { explicit TruthMark(int ctx) { truth_enter(ctx); } };
struct Obj { int built; int id; Obj(int i, int) : id(i) { truth_ctor(i); built = 1; } };
struct DObj : Obj { DObj(int i, int r) : Obj(i, r) {} ~DObj() { truth_dtor(id); } };
struct Base { virtual int get() const = 0; };
"""


def _type(o: Obj) -> str:
    return "DObj" if o.dtor else "Obj"


def _switch(r: Read) -> str:
    """A dense switch on a value the compiler cannot know (a jump table); the read is in the case taken."""
    taken = r.site % 7
    cases = " ".join(f"case {i}: " + (f"truth_obs({r.target.oid}, {r.target.expr}.built);" if i == taken
                                      else f"truth_touch({i});") + " break;" for i in range(7))
    return f"switch (truth_pick({taken})) {{ {cases} }}"


def _statement(r: Read) -> str:
    """What the reader's code runs for one read."""
    t, s = r.target, r.site
    return {
        "direct": f"truth_obs({t.oid}, {t.expr}.built);",
        "switch": _switch(r),
        "ref": f"truth_obs({t.oid}, truth_r{s}.built);",
        "ptr": f"truth_obs({t.oid}, truth_p{s}->built);",
        "table": f"truth_obs({t.oid}, truth_t{s}[1]->built);",
        "virtual": f"truth_obs({t.oid}, truth_v{s}.get());",
        "fnptr": f"truth_obs({t.oid}, truth_f{s}());",
        "getter": f"truth_obs({t.oid}, truth_g{s}().built);",
        "peek": f"truth_obs({t.oid}, truth_k{s}());",
        "local": f"truth_touch(truth_l{s}());",
        "tls": f"truth_touch(truth_tl{s}.v);",
        "hook": f"{{ int v; if (truth_fire({s}, &v)) truth_obs({t.oid}, v); }}",  # read if the hook was left
    }[r.route]


def _declaration(r: Read) -> str:
    """What prog.h declares for a read's route (its home unit defines it)."""
    s, dtor = r.site, r.target.dtor
    return {
        "direct": "",
        "switch": "",
        "ref": f"extern Obj& truth_r{s};",
        "ptr": f"extern Obj* truth_p{s};",
        "table": f"extern Obj* const truth_t{s}[2];",
        "virtual": f"extern Base& truth_v{s};",
        "fnptr": f"extern int (*truth_f{s})();",
        "getter": f"Obj& truth_g{s}();",
        "peek": f"int truth_k{s}();",
        "local": f"int truth_l{s}();",
        "tls": f"struct TL{s} {{ int v; TL{s}();{f' ~TL{s}();' if dtor else ''} }};\n"
               f"extern thread_local TL{s} truth_tl{s};",
        "hook": "",
    }[r.route]


def _definition(r: Read) -> str:
    """The definition of a read's route, in its home unit."""
    t, s = r.target, r.site
    obs = f"truth_obs({t.oid}, {t.expr}.built);"
    dtor = f" ~L{s}() {{ truth_dtor(-{s}); }}" if t.dtor else ""
    return {
        "direct": "",
        "switch": "",
        "ref": f"Obj& truth_r{s} = {t.expr};",
        "ptr": f"Obj* truth_p{s} = &{t.expr};",
        "table": f"extern Obj* const truth_t{s}[2] = {{nullptr, &{t.expr}}};",
        "virtual": f"namespace {{ struct V{s} : Base {{ int get() const override {{ return {t.expr}.built; }} }};\n"
                   f"V{s} truth_vo{s}; }}\nBase& truth_v{s} = truth_vo{s};",
        "fnptr": f"static int truth_fr{s}() {{ return {t.expr}.built; }}\nint (*truth_f{s})() = truth_fr{s};",
        "getter": f"Obj& truth_g{s}() {{ return {t.expr}; }}",
        "peek": f"int truth_k{s}() {{ return {t.expr}.built; }}",
        "local": f"namespace {{ struct L{s} {{ L{s}() {{ {obs} }}{dtor} }}; }}\n"
                 f"int truth_l{s}() {{ static L{s} l; return 0; }}",
        "tls": f"TL{s}::TL{s}() : v(0) {{ {obs} }}\n"
               + (f"TL{s}::~TL{s}() {{ truth_dtor(-{s}); }}\n" if t.dtor else "")
               + f"thread_local TL{s} truth_tl{s};",
        # left with the runtime by the home unit's initializer, before the unit's objects are built
        "hook": f"static int truth_hc{s}() {{ return {t.expr}.built; }}\n"
                f"static int truth_hi{s} = (truth_hook({s}, truth_hc{s}), 0);",
    }[r.route]


def _all_reads(prog: Program) -> list[Read]:
    return [r for o in prog.objects for r in o.reads] + [r for c in prog.contexts for r in c.reads]


def _prog_header(prog: Program) -> str:
    lines = ['#pragma once', '#include "truth.h"']
    for o in prog.objects:
        if o.kind == "plain":
            lines.append(f"extern {_type(o)} {o.expr};")
        elif o.kind == "template":
            name = f"TS{o.oid}"
            lines += [f"template <int N> struct {name} {{ static {_type(o)} s; }};",
                      f"template <int N> {_type(o)} {name}<N>::s(N, 0);",
                      f"extern template struct {name}<{o.oid}>;"]
    lines += [d for r in _all_reads(prog) if (d := _declaration(r))]
    return "\n".join(lines) + "\n"


def _unit(prog: Program, unit: str) -> str:
    ctx = prog.unit_context(unit)
    lines = ['#include "truth.h"', f"static TruthMark truth_mark({ctx.cid});  // first: records the context",
             '#include "prog.h"']
    lines += [f'#include "iv{oid}.h"' for oid in sorted(prog.includes[unit])]
    lines += [h for r in _all_reads(prog) if r.home_unit == unit and (h := _definition(r))]
    for o in prog.objects:
        if o.unit != unit:
            continue
        if o.kind == "template":
            lines.append(f"template struct TS{o.oid}<{o.oid}>;  // the one unit that emits its initialization")
        elif o.kind == "plain":
            body = " ".join(_statement(r) for r in o.reads)
            lines += [f"static int truth_deps{o.oid}() {{ {body} return 0; }}",
                      f"{_type(o)} {o.expr}({o.oid}, truth_deps{o.oid}());"]
    for c in prog.contexts:
        if c.unit == unit and c.function:
            attr = f"constructor({c.priority})" if c.priority else "constructor"
            body = " ".join(_statement(r) for r in c.reads)
            lines.append(f'extern "C" {{ __attribute__(({attr})) static void {c.function}() '
                         f"{{ truth_enter({c.cid}); {body} }} }}")
    return "\n".join(lines) + "\n"


def emit(prog: Program) -> dict[str, str]:
    files = {"truthrt.c": RUNTIME, "truth.h": HEADER, "prog.h": _prog_header(prog),
             "main.cpp": "int main() { return 0; }\n"}
    for o in prog.objects:
        if o.kind == "inline":
            files[f"iv{o.oid}.h"] = f'#pragma once\n#include "prog.h"\ninline {_type(o)} {o.expr}({o.oid}, 0);\n'
    for units in prog.modules.values():
        for unit in units:
            files[f"{unit}.cpp"] = _unit(prog, unit)
    return files
