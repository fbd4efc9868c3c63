"""Parse what glibc's loader prints under ``LD_DEBUG=bindings,scopes,files``.

The lines that matter, as elf/dl-lookup.c, dl-open.c and dl-close.c print them (after the ``PID:\\t`` prefix):

    binding file A [0] to B [0]: normal symbol `S' [VERSION]
    marking A [0] as NODELETE due to unique symbol
    marking A [0] as NODELETE due to reference from B [0]
    object=A [0]
     scope 0: PROG /lib/x86_64-linux-gnu/libc.so.6 ...
     scope 1: A DEP ...
    add A [0] to global scope
    file=A [0];  needed by B [0] (relocation dependency)
    file=A [0];  destroying link map

plus the ``elfpatch-harness op N NAME`` markers the child writes before each request, which give every event
the number of the request during which the loader printed it (0: during start-up).

Scopes accumulate: dl-open.c prints an object's scopes after mapping it (the new object before relocation, its
new dependencies after), and when a later dlopen brings in an already-loaded object it prints only the scope it
added (``scope 2: ...``). So a binding is judged against every scope printed for the referrer in its current
life (until ``destroying link map``) during its own request or an earlier one, plus the global scope as it
stood then (every ``scope 0`` line and ``add ... to global scope`` so far: it only grows).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from elfpatch.harness.elffacts import defines_unique

_LINE = re.compile(r"^\s*(\d+):\t?(.*)$")
_BINDING = re.compile(r"^binding file (.*?) \[(\d+)\] to (.*) \[(\d+)\]: (\w+) symbol `(.*)'(?: \[(.*)\])?$")
_MARK = re.compile(r"^marking (.*?) \[(\d+)\] as NODELETE due to (.*)$")
_REFERENCE = re.compile(r"^reference from (?:(main program)|(.*) \[(\d+)\])$")
_OBJECT = re.compile(r"^object=(.*) \[(\d+)\]$")
_SCOPE = re.compile(r"^ scope (\d+):(.*)$")
_FILE = re.compile(r"^file=(.*?) \[(\d+)\];  (.*)$")
_NEEDED = re.compile(r"^needed by (.*) \[(\d+)\]( \(relocation dependency\))?$")
_MARKER = re.compile(r"^elfpatch-harness op (\d+) (\S+)$")
_GLOBAL = re.compile(r"^add (.*) \[(\d+)\] to global scope$")


class Binding(NamedTuple):
    """One symbol lookup: ``file`` referred to ``symbol`` and the loader bound it to ``bound_to``."""

    file: str
    bound_to: str
    symbol: str
    version: str | None
    op: int
    # Whether ``bound_to`` was in a scope the loader had printed for ``file`` by then; None when it printed
    # none for ``file`` (start-up objects, ld.so): never called out of scope without the loader's evidence.
    in_scope: bool | None = None


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
        self.scopes: dict[str, list[str]] = {}  # object -> the scope lines of its latest life
        self.global_scope: list[str] = []  # objects added to the global scope by dlopen(RTLD_GLOBAL)
        self.unmapped: list[str] = []  # ``destroying link map``, in order
        self.lines = 0

    def nodelete(self, path: str, reason_prefix: str = "") -> list[NodeleteMark]:
        return [m for m in self.marks if m.path == path and m.reason.startswith(reason_prefix)]

    def in_scope(self, obj: str, other: str) -> bool:
        """Whether ``other`` is in a scope the loader printed for ``obj`` (in its latest life). An object
        without printed scopes counts as searching everything."""
        lines = self.scopes.get(obj)
        if not lines:
            return True
        return any(_member(other, line) for line in lines) or other in self.global_scope

    def out_of_scope(self, objects: set[str]) -> list[Binding]:
        """Bindings between two different ``objects`` to a definition outside the scopes in force for the
        referrer when the loader made them. Deduplicated, in the order the loader printed them."""
        seen: set[tuple[str, str, str]] = set()
        out = []
        for b in self.bindings:
            key = (b.file, b.bound_to, b.symbol)
            if b.in_scope is not False or key in seen or b.file == b.bound_to:
                continue
            if b.file in objects and b.bound_to in objects:
                seen.add(key)
                out.append(b)
        return out

    def cross_bindings(self, objects: set[str]) -> list[Binding]:
        """The out-of-scope bindings to STB_GNU_UNIQUE definitions (as the defining file's ``.dynsym`` says):
        isolation broken by the namespace's unique-symbol table."""
        return [b for b in self.out_of_scope(objects) if defines_unique(b.bound_to, b.symbol)]


def _member(name: str, line: str) -> bool:
    return f" {name} " in f" {line} "


class _Scopes:
    """The scope lines printed for each object, with the request that printed them, life by life. Lines are
    kept padded with a space at each end, so that membership is one substring test (paths may hold spaces,
    so the lines are not split)."""

    def __init__(self) -> None:
        self.lives: dict[str, list[list[tuple[int, str]]]] = {}  # object -> its lives' (op, " scope line ")s
        self.global_lines: list[tuple[int, str]] = []  # every ``scope 0`` line and global-scope addition
        self.global_since: dict[str, int] = {}  # each global-scope member -> the first request it was seen in
        self._verdicts: dict[tuple[str, int, str, int], bool | None] = {}

    def life(self, obj: str) -> int:
        return len(self.lives.setdefault(obj, [[]])) - 1

    def add(self, owner: str, index: int, line: str, op: int) -> None:
        padded = f" {line} "
        self.lives.setdefault(owner, [[]])[-1].append((op, padded))
        if index == 0:
            self.global_lines.append((op, padded))
            for name in line.split():
                self.global_since.setdefault(name, op)

    def add_global(self, obj: str, op: int) -> None:
        self.global_lines.append((op, f" {obj} "))
        self.global_since.setdefault(obj, op)

    def in_global(self, other: str, op: int) -> bool:
        if " " not in other:  # the common case: one dictionary look-up
            return self.global_since.get(other, op + 1) <= op
        needle = f" {other} "
        return any(when <= op and needle in line for when, line in self.global_lines)

    def end_life(self, obj: str) -> None:
        self.lives.setdefault(obj, [[]]).append([])

    def judge(self, obj: str, life: int, other: str, op: int) -> bool | None:
        key = (obj, life, other, op)
        if key not in self._verdicts:
            needle = f" {other} "
            lines = [line for when, line in self.lives[obj][life] if when <= op]
            self._verdicts[key] = None if not lines else (self.in_global(other, op)
                                                           or any(needle in line for line in lines))
        return self._verdicts[key]


class _Parser:
    """One pass over the output: the request in progress (from the markers) and the object whose scope lines
    follow its ``object=`` line are the state each line is read against."""

    def __init__(self) -> None:
        self.result = LdDebug()
        self.scopes = _Scopes()
        self.pending: list[tuple[int, int]] = []  # (binding index, the referrer's life then)
        self.op = 0
        self.scope_owner: str | None = None

    def feed(self, line: str) -> None:
        self.result.lines += 1
        if self.scope_owner is not None and self._scope_line(line):
            return
        # The loader's line kinds start with distinct words: the prefix picks the one pattern to try.
        for prefix, pattern, handler in _HANDLERS:
            if line.startswith(prefix):
                m = pattern.match(line)
                if m is not None:
                    handler(self, m)
                return

    def _scope_line(self, line: str) -> bool:
        """Whether ``line`` is a scope of the object just announced; anything but one (or ``no scope``) ends
        the list."""
        s = _SCOPE.match(line)
        if s is not None:
            self.scopes.add(self.scope_owner, int(s.group(1)), s.group(2).strip(), self.op)
            return True
        if line.strip() != "no scope":
            self.scope_owner = None
        return False

    def _binding(self, b: re.Match[str]) -> None:
        self.pending.append((len(self.result.bindings), self.scopes.life(b.group(1))))
        self.result.bindings.append(Binding(b.group(1), b.group(3), b.group(6), b.group(7), self.op))

    def _mark(self, mk: re.Match[str]) -> None:
        ref = _REFERENCE.match(mk.group(3))
        source = None if ref is None else ("" if ref.group(1) else ref.group(2))
        self.result.marks.append(NodeleteMark(mk.group(1), mk.group(3), source, self.op))

    def _object(self, o: re.Match[str]) -> None:
        self.scope_owner = o.group(1)

    def _global(self, g: re.Match[str]) -> None:
        self.scopes.add_global(g.group(1), self.op)
        self.result.global_scope.append(g.group(1))

    def _file(self, f: re.Match[str]) -> None:
        what = f.group(3)
        if what == "destroying link map":
            self.result.unmapped.append(f.group(1))
            self.scopes.end_life(f.group(1))  # a later load of the same path is a new life
            return
        n = _NEEDED.match(what)
        if n is not None:
            self.result.dependencies.append(Dependency(f.group(1), n.group(1), bool(n.group(3)), self.op))

    def _marker(self, mo: re.Match[str]) -> None:
        self.op = int(mo.group(1))

    def finish(self) -> LdDebug:
        result, scopes = self.result, self.scopes
        # A dependency is relocated before its scopes are printed in the same request: judging at the end, by
        # request number, counts those scopes as in force (they were).
        for index, life in self.pending:
            b = result.bindings[index]
            result.bindings[index] = b._replace(in_scope=scopes.judge(b.file, life, b.bound_to, b.op))
        for obj, lives in scopes.lives.items():  # the latest life that printed any scope
            printed = [life for life in lives if life]
            if printed:
                result.scopes[obj] = [line[1:-1] for _, line in printed[-1]]
        return result


_HANDLERS: tuple[tuple[str, re.Pattern[str], Callable[[_Parser, re.Match[str]], None]], ...] = (
    ("binding file ", _BINDING, _Parser._binding),
    ("marking ", _MARK, _Parser._mark),
    ("object=", _OBJECT, _Parser._object),
    ("add ", _GLOBAL, _Parser._global),
    ("file=", _FILE, _Parser._file),
    ("elfpatch-harness op ", _MARKER, _Parser._marker),
)


def parse(text: str, pid: int | None = None) -> LdDebug:
    """Parse LD_DEBUG output; with ``pid``, only that process's lines."""
    parser = _Parser()
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if m is None or (pid is not None and int(m.group(1)) != pid):
            continue
        parser.feed(m.group(2))
    return parser.finish()
