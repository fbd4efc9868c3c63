"""`inits --dtors` against the run time: every (destructor, object) an LD_PRELOAD shim sees registered during
static initialization, in order, for GCC and clang, -O0 and -O2, PIE executables and shared libraries, GNU ld
and lld, -fno-plt, x86-64 and AArch64 (under qemu)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case, run_main
from jsonschema_check import cli_json

from siof.truth import registrations, runner

VARIANTS = {  # variant -> tools it needs
    "gcc-O0": ("g++",), "gcc-O2": ("g++",), "gcc-O2-lld": ("g++", "ld.lld"), "gcc-O2-noplt": ("g++",),
    "clang-O0": ("clang++",), "clang-O2": ("clang++",), "clang-O2-lld": ("clang++", "ld.lld"),
    "clang-O2-noplt": ("clang++",),
    "a64-gcc-O0": ("aarch64-linux-gnu-g++", "qemu-aarch64"),
    "a64-gcc-O2": ("aarch64-linux-gnu-g++", "qemu-aarch64"),
    "a64-gcc-O2-noplt": ("aarch64-linux-gnu-g++", "qemu-aarch64"),
}
PACKAGES = "g++, clang, lld, g++-aarch64-linux-gnu, qemu-user"


def _show(obj: dict | None) -> str:
    """An OBJ the way the shim prints a pointer."""
    if obj is None:
        return "0"
    if obj["address"] is not None:
        return hex(obj["address"])
    # dladdr names whichever alias it finds first: the complete and base destructors are one function.
    return "ext:" + str(obj["symbol"]).replace("D1Ev", "D2Ev")


def _ours(path: Path) -> list[tuple[str, str, str]]:
    doc = cli_json(run_main("inits", "--dtors", "--json", str(path), check=True).stdout)
    out = []
    for d in doc["files"][0]["exit_time_destructors"]:
        kind = "atexit" if d["kind"] == "atexit_c" else d["kind"]  # C's atexit() calls __cxa_atexit too
        # A thread_local object lives in each thread's TLS block: no link-time address to compare.
        out.append((kind, _show(d["dtor"]), "tls" if kind == "thread_atexit" else _show(d["object"])))
    return out


@pytest.mark.parametrize("target", ["dtors", "libdtors.so"])
@pytest.mark.parametrize("variant", [case(v, needs=VARIANTS[v]) for v in sorted(VARIANTS)])
def test_dtors_match_the_run_time(siof_build: Path, variant: str, target: str) -> None:
    require_tool(*VARIANTS[variant], packages=PACKAGES)
    if runner(variant) is None:
        require_tool("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1", packages=PACKAGES)
    path = siof_build / variant / target
    assert path.exists(), f"{path} was not built"
    truth = registrations(variant, target)
    assert len(truth) >= 10, truth  # the fixture registers a dozen: the shim saw them
    assert _ours(path) == [tuple(t) for t in truth]


def test_dtors_kinds_and_local_statics(siof_build: Path) -> None:
    """The fixture's special cases keep their labels: C's atexit, thread_local, the function-local static,
    libstdc++'s string destructor (defined elsewhere: no address), the array helper (no object)."""
    require_tool("g++", packages=PACKAGES)
    doc = cli_json(run_main("inits", "--dtors", "--json", str(siof_build / "gcc-O2" / "dtors"),
                             check=True).stdout)
    dtors = doc["files"][0]["exit_time_destructors"]
    kinds = [d["kind"] for d in dtors]
    assert kinds.count("atexit_c") == 1 and kinds.count("thread_atexit") == 1
    local = [d for d in dtors if d["function_local_static"]]
    assert [d["object"]["symbol"] for d in local] == ["_ZZ12local_staticvE1s"]
    ext = [d for d in dtors if d["dtor"]["address"] is None]
    assert len(ext) == 1 and "basic_string" in ext[0]["dtor"]["demangled"]
    assert any(d["object"] is None and d["dtor"]["symbol"].startswith("__tcf_") for d in dtors)


def test_text_lists_what_runs_at_exit_last_registered_first(siof_build: Path) -> None:
    require_tool("g++", packages=PACKAGES)
    path = str(siof_build / "gcc-O2" / "dtors")
    text = run_main("inits", "--dtors", path, check=True).stdout
    doc = cli_json(run_main("inits", "--dtors", "--json", path, check=True).stdout)
    lines = [ln for ln in text.splitlines() if "(registered by initializer" in ln]
    assert len(lines) == len(doc["files"][0]["exit_time_destructors"])
    assert "c_bye" in lines[0]  # registered last (dt_c.c's constructor), runs first
    assert "g_early" in lines[-1]  # init_priority(200): registered first, runs last
