"""What one function does, as far as static initialization cares: the calls it makes (with the constant
addresses in its argument registers), the global memory it loads and stores, and its tail calls.

Decoded with capstone's ``disasm_lite`` (no operand detail objects: about 3x faster), cut into basic blocks
and walked in reverse post-order, so that events come out in the order they run (a guarded variable's
out-of-line construction block comes before the code it jumps back to). Registers carry constants forward:
``lea``/``adrp``+``add`` materialize addresses, a load from a GOT slot yields the address the slot holds once
relocated, ``add``/``sub`` move a known address, a call clobbers the caller-saved registers. Stack slots
written with a known value (-O0 spills) are tracked too, and a compare of two known values against a following
``je``/``jne`` decides the branch: GCC's -O0 ``__static_initialization_and_destruction_0(initialize, priority)``
runs only the block of its priority.

A join keeps what all its predecessors agree on. Two different addresses inside one global object agree on the
object: a loop's moving pointer (``this`` of each array element, a fill loop's store pointer) is ``Within`` the
array, and so is an address plus an unknown index. Loop heads take their back edges into account: the sweep
repeats until every loop head's state is stable, so a store through a pointer set before the loop is seen. The
events are the settled pass's, plus the memory accesses of the first pass (each loop's first iteration, run
exactly from the loop's entry state).
"""
from __future__ import annotations

import bisect
from itertools import compress, count, repeat
from operator import itemgetter, ne
from typing import Callable, NamedTuple

from capstone import CsError

from elfpatch.elf.const import EM_AARCH64, EM_X86_64
from elfpatch.inits.a64 import _A64
from elfpatch.inits.budget import CHUNK, FUNCTION_BYTES, Budget
from elfpatch.inits.events import Access, Call, Once
from elfpatch.inits.isa import Isa, no_result
from elfpatch.inits.isa import imm as _imm
from elfpatch.inits.jumptable import (
    A64_TABLE_JUMP,
    a64_case_targets,
    a64_marked_tables,
    marked_tables,
    x86_case_targets,
)
from elfpatch.inits.state import FRAME_ONLY as _FRAME_ONLY
from elfpatch.inits.state import State
from elfpatch.inits.state import case_base as _case_base
from elfpatch.inits.state import case_state as _case_state
from elfpatch.inits.state import equal as _states_equal
from elfpatch.inits.state import head_state as _head_state
from elfpatch.inits.state import join as _meet
from elfpatch.inits.state import with_more as _with
from elfpatch.inits.values import Ptr, Value, address_of
from elfpatch.inits.x86 import _NO_FLOW, _X86

SUPPORTED_MACHINES = frozenset({EM_X86_64, EM_AARCH64})

# Passes over one function's loops before they are cut short. A pass that does not settle lowers some loop
# head's state (a key lost, an exact address widened to Within) or opens an edge a decided compare had closed;
# real code settles in one or two. The bound keeps work on a crafted function linear; a function cut short is
# reported (the analysis says it is incomplete).
MAX_PASSES = 16
# Walks of one function's blocks before the state its jump tables' cases start from agrees with the jumps'
# (see Disassembler._pass); real code agrees at the second. Past it, a case walked before its jump starts from
# the frame alone.
TABLE_PASSES = 4


class Decoded(NamedTuple):
    insns: list  # (address, size, mnemonic, op_str) from capstone
    plans: list  # each instruction's plan (see x86._x86_plan): what the walk does with it, parsed once
    blocks: list  # (first, last) instruction indexes, in reverse post-order (unreachable ones last)
    succs: dict  # block position -> [(successor position, taken: bool | None)]
    back: frozenset  # block positions some later block jumps back to (loop heads)
    has_pred: frozenset  # block positions some edge leads to
    table: int  # the first jump table's instruction index (len(insns): none); blocks after it may be its cases


_NOTHING = Decoded([], [], [], {}, frozenset(), frozenset(), 0)  # a function not seen (see budget.py)
CACHE_INSTRUCTIONS = 400_000  # decoded instructions kept for reuse (about 100 MB); older ones are decoded again


def _disassembler(machine: int):
    import capstone  # only the analysis flags load it (see tests/siof/test_imports.py)

    if machine == EM_X86_64:
        md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    else:
        md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    md.skipdata = True  # literal pools and padding inside a function must not end the sweep
    return md



def direct_calls(insns: list) -> dict[int, int]:
    """The direct calls among decoded instructions: their index -> the address called."""
    out = {}
    for n, insn in enumerate(insns):
        if insn[2] in ("call", "bl"):
            target = _imm(insn[3].lstrip("#"))
            if target is not None:
                out[n] = target
    return out


def _table_jump(mnem: str) -> bool:
    """Whether an instruction is a jump table's jump (x86-64: `notrack jmp`; AArch64: a `br` read as one)."""
    return mnem.startswith("notrack j") or mnem == A64_TABLE_JUMP


# -- the per-file decoder --------------------------------------------------------------------------------


def _blocks(kinds: list, index: dict[int, int], cases: dict[int, list[int]],
            flows: list[int]) -> tuple[list, dict[int, list]]:
    """Basic blocks as (first, last) instruction indexes in address order, and each one's successors
    [(block, taken: True/False for a conditional branch's two ways, None for the only way)]; a table jump
    (``cases``: its instruction -> its cases' instructions) leads to each of its cases. ``flows``: the
    instructions whose kind is not "none"."""
    size = len(kinds)
    leaders = {0}
    for targets in cases.values():
        leaders.update(targets)
    for n in flows:
        kind, target = kinds[n]
        if kind != "none":
            leaders.add(n + 1)
            if target is not None and target in index:
                leaders.add(index[target])
    starts = sorted(x for x in leaders if x < size)
    block_of = {s: b for b, s in enumerate(starts)}
    spans = [(s, (starts[b + 1] if b + 1 < len(starts) else size) - 1) for b, s in enumerate(starts)]
    succ: dict[int, list] = {}
    for b, (_first, last) in enumerate(spans):
        kind, target = kinds[last]
        out = []
        inside = target is not None and target in index
        if kind in ("none", "cond") and b + 1 < len(spans):
            out.append((b + 1, False if kind == "cond" else None))
        if kind in ("cond", "jmp") and inside:
            out.append((block_of[index[target]], True if kind == "cond" else None))
        out.extend((block_of[t], None) for t in cases.get(last, ()))
        succ[b] = out
    return spans, succ


def _reverse_post_order(spans: list, succ: dict[int, list]) -> tuple[list[int], set[int]]:
    """Reverse post-order from the entry (iterative DFS), then the blocks nothing reaches in address order;
    and the blocks some edge jumps back to (loop heads)."""
    order: list[int] = []
    seen = {0} if spans else set()
    stack = [(0, iter(succ.get(0, ())))] if spans else []
    back = set()
    on_stack = {0}
    while stack:
        b, it = stack[-1]
        for s, _taken in it:
            if s in on_stack:
                back.add(s)
            if s not in seen:
                seen.add(s)
                on_stack.add(s)
                stack.append((s, iter(succ.get(s, ()))))
                break
        else:
            stack.pop()
            on_stack.discard(b)
            order.append(b)
    order.reverse()
    order += [b for b in range(len(spans)) if b not in seen]
    return order, back


def _decided(cmp: bool | None, mnem: str) -> bool | None:
    """Whether the block's closing ``je``/``jne`` is taken, when a compare of two known values decided it."""
    if cmp is None:
        return None
    if mnem in ("je", "b.eq"):
        return cmp
    if mnem in ("jne", "b.ne"):
        return not cmp
    return None


def _with_first_iteration(out: list, first: list) -> list:
    """The settled pass's events, and the memory accesses only the first pass saw: it ran each loop's first
    iteration from the loop's entry state, exactly (a loop that starts at a global and then follows loaded
    pointers touches that global once, which the settled loop head no longer knows)."""
    if first is out:
        return out
    seen = {(address_of(ev.address), ev.write) for ev in out if isinstance(ev, Access)}  # Within: its start
    return out + [ev for ev in first if isinstance(ev, Access) and (address_of(ev.address), ev.write) not in seen]


def _loop_spans(dec: Decoded) -> list[tuple[int, int]]:
    """[lo, hi) address spans of the blocks in a cycle (a loop's body), sorted."""
    succs = {p: [q for q, _taken in edges] for p, edges in dec.succs.items()}
    insns, blocks = dec.insns, dec.blocks
    return sorted((insns[blocks[b][0]][0], insns[blocks[b][1]][0] + insns[blocks[b][1]][1])
                  for b in _cyclic(succs, len(blocks)))


def _cyclic(succs: dict[int, list[int]], n: int) -> list[int]:
    """The nodes 0..n-1 in a cycle: a strongly connected component of more than one node, or a node with an
    edge to itself (Tarjan's algorithm, iterative: one pass)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on: set[int] = set()
    out: list[int] = []
    for root in range(n):
        work = [] if root in index else [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on.add(v)
            nxt = succs.get(v, ())
            if i < len(nxt):
                work.append((v, i + 1))
                w = nxt[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if work:  # v is done: the node that reached it takes its low
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                out += _component(stack, on, v, v in nxt)
    return out


def _component(stack: list[int], on: set[int], v: int, self_loop: bool) -> list[int]:
    """Pops the strongly connected component rooted at ``v``: its nodes when it is a cycle, else none."""
    scc = []
    while True:
        w = stack.pop()
        on.discard(w)
        scc.append(w)
        if w == v:
            break
    return scc if len(scc) > 1 or self_loop else []


def _inside_spans(spans: list[tuple[int, int]], at: int) -> bool:
    i = bisect.bisect_right(spans, (at, 1 << 64)) - 1
    return i >= 0 and spans[i][0] <= at < spans[i][1]


def _region(key: int | None, region: int | None, out: list) -> int | None:
    """Enters the inlined thread_local initialization ``key`` (None: none): a Once event when it is not the
    one the events so far end in (``region``)."""
    if key != region:
        out.append(Once(key))
    return key


class _Mark:
    """Where a walk of a function's blocks stood as it reached a loop head (see Disassembler._walk_blocks):
    the block's position, how many events came before it, and copies of the walk's tables (the states in them
    are never changed in place: a block changes a copy of its pending state, a join makes a new one)."""

    __slots__ = ("p", "events", "count", "incoming", "back_in", "used", "live", "walked")

    def __init__(self, p: int, events: list, incoming: dict, back_in: dict, used: dict, live: set,
                 walked: int) -> None:
        self.p, self.events, self.count, self.walked = p, events, len(events), walked
        self.incoming, self.back_in, self.used, self.live = dict(incoming), dict(back_in), dict(used), set(live)

    @staticmethod
    def restart(mark: _Mark | None) -> tuple[int, list, dict[int, State], dict[int, State], dict[int, State],
                                             set[int], int]:
        """(position, events, incoming, back_in, used, live, walked) to go on from ``mark``, each a fresh copy;
        without one, the start of a walk."""
        if mark is None:
            return 0, [], {}, {}, {}, {0}, 0
        return (mark.p, mark.events[: mark.count], dict(mark.incoming), dict(mark.back_in), dict(mark.used),
                set(mark.live), mark.walked)


class Disassembler:
    """Decodes functions of one file (each once, while its cache holds) and walks them with given argument
    registers, within the file's Budget (see budget.py)."""

    def __init__(self, machine: int, read_code: Callable[[int, int], bytes],
                 got: Callable[[int], Value | None],
                 object_of: Callable[[int], int | None] = lambda _a: None,
                 budget: Budget | None = None,
                 extent_known: Callable[[int], bool] = lambda _a: True) -> None:
        """``got``: the value a GOT slot holds once relocated (None: not a slot); ``object_of``: the start of the
        global object covering an address (None: none), for joins and unknown indexes; ``extent_known``:
        whether a function's end is known (else only the code reachable from its start is kept)."""
        self.machine = machine
        self.md = _disassembler(machine)
        self.read_code = read_code
        self.object_of = object_of
        self.arch: Isa = _X86(got, object_of) if machine == EM_X86_64 else _A64(got, object_of)
        self.budget = budget if budget is not None else Budget()
        self.extent_known = extent_known
        self._decoded: dict[tuple[int, int], Decoded] = {}
        self._held = 0  # instructions the cache holds
        self.unsettled: list[int] = []  # functions whose loops were cut short (loop heads assumed nothing)
        # whether the function at an address never returns (the walker, which knows names, sets it)
        self.noreturn: Callable[[int], bool] = lambda _a: False
        # block position -> once key of the inlined thread_local initialization it lies in (the walker sets it)
        self.once_blocks: Callable[[Decoded], dict[int, int]] = lambda _dec: {}
        self._once: dict[int, dict[int, int]] = {}  # once_blocks' answer per function start
        self._in_stub = False  # stub_slot is sweeping a stub (it never nests)

    @property
    def arg_registers(self) -> tuple:
        return self.arch.args

    def decode(self, start: int, end: int) -> Decoded:
        key = (start, end)
        dec = self._decoded.get(key)
        if dec is None:
            dec = self._decoded[key] = self._decode(start, end)
            self._held += len(dec.insns)
            while self._held > CACHE_INSTRUCTIONS and len(self._decoded) > 1:  # oldest first: decoded again
                self._held -= len(self._decoded.pop(next(iter(self._decoded))).insns)
        return dec

    def forget_all(self) -> None:
        """Drops every decoded function (a walker done with this decoder)."""
        self._decoded.clear()
        self._once.clear()
        self._held = 0

    def forget(self, start: int, end: int) -> None:
        """Drops a function's decoded instructions (a caller that keeps what it needs from them)."""
        self._decoded.pop((start, end), None)
        self._once.pop(start, None)

    def _decode(self, start: int, end: int) -> Decoded:
        budget = self.budget
        if budget.exhausted():
            budget.cut_short(start, "the file's budget of instructions was spent")
            return _NOTHING
        if end - start > FUNCTION_BYTES:
            budget.cut_short(start, f"longer than {FUNCTION_BYTES} bytes: decoded that far")
            end = start + FUNCTION_BYTES
        try:
            insns = self._instructions(start, end)
        except CsError as exc:  # CS_ERR_MEM and the like: this function is not seen, the file goes on
            budget.cut_short(start, f"the disassembler failed: {exc}")
            return _NOTHING
        budget.decoded += len(insns)
        insns = (marked_tables if self.machine == EM_X86_64 else a64_marked_tables)(insns, self.read_code)
        plans = self.arch.plans(insns)
        kinds = [p[0] for p in plans]
        self._no_return(insns, kinds)
        # The instructions that end a block (jumps, returns): the only ones the block structure looks at,
        # picked out at C speed, as is the address -> index map.
        flows = list(compress(count(), map(ne, kinds, repeat(_NO_FLOW))))
        index = dict(zip(map(itemgetter(0), insns), count()))
        cases = self._cases(insns, index, flows)
        spans, succ = _blocks(kinds, index, cases or {}, flows)
        order, back = _reverse_post_order(spans, succ)
        if not self.extent_known(start):  # a guessed end: what follows the reachable code is another function
            order = self._reachable(start, order, spans, succ, kinds)
        pos = {b: p for p, b in enumerate(order)}
        blocks = [spans[b] for b in order]
        succs = {pos[b]: [(pos[s], t) for s, t in succ[b] if s in pos] for b in order}
        has_pred = frozenset(s for edges in succs.values() for s, _ in edges)
        table = len(insns) if cases is not None else \
            next((n for n in flows if _table_jump(insns[n][2])), len(insns))
        return Decoded(insns, plans, blocks, succs, frozenset(pos[b] for b in back if b in pos), has_pred, table)

    def _no_return(self, insns: list, kinds: list) -> None:
        """A call of a function that never returns (``__cxa_throw``, ``std::__throw_length_error``, ``abort``)
        ends its block: the code after it in address order is another path's (often a landing pad that only
        the unwinder enters, after what the function built), not where the call goes on."""
        for n, target in direct_calls(insns).items():
            if self.noreturn(target):
                kinds[n] = ("end", None)

    def _cases(self, insns: list, index: dict[int, int], flows: list[int]) -> dict[int, list[int]] | None:
        """Each table jump's case instructions (jump's index -> theirs), when every table jump of the function
        has its table read (jumptable.py) and every case is an instruction of it; else None. ``flows``: the
        instructions with control flow (a table jump is one)."""
        cases: dict[int, list[int]] = {}
        for n in flows:
            if not _table_jump(insns[n][2]):
                continue
            read = x86_case_targets if self.machine == EM_X86_64 else a64_case_targets
            targets = read(insns, n, self.read_code)
            if targets is None or any(t not in index for t in targets):
                return None
            cases[n] = [index[t] for t in targets]
        return cases

    def _instructions(self, start: int, end: int) -> list:
        """capstone's (address, size, mnemonic, op_str) tuples for [start, end), CHUNK bytes at a time (its
        instruction array for a whole 3 MB function is what ran out of memory). An instruction cut by a
        chunk's end is decoded again from its start with the next chunk."""
        insns: list = []
        pos = start
        while pos < end:
            stop = min(end, pos + CHUNK)
            got = list(self.md.disasm_lite(self.read_code(pos, stop - pos), pos))
            if stop < end:  # the last 16 bytes may hold a truncated instruction (skipdata would eat it)
                got = [i for i in got if i[0] + 16 <= stop] or got[:1]
            if not got:
                break
            insns += got
            pos = got[-1][0] + got[-1][1]
        return insns

    def _reachable(self, start: int, order: list, spans: list, succ: dict, kinds: list) -> list:
        """The blocks reachable from the entry (the RPO's head). A jump table among them leaves the reachable
        end unknown: the function is reported cut. A jump through a register or memory is a call to what the
        walk finds there (crtstuff's ``jmp *%rax`` to a GOT slot's function), or, unknown, an indirect call
        that makes every walk reaching it incomplete: no cut (any code it could enter is not taken as seen)."""
        reach = {0}
        for b in order:
            if b in reach:
                reach.update(s for s, _ in succ.get(b, ()))
        if any(kinds[spans[b][1]][0] == "table" and kinds[spans[b][1]][1] is None for b in reach):
            self.budget.cut_short(start, "no size, no FDE and a jump through a register")
        last = len(kinds) - 1  # a reachable block that runs on past the guessed end: its code is not seen
        if any(spans[b][1] == last and kinds[last][0] in ("none", "cond") for b in reach):
            self.budget.cut_short(start, "no size, no FDE and code that runs past the guessed end")
        return [b for b in order if b in reach]

    def sweep(self, start: int, end: int, entry_values: dict) -> list:
        """Events of the function at [start, end) in run order, given its known argument registers; a call in a
        loop's body is marked ``looped``."""
        dec = self.decode(start, end)
        events = self._sweep(dec, start, end, entry_values)
        if not dec.back or not any(type(ev) is Call for ev in events):
            return events
        spans = _loop_spans(dec)
        return [ev._replace(looped=True) if type(ev) is Call and _inside_spans(spans, ev.at) else ev
                for ev in events]

    def _sweep(self, dec: Decoded, start: int, end: int, entry_values: dict) -> list:
        entry = State(entry_values)  # never changed: the entry block starts from a copy
        if dec.insns and self.budget.walked >= self.budget.steps:
            self.budget.cut_short(start, "the file's budget of instructions walked was spent")
            return []
        if not dec.back:
            return self._pass(dec, start, end, entry, {})[0]
        heads: dict[int, State | None] = dict.fromkeys(dec.back)  # loop head -> what its back edges bring
        first: list | None = None
        # Without a jump table a pass is one walk of the blocks, which marks where each loop head starts: the
        # next pass resumes at the first head whose state changed (the blocks before it start as they did).
        marks: dict[int, _Mark] | None = {} if dec.table == len(dec.insns) else None
        resume: _Mark | None = None
        for _ in range(MAX_PASSES):
            if marks is None:
                out, back_in, used = self._pass(dec, start, end, entry, heads)
            else:
                out, back_in, used = self._walk_blocks(dec, start, end, entry, heads, None, {}, resume, marks)[:3]
            first = out if first is None else first
            # Settled when what each loop head started from already agrees with what its back edges bring.
            settled = {p: _meet(used.get(p), back_in[p], self.object_of) if p in back_in else heads[p]
                       for p in heads}
            changed = [p for p in heads if p in back_in and not _states_equal(settled[p], used.get(p))]
            if not changed:
                return _with_first_iteration(out, first)
            if self.budget.walked >= self.budget.steps:  # the first pass's events stand, the function is cut
                self.budget.cut_short(start, "the file's budget of instructions walked was spent")
                return first
            heads = settled
            resume = marks.get(min(changed)) if marks is not None else None
            if marks:
                marks = {}
        self.unsettled.append(start)  # the analysis says it is incomplete
        out = self._pass(dec, start, end, entry, {p: State() for p in dec.back})[0]  # assume nothing at loop heads
        return _with_first_iteration(out, first or [])

    def _pass(self, dec: Decoded, start: int, end: int, entry: State,
              heads: dict[int, State | None]) -> tuple[list, dict[int, State], dict[int, State]]:
        """One walk of the blocks in reverse post-order. A loop head starts from what its forward edges agree
        on met with ``heads`` (its back edges' state from the pass before; None: not known yet). Returns the
        events and, per loop head, what its back edges brought in this pass and the state it started from.

        A block after a jump table in the code may be one of its cases; reverse post-order may put it before
        the jump (the bounds check's target, a guarded initialization GCC moved past the switch). Like a loop
        head it then starts from its edges while the jumps' state is not known, and the blocks are walked
        again, each possible case met with what the jumps agreed on, until that agrees with itself (TABLE_PASSES;
        else such a case starts from the frame alone, as it would in the first walk: sound, but a callee-saved
        register holding a registration's destructor is forgotten)."""
        preset: State | None = None
        late: dict[int, State] = {}
        for _ in range(TABLE_PASSES):
            out, back_in, used, jumps = self._walk_blocks(dec, start, end, entry, heads, preset, late)
            if jumps is None:
                return out, back_in, used
            # A case the order puts after a block it falls into (a block that is no loop head): what it brings
            # there is met in at the next walk, as a loop's back edges are.
            later = {s: st for s, st in back_in.items() if s not in dec.back}
            if preset is not None and _states_equal(jumps, preset) and later.keys() == late.keys() \
                    and all(_states_equal(later[s], late[s]) for s in later):
                return out, back_in, used
            preset, late = jumps, later
            if self.budget.walked >= self.budget.steps:
                break  # the file's walk budget is spent: once more with the frame-alone rule (sound)
        return self._walk_blocks(dec, start, end, entry, heads, _FRAME_ONLY, {})[:3]

    def _walk_blocks(self, dec: Decoded, start: int, end: int, entry: State, heads: dict[int, State | None],
                     preset: State | None, late: dict[int, State], resume: _Mark | None = None,
                     marks: dict[int, _Mark] | None = None) -> tuple[list, dict[int, State], dict[int, State],
                                                                     State | None]:
        """_pass's walk. A possible case starts from its edges met with ``preset`` (what every jump agreed on in
        the walk before); without one, from what the jumps walked so far agree on, and before any jump from its
        edges alone (None: _FRAME_ONLY, from the frame alone). Returns, besides _pass's results, what the jumps
        agreed on when a case needed it (preset given, or a case came before any jump), else None. ``late``: per
        block that is no loop head, what blocks walked after it brought it in the walk before.

        ``marks`` (a function without jump tables): filled with where the walk stood at each loop head;
        ``resume``: one such mark of the walk before, whose blocks up to it start as they did then (the heads
        before it unchanged), so the walk goes on from it, counted in the budget as walked again."""
        step, run = self.arch.step, self.arch.run
        insns, plans = dec.insns, dec.plans
        object_of = self.object_of
        # incoming: block position -> state agreed by the forward edges so far
        jumps: State | None = None  # what the table jumps walked so far agree on
        frame = State()  # the frame registers the entry block set up
        early = preset is not None  # whether what the jumps agree on is asked for
        tables = dec.table < len(insns)  # else no case starts from what the jumps agree on: not asked for
        begin, out, incoming, back_in, used, live, walked = _Mark.restart(resume)
        once = self._once.get(start)
        if once is None:
            once = self._once[start] = self.once_blocks(dec)
        region: int | None = None  # the once key the events out end in (a mark's blocks too: all start outside)
        for p, (first, last) in enumerate(dec.blocks[begin:], begin):
            if marks is not None and p in dec.back:
                region = _region(None, region, out)  # a walk resumed from the mark starts outside
                marks[p] = _Mark(p, out, incoming, back_in, used, live, walked)
            st = self._block_state(dec, p, entry, incoming, heads, used, live, marks is not None)
            if late:
                st = _with(st, late.get(p), object_of)  # what blocks walked after it bring (the walk before said)
            if p and first > dec.table:  # may be a case of a jump table: what the table jumps bring too
                early = early or jumps is None
                st = _case_state(st, p in dec.has_pred, _case_base(preset, jumps, frame), object_of)
            if st is None:
                continue  # every edge into it was decided against (dead for these arguments), or not known yet
            region = _region(once.get(p), region, out)
            st.bound()
            walked += last - first + 1
            values = st.values  # the ISA updates it in place
            run(insns, plans, first, last, values, out, start, end)
            cmp = values.get("cmp")
            step(insns[last], plans[last], values, out, start, end)
            if p == 0:
                frame = State({k: v for k, v in values.items() if isinstance(v, Ptr) and v.kind == "frame"})
            if tables and _table_jump(insns[last][2]):
                jumps = _meet(jumps, st, object_of)
            taken_known = _decided(cmp, insns[last][2]) if cmp is not None else None
            self._hand_on(dec.succs.get(p, ()), p, st, taken_known, (incoming, back_in, live))
        _region(None, region, out)
        self.budget.walked += walked
        return out, back_in, used, (jumps if early and preset is not _FRAME_ONLY and jumps is not None else None)

    def _hand_on(self, edges: list, p: int, st: State, taken_known: bool | None,
                 tables: tuple[dict[int, State], dict[int, State], set[int]]) -> None:
        """Block ``p``'s state met into its successors' along the edges a decided compare leaves open: a loop
        head's back edges into ``back_in``, the others into ``incoming`` (the last forward edge to a block with
        no state yet takes ``st`` itself: it is the block's last use, and a copy would be all the same)."""
        incoming, back_in, live = tables
        object_of = self.object_of
        for s, taken in edges:
            if taken is not None and taken_known is not None and taken != taken_known:
                continue
            if s <= p:
                back_in[s] = _meet(back_in.get(s), st, object_of)
                continue
            live.add(s)
            if s == edges[-1][0] and s not in incoming:
                st.values.pop("cmp", None)  # as _meet's fresh copy drops it
                incoming[s] = st
            else:
                incoming[s] = _meet(incoming.get(s), st, object_of)

    def _block_state(self, dec: Decoded, p: int, entry: State, incoming: dict, heads: dict, used: dict,
                     live: set, marked: bool = False) -> State | None:
        """The state block ``p`` starts from along its edges (None: dead); a loop head from its forward edges
        met with what its back edges brought (``used`` records it). ``marked``: the walk keeps marks (see
        _Mark), which hold the pending states: the block gets a copy to change."""
        if p in dec.back:  # a loop head (the entry block too, when the function starts with a loop)
            st = _head_state(entry if p == 0 else incoming.get(p), heads.get(p), self.object_of)
            used[p] = st.copy()
            return st
        if p == 0:
            return entry.copy()
        if p not in live and p in dec.has_pred:
            return None
        # Popped: a state is held only until its block is walked, and each is a fresh dict (_meet's) the block
        # may change in place.
        st = incoming.pop(p, None)
        if st is not None and marked:
            st = st.copy()
        return st if st is not None and st.values else State()

    def stub_slot(self, start: int, end: int) -> int | None:
        """The GOT slot a PLT stub jumps through (``jmp *slot`` / ``adrp; ldr x17; br x17``)."""
        if self.machine == EM_X86_64:  # .plt / .plt.sec / .plt.got: [endbr64] [bnd] jmp [rip + disp32] first
            head = self.read_code(start, min(end - start, 16))
            for skip in (0, 1, 4, 5):
                if head[skip: skip + 2] == b"\xff\x25" and head[:skip] in (b"", b"\xf2", b"\xf3\x0f\x1e\xfa",
                                                                        b"\xf3\x0f\x1e\xfa\xf2"):
                    return start + skip + 6 + int.from_bytes(head[skip + 2: skip + 6], "little", signed=True)
        if self._in_stub:  # a stub's sweep asks what a call in it returns, which asks for another stub: no chain
            return None
        # Not what the jump's target returns: a slot bound to this file's own function (an exported name's
        # JUMP_SLOT) would be walked inside the stub's sweep, and every stub its decoding asks about would
        # meet the guard above and be taken for a function of its own.
        self._in_stub, result, self.arch.result = True, self.arch.result, no_result
        try:
            for ev in self.sweep(start, min(end, start + 32), {}):
                if isinstance(ev, Call):
                    return ev.slot
            return None
        finally:
            self._in_stub, self.arch.result = False, result
