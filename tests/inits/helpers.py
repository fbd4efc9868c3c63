"""The init_order fixtures: where they are, running one and reading its trace (native_tests/init_order/
trace.h), and mapping elfpatch's entries onto the trace's tokens."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

from conftest import NATIVE, require_tool
from helpers import case

INIT_ORDER = NATIVE / "init_order"
BUILD = INIT_ORDER / "build"
NATIVE_VARIANTS = ("gnu", "relr", "lld", "stripped")
LLD = case("lld", needs=["ld.lld"])  # the lld variant as a matrix case: `cross`
# Cross variants: (build dir, compiler prefix, qemu binary). Each runs under qemu-user with the sysroot.
CROSS_VARIANTS = {
    "i686": ("i686-linux-gnu", "qemu-i386"),
    "i686-relr": ("i686-linux-gnu", "qemu-i386"),
    "aarch64": ("aarch64-linux-gnu", "qemu-aarch64"),
    "powerpc64": ("powerpc64-linux-gnu", "qemu-ppc64"),
    "powerpc64-relr": ("powerpc64-linux-gnu", "qemu-ppc64"),
    "s390x": ("s390x-linux-gnu", "qemu-s390x"),
}

# Functions GCC named after the first global symbol of a non-PIC file: that symbol -> the file (prio_nopie).
KEYED_SOURCES = {"prio_default": "prio.cpp"}


class Trace(NamedTuple):
    events: list[tuple[str, str]]  # (event, what) in order, slots excluded
    # object basename ("main" for the program) -> (kind, index) -> address
    slots: dict[str, dict[tuple[str, int], int]]

    def between(self, begin: str, end: str) -> list[tuple[str, str]]:
        """Events strictly between two `mark` lines."""
        i = self.events.index(("mark", begin))
        j = self.events.index(("mark", end))
        return self.events[i + 1:j]

    def of(self, *kinds: str, events: list[tuple[str, str]] | None = None) -> list[str]:
        return [what for ev, what in (self.events if events is None else events) if ev in kinds]


def run_trace(program: Path, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None,
              args: tuple[str, ...] = ()) -> Trace:
    proc = subprocess.run([*prefix, str(program.resolve()), *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, f"{program} failed ({proc.returncode}): {proc.stderr}"
    return parse_trace(proc.stdout)


def parse_trace(text: str) -> Trace:
    events: list[tuple[str, str]] = []
    slots: dict[str, dict[tuple[str, int], int]] = {}
    for line in text.splitlines():
        event, _, what = line.partition(" ")
        if event == "slot":
            obj, kind, index, addr = what.split()
            slots.setdefault(obj, {})[(kind, int(index))] = int(addr, 16)
        elif event:
            events.append((event, what))
    return Trace(events, slots)


def token(entry: dict[str, Any]) -> str:
    """The trace token an entry's function prints: "<file>[@<priority>]" for a translation unit's C++
    globals, else the function's own name."""
    source = entry["source"]
    symbol = entry["symbol"] or ""
    if symbol and not symbol.startswith("_GLOBAL__"):
        source = None  # a plain function (constructor(N), preinit) prints its own name, not its file
    if source is None and symbol.startswith("_GLOBAL__sub_I"):
        source = KEYED_SOURCES.get(re.sub(r"^_GLOBAL__sub_I(?:\.\d{5})?_", "", symbol))
    if source:
        return source if entry["priority"] is None else f"{source}@{entry['priority']}"
    name = entry["demangled"] or symbol
    return name.split("(")[0]


def user_entries(entries: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    return [e for e in entries if e["kind"] in kinds and not e["toolchain"]]


def slot_map(listing: dict[str, Any]) -> dict[tuple[str, int], int]:
    """(kind, index) -> address for the array entries of one file's listing."""
    return {(e["kind"], e["index"]): e["address"] for side in ("init", "fini") for e in listing[side]
            if e["kind"] in ("preinit_array", "init_array", "fini_array", "ctors", "dtors")}


def cross_variant(build: Path, variant: str) -> tuple[Path, tuple[str, ...]]:
    """The variant's build directory and the command prefix that runs its programs (qemu with the sysroot);
    skips (or fails under ELFPATCH_REQUIRE_CROSS) when the compiler or qemu is missing."""
    triple, qemu = CROSS_VARIANTS[variant]
    require_tool(f"{triple}-g++", qemu)
    return build / variant, (qemu, "-L", f"/usr/{triple}")


INIT_KINDS = ("preinit_array", "ctors", "init_array")
FINI_KINDS = ("fini_array", "fini", "dtors")


def nm_addresses(path: Path) -> dict[str, set[int]]:
    """name -> addresses, from binutils nm (which reads every architecture the fixtures are built for)."""
    out = subprocess.run(["nm", "--defined-only", str(path)], capture_output=True, text=True,
                         check=True).stdout
    table: dict[str, set[int]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            table.setdefault(parts[2], set()).add(int(parts[0], 16))
    return table


def variant_dir(build: Path, variant: str) -> Path:
    """A native variant's build directory; the lld one needs ld.lld (skip, or fail under CI, without it)."""
    if variant == "lld":
        require_tool("ld.lld")
    return build / variant
