"""One `atexit(fn)` site in a helper that two initializers call registers twice at run time: it is listed once
per initializer (it was listed once for the file). A guarded or thread_local registration stays one for the
file; one initializer reaching a site by several paths is one entry (a site it runs twice, in a loop or by
two calls, is listed once too: the listing is per site, not per execution)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import require_tool
from helpers import run_main

UNITS = {
    "a.cpp": "#include <stdlib.h>\nstatic void bye() {}\n__attribute__((noinline)) void reg() { atexit(bye); }\n"
             "static int a = (reg(), 1);\n",
    "b.cpp": "void reg();\nstatic int b = (reg(), 1);\nint main() {}\n",
}


def test_a_helpers_registration_is_listed_once_per_initializer(tmp_path: Path) -> None:
    require_tool("g++", packages="g++")
    for name, text in UNITS.items():
        (tmp_path / name).write_text(text)
    exe = tmp_path / "prog"
    subprocess.run(["g++", "-O2", "-o", str(exe), *(str(tmp_path / n) for n in UNITS)], check=True,
                   capture_output=True)
    f = json.loads(run_main("inits", "--dtors", "--json", str(exe), check=True).stdout)["files"][0]
    listed = [(r["kind"], r["dtor"]["symbol"], r["initializer"]) for r in f["exit_time_destructors"]]
    by = {e["source"]: e["index"] for e in f["init"] if not e["toolchain"]}
    assert sorted(listed) == sorted([("atexit_c", "_ZL3byev", by["a.cpp"]), ("atexit_c", "_ZL3byev", by["b.cpp"])])


def test_a_thread_locals_registration_is_one_whatever_guard_its_reacher_runs_under() -> None:
    """GCC -O1: two units' initializers call the one _ZTH<var> that registers the thread_local's destructor,
    one of them under an inline variable's guard: listed twice (the run registers it once per thread)."""
    from elfpatch.inits.analysis import _registration_key
    from elfpatch.inits.walk import Registration

    plain = Registration("thread_atexit", 0x40120E, None, None, 0x4012B9)
    guarded = plain._replace(guard=0x404200)
    assert _registration_key(plain, 2) == _registration_key(guarded, 7)
    helper = Registration("atexit_c", 0x401170, None, None, 0x401200)
    assert _registration_key(helper, 1) != _registration_key(helper, 2)  # a helper's atexit: once per caller
