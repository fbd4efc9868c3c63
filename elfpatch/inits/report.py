"""Text for `inits --dtors/--siof`: what runs at exit (in the order it runs), the findings, and what the
analysis did not see."""
from __future__ import annotations

from typing import Any, TextIO

from elfpatch.elf.symbols import demangle
from elfpatch.errors import one_line


def _name(obj: dict[str, Any] | None) -> str:
    if obj is None:
        return "-"
    # an object without a symbol (a stripped file's) is known by the section it lies in and its address
    text = obj["demangled"] or obj["symbol"] or f"an object in {obj.get('section') or 'no section'}"
    where = f" @ {obj['address']:#x}" if obj["address"] is not None else " (another object)"
    return one_line(text + where)


def write_analysis(out: TextIO, f: dict[str, Any]) -> None:
    dtors = f.get("exit_time_destructors")
    if dtors is not None:
        out.write(f"  exit-time destructors ({len(dtors)}), in the order they run at exit or dlclose:\n")
        for d in reversed(dtors):
            local = "  [function-local static]" if d["function_local_static"] else ""
            obj = f" on {_name(d['object'])}" if d["object"] else ""
            out.write(f"    {d['kind']:13} {_name(d['dtor'])}{obj}  (registered by initializer "
                      f"{d['initializer']}){local}\n")
        if not dtors:
            out.write("    (none)\n")
    findings = f.get("findings")
    if findings is not None:
        out.write(f"  static initialization order: {len(findings)} finding(s)\n")
        for x in findings:
            r, c = x["reader"], x["constructor"]
            via = f" via {' -> '.join(one_line(demangle(v) or v) for v in x['via'])}" if x["via"] else ""
            out.write(f"    {x['verdict']}: {_name(x['object'])} is read by initializer {r['index']} "
                      f"({one_line(r['source'] or r['symbol'] or '?')}){via} and constructed by initializer "
                      f"{c['index']} ({one_line(c['source'] or c['symbol'] or '?')})\n")
    if f["analysis_complete"]:
        out.write("  analysis complete: every call from every initializer was followed\n")
    else:
        out.write("  analysis INCOMPLETE, not seen:\n")
        for note in f["analysis_notes"]:
            out.write(f"    {one_line(note)}\n")


def write_cross_module(out: TextIO, load: dict[str, Any]) -> None:
    """The whole load's findings on reads of another module's objects (--siof --deps), and what it could not
    judge."""
    findings = load["findings"]
    out.write(f"  across the load's modules: {len(findings)} finding(s)\n")
    for x in findings:
        r, c, o = x["reader"], x["constructor"], x["object"]
        name = one_line(o["demangled"] or o["symbol"]) if o["demangled"] or o["symbol"] else _name(o)  # stripped
        out.write(f"    {x['verdict']}: {name} of {one_line(o['file'])} is read "
                  f"by initializer {r['index']} ({one_line(r['source'] or r['symbol'] or '?')}) of "
                  f"{one_line(r['file'])}, which runs first, and constructed by initializer {c['index']} "
                  f"({one_line(c['source'] or c['symbol'] or '?')})\n")
    for note in load["analysis_notes"]:
        out.write(f"    not judged: {one_line(note)}\n")
