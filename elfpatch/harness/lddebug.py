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

The log can be huge (a library that calls dlsym in a loop, or has a million relocations, makes hundreds of MB),
so it is read a line at a time and what is kept is bounded: a binding repeated within one request is kept once
(the first: later ones are judged the same), paths are stored once, a line longer than MAX_LINE is skipped, and
once KEEP_BYTES of events are kept the rest are counted (``LdDebug.dropped``, ``LdDebug.cut_lines``), never
kept: ``LdDebug.notes()`` says so, and dlcheck passes that on as a warning.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, NamedTuple

from elfpatch.harness.elffacts import defines_unique

_BINDING = re.compile(r"^binding file (.*?) \[(\d+)\] to (.*) \[(\d+)\]: (\w+) symbol `(.*)'(?: \[(.*)\])?$")
_MARK = re.compile(r"^marking (.*?) \[(\d+)\] as NODELETE due to (.*)$")
_REFERENCE = re.compile(r"^reference from (?:(main program)|(.*) \[(\d+)\])$")
_OBJECT = re.compile(r"^object=(.*) \[(\d+)\]$")
_SCOPE = re.compile(r"^ scope (\d+):(.*)$")
_FILE = re.compile(r"^file=(.*?) \[(\d+)\];  (.*)$")
_NEEDED = re.compile(r"^needed by (.*) \[(\d+)\]( \(relocation dependency\))?$")
_MARKER = re.compile(r"^elfpatch-harness op (\d+) (\S+)$")
_GLOBAL = re.compile(r"^add (.*) \[(\d+)\] to global scope$")

MAX_LINE = 1 << 20  # bytes; a longer line is no loader line (a scope of 10,000 objects is ~1 MB): skipped
KEEP_BYTES = 32 << 20  # what the kept events may take, counted as their line's length plus EVENT_COST each
EVENT_COST = 160  # an event's own overhead (its tuple, its place in the lists and the set), in the budget


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
        self.dropped = 0  # events not kept: the KEEP_BYTES budget was spent
        self.cut_lines = 0  # lines longer than MAX_LINE, skipped

    def notes(self) -> list[str]:
        """What was left out of this parse, one sentence each ([] when nothing was)."""
        out = []
        if self.dropped:
            out.append(f"the loader's LD_DEBUG log was too large to keep whole: {self.dropped} of its events "
                       f"after the first {KEEP_BYTES >> 20} MiB were not kept, so bindings, marks and "
                       "dependencies among them are not reported")
        if self.cut_lines:
            out.append(f"{self.cut_lines} line(s) of the loader's LD_DEBUG log longer than {MAX_LINE >> 20} MiB "
                       "were skipped")
        return out

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


class _Budget:
    """What may still be kept (bytes, as KEEP_BYTES counts them) and how many events were not."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.dropped = 0

    def take(self, line: str) -> bool:
        cost = len(line) + EVENT_COST
        if cost > self.left:
            self.dropped += 1
            return False
        self.left -= cost
        return True


class _Scopes:
    """The scope lines printed for each object, with the request that printed them, life by life. Lines are
    kept padded with a space at each end, so that membership is one substring test (paths may hold spaces,
    so the lines are not split). A line printed again in the same life is kept once, with its first request
    (the earliest is the one that counts). Kept within a budget of their own: once it is spent, ``full_since``
    is the request from which bindings are judged None (no evidence), never out of scope by a missing line."""

    def __init__(self) -> None:
        self.lives: dict[str, list[list[tuple[int, str]]]] = {}  # object -> its lives' (op, " scope line ")s
        self.global_lines: list[tuple[int, str]] = []  # every ``scope 0`` line and global-scope addition
        self.global_since: dict[str, int] = {}  # each global-scope member -> the first request it was seen in
        self.budget = _Budget(KEEP_BYTES)
        self.full_since: int | None = None
        self._seen: set[tuple[str, int, str]] = set()  # (object, life, padded line)
        self._verdicts: dict[tuple[str, int, str, int], bool | None] = {}

    def life(self, obj: str) -> int:
        return len(self.lives.setdefault(obj, [[]])) - 1

    def _keep(self, key: tuple[str, int, str], op: int) -> bool:
        if key in self._seen:
            return False
        if not self.budget.take(key[2]):
            self.full_since = op if self.full_since is None else self.full_since
            return False
        self._seen.add(key)
        return True

    def add(self, owner: str, index: int, line: str, op: int) -> None:
        padded = f" {line} "
        lives = self.lives.setdefault(owner, [[]])
        if self._keep((owner, len(lives) - 1, padded), op):
            lives[-1].append((op, padded))
        if index == 0 and self._keep(("", 0, padded), op):
            self.global_lines.append((op, padded))
            for name in line.split():
                self.global_since.setdefault(name, op)

    def add_global(self, obj: str, op: int) -> None:
        if self._keep(("", 0, f" {obj} "), op):
            self.global_lines.append((op, f" {obj} "))
            self.global_since.setdefault(obj, op)

    def in_global(self, other: str, op: int) -> bool:
        if " " not in other:  # the common case: one dictionary look-up
            return self.global_since.get(other, op + 1) <= op
        needle = f" {other} "
        return any(when <= op and needle in line for when, line in self.global_lines)

    def end_life(self, obj: str, op: int) -> None:
        if self.budget.take(obj):
            self.lives.setdefault(obj, [[]]).append([])
        else:
            self.full_since = op if self.full_since is None else self.full_since

    def judge(self, obj: str, life: int, other: str, op: int) -> bool | None:
        if self.full_since is not None and op >= self.full_since:
            return None  # scopes of this request may be missing: no verdict without the loader's evidence
        key = (obj, life, other, op)
        if key not in self._verdicts:
            needle = f" {other} "
            lines = [line for when, line in self.lives[obj][life] if when <= op]
            self._verdicts[key] = None if not lines else (self.in_global(other, op)
                                                           or any(needle in line for line in lines))
        return self._verdicts[key]


class _Parser:
    """One pass over the output: the request in progress (from the markers) and the object whose scope lines
    follow its ``object=`` line are the state each line is read against. Events are kept within a budget,
    each distinct one once, and paths stored once (a log names the same few hundred objects a million
    times)."""

    def __init__(self) -> None:
        self.result = LdDebug()
        self.scopes = _Scopes()
        self.budget = _Budget(KEEP_BYTES)
        self.lives: list[int] = []  # each kept binding's referrer's life then
        self.op = 0
        self.scope_owner: str | None = None
        self._seen: set[tuple] = set()  # the events kept, to keep each once
        # The previous binding line, until a line that changes what a binding is judged by (a request, an
        # object's scopes, a life): the same line again is the same event.
        self.last_binding: str | None = None
        self._names: dict[str, str] = {}

    def name(self, text: str) -> str:
        return self._names.setdefault(text, text)

    def keep(self, key: tuple, line: str) -> bool:
        """Whether the event ``key`` is new and fits in the budget (then it is remembered as kept)."""
        if key in self._seen or not self.budget.take(line):
            return False
        self._seen.add(key)
        return True

    def feed(self, line: str) -> None:
        self.result.lines += 1
        if line == self.last_binding:  # a loop of lookups (dlsym) prints the same line a million times
            return
        if self.scope_owner is not None and self._scope_line(line, self.scope_owner):
            return
        # The loader's line kinds start with distinct words: the prefix picks the one pattern to try.
        for prefix, pattern, handler in _HANDLERS:
            if line.startswith(prefix):
                m = pattern.match(line)
                if m is not None:
                    handler(self, m)
                return

    def _scope_line(self, line: str, owner: str) -> bool:
        """Whether ``line`` is a scope of the object just announced; anything but one (or ``no scope``) ends
        the list."""
        s = _SCOPE.match(line)
        if s is not None:
            self.scopes.add(owner, int(s.group(1)), s.group(2).strip(), self.op)
            return True
        if line.strip() != "no scope":
            self.scope_owner = None
        return False

    def _binding(self, b: re.Match[str]) -> None:
        life = self.scopes.life(b.group(1))
        binding = Binding(self.name(b.group(1)), self.name(b.group(3)), b.group(6), b.group(7), self.op)
        # The binding is its own key in its referrer's first life (nearly always): no second tuple to keep.
        self.last_binding = b.group(0)
        if self.keep(binding if life == 0 else (binding, life), b.group(0)):
            self.lives.append(life)
            self.result.bindings.append(binding)

    def _mark(self, mk: re.Match[str]) -> None:
        if not self.keep(("mark", mk.group(1), mk.group(3), self.op), mk.group(0)):
            return
        ref = _REFERENCE.match(mk.group(3))
        source = None if ref is None else ("" if ref.group(1) else self.name(ref.group(2)))
        self.result.marks.append(NodeleteMark(self.name(mk.group(1)), mk.group(3), source, self.op))

    def _object(self, o: re.Match[str]) -> None:
        self.scope_owner = self.name(o.group(1))
        self.last_binding = None

    def _global(self, g: re.Match[str]) -> None:
        self.scopes.add_global(g.group(1), self.op)
        if self.keep(("global", g.group(1)), g.group(0)):
            self.result.global_scope.append(self.name(g.group(1)))

    def _file(self, f: re.Match[str]) -> None:
        what = f.group(3)
        if what == "destroying link map":
            self.last_binding = None
            self.scopes.end_life(f.group(1), self.op)  # a later load of the same path is a new life
            if self.budget.take(f.group(0)):
                self.result.unmapped.append(self.name(f.group(1)))
            return
        n = _NEEDED.match(what)
        if n is not None and self.keep(("dep", f.group(1), n.group(1), n.group(3)), f.group(0)):
            self.result.dependencies.append(Dependency(self.name(f.group(1)), self.name(n.group(1)),
                                                       bool(n.group(3)), self.op))

    def _marker(self, mo: re.Match[str]) -> None:
        self.op = int(mo.group(1))
        self.last_binding = None

    def finish(self) -> LdDebug:
        result, scopes = self.result, self.scopes
        # A dependency is relocated before its scopes are printed in the same request: judging at the end, by
        # request number, counts those scopes as in force (they were).
        for index, life in enumerate(self.lives):
            b = result.bindings[index]
            result.bindings[index] = b._replace(in_scope=scopes.judge(b.file, life, b.bound_to, b.op))
        for obj, lives in scopes.lives.items():  # the latest life that printed any scope
            printed = [life for life in lives if life]
            if printed:
                result.scopes[obj] = [line[1:-1] for _, line in printed[-1]]
        result.dropped = self.budget.dropped + scopes.budget.dropped
        return result


_HANDLERS: tuple[tuple[str, re.Pattern[str], Callable[[_Parser, re.Match[str]], None]], ...] = (
    ("binding file ", _BINDING, _Parser._binding),
    ("marking ", _MARK, _Parser._mark),
    ("object=", _OBJECT, _Parser._object),
    ("add ", _GLOBAL, _Parser._global),
    ("file=", _FILE, _Parser._file),
    ("elfpatch-harness op ", _MARKER, _Parser._marker),
)


def _parse_lines(lines: Iterable[str], pid: int | None) -> LdDebug:
    parser = _Parser()
    for raw in lines:
        head, colon, rest = raw.partition(":")  # ``  PID:\tTEXT``
        head = head.strip()
        if not colon or not (head.isascii() and head.isdecimal()) or (pid is not None and int(head) != pid):
            continue
        parser.feed(rest[1:] if rest.startswith("\t") else rest)
    return parser.finish()


def parse(text: str, pid: int | None = None) -> LdDebug:
    """Parse LD_DEBUG output; with ``pid``, only that process's lines."""
    return _parse_lines(text.splitlines(), pid)


def parse_file(path: str, pid: int | None = None) -> LdDebug:
    """Parse the LD_DEBUG output file at ``path`` a line at a time (memory bounded whatever its size; see
    the module's notes); a file that cannot be read is an empty log."""
    try:
        with open(path, "rb") as f:
            reader = _LineReader(f)
            result = _parse_lines(reader, pid)
    except OSError:
        return LdDebug()
    result.cut_lines = reader.cut
    return result


class _LineReader:
    """The lines of a binary file as text, at most MAX_LINE bytes each: a longer one is skipped (counted)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.cut = 0

    def __iter__(self) -> Iterator[str]:
        while True:
            raw = self.f.readline(MAX_LINE)
            if not raw:
                return
            if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
                self.cut += 1
                while raw and not raw.endswith(b"\n"):  # the rest of the long line
                    raw = self.f.readline(MAX_LINE)
                continue
            yield raw.decode("utf-8", "replace").rstrip("\n")
