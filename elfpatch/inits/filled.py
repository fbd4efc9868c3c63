"""An object an initializer loads and then fills whole: its inlined constructor run after the read.

At -O1 and above a constructor is inlined into its unit's initializer as plain stores, so a reader defined
before its object in one unit (or an object read by its own initializer, ``Obj g(f())`` with ``f`` reading
``g``) shows as a load of the object followed by stores into it. A flag checked before a build
(``if (!ready) ready = 1;``) and a read-modify-write (``count++``) have that shape too, and those read an object
that is zero-initialized by design. What tells them apart here, every condition required:

- the object lies in zero-initialized memory (``.bss``: a constant-initialized object's value is no "before");
- the initializer's own code stores into every byte of it (its symbol's size, at most MAX_SIZE) on every path
  from its entry to each of its ways out, by plain stores (no read-modify-write instruction) of two
  registers at least (a scalar counter's ``mov eax, [c]; add eax, 1; mov [c], eax`` stores one; AArch64's
  ``stp`` two);
- it loaded the object before it stored into it (the walk's run order: ``Summary.touched``);
- and no other initializer stores into it, builds it or hands it on (then the fill is a reset of what that one
  built, or precedes the real constructor).

A flag checked before a build stores on one way only; a counter is one store. What is left with that shape --
a zero-initialized aggregate of several members all of which the initializer overwrites unconditionally after
reading one -- is reported as read before construction too (a false finding, never a false clean: the read is
reported). Stripped files' objects without a symbol have no size: they stay unproven (analysis's note).
"""
from __future__ import annotations

import re

from elfpatch.elf.const import EM_X86_64, SHT_NOBITS
from elfpatch.errors import ElfPatchError
from elfpatch.inits.disasm import Decoded
from elfpatch.inits.events import Access
from elfpatch.inits.image import Image
from elfpatch.inits.isa import X86_WIDTH
from elfpatch.inits.walk import Summary, Walker

MAX_SIZE = 1024  # bytes: a larger object is filled by loops or memset, which no block-wise proof follows
MAX_PASSES = 64  # of the must-store data flow over a function's blocks (loops nest far less deep)

_X86_PTR = re.compile(r"\b(byte|word|dword|qword|xmmword|ymmword|zmmword) ptr\b")
_A64_REG_WIDTH = {"w": 4, "x": 8, "q": 16, "d": 8, "s": 4, "h": 2, "b": 1}
_A64_STORES = {"str": 0, "stur": 0, "stp": 0, "stnp": 0, "strb": 1, "sturb": 1, "strh": 2, "sturh": 2}


def stored_pieces(machine: int, insn: tuple) -> list[tuple[int, int]]:
    """The (offset from the address, width) of each register a plain store instruction writes to memory
    (AArch64's ``stp`` two); empty for one whose width the text does not say (a ``rep stos``, a scatter)."""
    _addr, _size, mnem, op = insn
    if machine == EM_X86_64:
        if " " in mnem or not mnem.startswith(("mov", "vmov")):  # prefixed (rep), or not a plain move
            return []
        m = _X86_PTR.search(op)
        return [(0, X86_WIDTH[m.group(1)])] if m else []
    fixed = _A64_STORES.get(mnem)
    if fixed is None:
        return []
    if fixed:
        return [(0, fixed)]
    reg = op.split(",", 1)[0].strip()
    width = _A64_REG_WIDTH.get(reg[:1]) if reg not in ("wzr", "xzr") else (4 if reg == "wzr" else 8)
    if width is None:
        return []
    return [(0, width), (width, width)] if mnem in ("stp", "stnp") else [(0, width)]


def zero_initialized(image: Image, start: int, size: int) -> bool:
    """Whether [start, start + size) is zero when the file is loaded: a NOBITS section (``.bss``), or zero bytes
    in the file (an address the file's bytes do not hold is not known to be zero)."""
    for s in image.elf.sections:
        if s.sh_addr <= start and start + size <= s.sh_addr + s.sh_size and s.sh_addr:
            if s.sh_type == SHT_NOBITS:
                return True
            break
    try:
        return not any(image.read_code(start, size))
    except ElfPatchError:  # past the segment's file bytes (or not mapped): not known to be zero
        return False


def filled_on_every_path(dec: Decoded, stored: dict[int, list[tuple[int, int]]], size: int,
                         start: int, end: int) -> bool:
    """Whether on every path from the function's entry to each of its ways out the instructions in
    ``stored`` (index -> [(offset, width)]) have stored every byte of [0, size): a must-store data flow over
    the blocks, the bytes as bits."""
    full = (1 << size) - 1
    if not dec.blocks:
        return False
    gen = [0] * len(dec.blocks)
    for p, (first, last) in enumerate(dec.blocks):
        for i in range(first, last + 1):
            for offset, width in stored.get(i, ()):
                gen[p] |= (((1 << width) - 1) << offset) & full
    preds = _predecessors(dec)
    out = _must_store(dec, preds, gen, full)
    if out is None:
        return False
    exits = [p for p in preds if _way_out(dec, p, start, end)]
    return bool(exits) and all(out[p] == full for p in exits)


def _predecessors(dec: Decoded) -> dict[int, list[int]]:
    """The blocks reachable from the entry, each with its predecessors."""
    preds: dict[int, list[int]] = {0: []}
    todo = [0]
    while todo:
        p = todo.pop()
        for s, _taken in dec.succs.get(p, ()):
            if s not in preds:
                preds[s] = []
                todo.append(s)
            preds[s].append(p)
    return preds


def _must_store(dec: Decoded, preds: dict[int, list[int]], gen: list[int], full: int) -> list[int] | None:
    """Per block, the bytes stored on every path from the entry to its end: the greatest fixpoint (a loop's
    back edge assumes every byte until shown otherwise); None when it does not settle in MAX_PASSES."""
    out = [full] * len(dec.blocks)
    for _ in range(MAX_PASSES):
        changed = False
        for p in sorted(preds):  # reverse post-order: the blocks are laid out in it
            into = 0 if p == 0 else full
            for q in preds[p]:
                into &= out[q]
            if into | gen[p] != out[p]:
                out[p], changed = into | gen[p], True
        if not changed:
            return out
    return None


def _way_out(dec: Decoded, p: int, start: int, end: int) -> bool:
    """Whether the block leaves the function on some way: no successor (a return, a tail call, a jump the
    blocks have no edge for; not a call that never returns, such as a throw), or a conditional jump out of it
    (a conditional tail call)."""
    if not dec.succs.get(p):
        return dec.insns[dec.blocks[p][1]][2] not in ("call", "bl")
    kind, target = dec.plans[dec.blocks[p][1]][0]
    return kind == "cond" and not (isinstance(target, int) and start <= target < end)


def inlined_builds(image: Image | None, walker: Walker | None, entries: list[dict],
                   summaries: list[Summary | None]) -> list[Summary | None]:
    """The summaries with each object their initializer loads and then fills whole (see the module's text)
    counted as built for sure there, and read before that build (``early``)."""
    if image is None or walker is None:
        return summaries
    builders: dict[int, set[int]] = {}  # object -> the initializers (by address) that may build it
    for e, s in zip(entries, summaries):
        for o in (*s.constructs, *s.call_stores, *s.this_builds, *s.escaped) if s is not None else ():
            builders.setdefault(o, set()).add(e["address"])
    out = list(summaries)
    for pos, (e, s) in enumerate(zip(entries, summaries)):
        if s is None or e["address"] is None:
            continue
        # only the object's one builder: another initializer's stores (an inlined constructor that ran before,
        # or a constructor call after) make this one's fill a reset, not the build
        loaded = [o for o, (load, _via) in s.touched.items() if load and s.constructs.get(o) is False
                  and builders.get(o) == {e["address"]}]
        if not loaded:
            continue
        filled = _filled(image, walker, e["address"], loaded)
        if filled:
            out[pos] = s._replace(constructs={**s.constructs, **dict.fromkeys(filled, True)},
                                  early={**s.early, **{o: s.touched[o][1] for o in filled if o not in s.early}})
    return out


def _filled(image: Image, walker: Walker, fn: int, objects: list[int]) -> list[int]:
    """Those of ``objects`` the function at ``fn`` fills whole on every path by its own plain stores."""
    sized = {}
    for o in objects:
        size = image.object_size(o)
        if size and size <= MAX_SIZE and zero_initialized(image, o, size):
            sized[o] = size
    events = walker.own_events(fn) if sized else None
    if events is None:
        return []
    end = image.function_end(fn)
    return filled_objects(image.elf.e_machine, walker.dis.decode(fn, end), events, sized, fn, end)


def filled_objects(machine: int, dec: Decoded, events: list, sized: dict[int, int], start: int,
                   end: int) -> list[int]:
    """Those of the objects in ``sized`` (start -> size) that the function [start, end), decoded as ``dec``
    and swept as ``events``, fills whole on every path: by plain stores of two registers at least, made by
    instructions that do not also load (a read-modify-write)."""
    index = {insn[0]: i for i, insn in enumerate(dec.insns)}
    loads = {ev.insn for ev in events if isinstance(ev, Access) and not ev.write}
    found = []
    for o, size in sized.items():
        stored: dict[int, list[tuple[int, int]]] = {}
        for ev in events:
            if not (isinstance(ev, Access) and ev.write and isinstance(ev.address, int)
                    and o <= ev.address < o + size and ev.insn not in loads and ev.insn in index):
                continue
            pieces = stored_pieces(machine, dec.insns[index[ev.insn]])
            stored.setdefault(index[ev.insn], []).extend((ev.address - o + d, w) for d, w in pieces)
        if sum(map(len, stored.values())) >= 2 and filled_on_every_path(dec, stored, size, start, end):
            found.append(o)
    return found
