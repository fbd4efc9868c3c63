"""Parse what glibc's loader prints under ``LD_DEBUG=bindings,scopes,files``.

The lines that matter, as elf/dl-lookup.c, dl-open.c and dl-close.c print them (after the ``PID:\\t`` prefix):

    binding file A [0] to B [0]: normal symbol `S' [VERSION]
    marking A [0] as NODELETE due to unique symbol
    marking A [0] as NODELETE due to reference from B [0]
    object=A [0]
     scope 0: PROG /lib/x86_64-linux-gnu/libc.so.6 ...
     scope 1: A DEP ...
    file=A [0];  needed by B [0] (relocation dependency)
    file=A [0];  destroying link map

plus the ``elfpatch-harness op N NAME`` markers the child writes before each request, which give every event
the number of the request during which the loader printed it (0: during start-up).
"""
from __future__ import annotations

import re
from typing import NamedTuple

_LINE = re.compile(r"^\s*(\d+):\t?(.*)$")
_BINDING = re.compile(r"^binding file (.*?) \[(\d+)\] to (.*) \[(\d+)\]: (\w+) symbol `(.*)'(?: \[(.*)\])?$")
_MARK = re.compile(r"^marking (.*?) \[(\d+)\] as NODELETE due to (.*)$")
_REFERENCE = re.compile(r"^reference from (?:(main program)|(.*) \[(\d+)\])$")
_OBJECT = re.compile(r"^object=(.*) \[(\d+)\]$")
_SCOPE = re.compile(r"^ scope (\d+):(.*)$")
_FILE = re.compile(r"^file=(.*?) \[(\d+)\];  (.*)$")
_NEEDED = re.compile(r"^needed by (.*) \[(\d+)\]( \(relocation dependency\))?$")
_MARKER = re.compile(r"^elfpatch-harness op (\d+) (\S+)$")


class Binding(NamedTuple):
    """One symbol lookup: ``file`` referred to ``symbol`` and the loader bound it to ``bound_to``."""

    file: str
    bound_to: str
    symbol: str
    version: str | None
    op: int


class NodeleteMark(NamedTuple):
    """``marking PATH as NODELETE due to REASON``; ``reference_from`` is set for reference marks."""

    path: str
    reason: str
    reference_from: str | None
    op: int


class Dependency(NamedTuple):
    """``file=PATH;  needed by BY``: a DT_NEEDED entry, or (relocation) a binding the loader recorded."""

    path: str
    needed_by: str
    relocation: bool
    op: int


class LdDebug:
    """Everything parsed from one process's LD_DEBUG output."""

    def __init__(self) -> None:
        self.bindings: list[Binding] = []
        self.marks: list[NodeleteMark] = []
        self.dependencies: list[Dependency] = []
        self.scopes: dict[str, list[str]] = {}  # object -> its scope lines (``scope 1:`` is the local one)
        self.unmapped: list[str] = []  # ``destroying link map``, in order
        self.lines = 0

    def nodelete(self, path: str, reason_prefix: str = "") -> list[NodeleteMark]:
        return [m for m in self.marks if m.path == path and m.reason.startswith(reason_prefix)]

    def in_scope(self, obj: str, other: str) -> bool:
        """Whether the loader searches ``other`` when resolving ``obj``'s references (``other`` is in one of
        the scopes it printed for ``obj``). An object without printed scopes counts as searching everything,
        so that no binding is called cross without the loader's own evidence."""
        lines = self.scopes.get(obj)
        if not lines:
            return True
        needle = f" {other} "
        return any(needle in f" {line} " for line in lines)

    def cross_bindings(self, objects: set[str]) -> list[Binding]:
        """Bindings between two different ``objects`` where the definition lies outside the referring
        object's own scope: isolation broken (with RTLD_LOCAL, only the unique-symbol table does that).
        Deduplicated, in the order the loader printed them."""
        seen: set[tuple[str, str, str]] = set()
        out = []
        for b in self.bindings:
            key = (b.file, b.bound_to, b.symbol)
            if b.file == b.bound_to or key in seen or b.file not in objects or b.bound_to not in objects:
                continue
            if not self.in_scope(b.file, b.bound_to):
                seen.add(key)
                out.append(b)
        return out


def parse(text: str, pid: int | None = None) -> LdDebug:
    """Parse LD_DEBUG output; with ``pid``, only that process's lines."""
    result = LdDebug()
    op = 0
    scope_owner: str | None = None
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if m is None or (pid is not None and int(m.group(1)) != pid):
            continue
        result.lines += 1
        line = m.group(2)
        if scope_owner is not None:
            s = _SCOPE.match(line)
            if s is not None:
                result.scopes.setdefault(scope_owner, []).append(s.group(2).strip())
                continue
            if line.strip() != "no scope":
                scope_owner = None
        if line.startswith("binding file "):
            b = _BINDING.match(line)
            if b is not None:
                result.bindings.append(Binding(b.group(1), b.group(3), b.group(6), b.group(7), op))
        elif line.startswith("marking "):
            mk = _MARK.match(line)
            if mk is not None:
                ref = _REFERENCE.match(mk.group(3))
                source = None if ref is None else ("" if ref.group(1) else ref.group(2))
                result.marks.append(NodeleteMark(mk.group(1), mk.group(3), source, op))
        elif line.startswith("object="):
            o = _OBJECT.match(line)
            if o is not None:
                scope_owner = o.group(1)
                result.scopes[scope_owner] = []  # the last printout of an object's scopes wins
        elif line.startswith("file="):
            f = _FILE.match(line)
            if f is not None:
                what = f.group(3)
                if what == "destroying link map":
                    result.unmapped.append(f.group(1))
                else:
                    n = _NEEDED.match(what)
                    if n is not None:
                        result.dependencies.append(Dependency(f.group(1), n.group(1), bool(n.group(3)), op))
        elif line.startswith("elfpatch-harness op "):
            mo = _MARKER.match(line)
            if mo is not None:
                op = int(mo.group(1))
    return result
