"""A prefilter for x86-64 code the analysis only needs to skim: the call sites and the RIP-relative data
references of a function, found by regular expressions over its bytes (at C speed) instead of decoding
every instruction.

Decoding each instruction of a 400 MB library's call trees with capstone costs minutes; most of those
functions register nothing and read nothing another initializer constructs. A match here is only a
candidate (the bytes may sit inside another instruction): a call counts only when its target is a known
function start or PLT stub, and the walker decodes a function with capstone before it reports a registration
or a read found in it. So the filters err towards candidates, never away from a real instruction:

- every RIP-relative operand, whatever the encoding (legacy, 0x0f/0x0f38/0x0f3a maps, VEX, EVEX, x87), is a
  ModRM byte with mod=00 rm=101 followed by its disp32 and then 0, 1, 2 or 4 bytes of immediate: each such byte
  is a data-reference candidate at each of those four ends;
- matches overlap (a look-alike inside one instruction must not swallow the real one that starts in its
  displacement);
- a call's rel32 reaches at most the code's own span (the PLT is code too), which ``call_pattern`` keeps;
- a jump out of the function (``jmp``/``jcc``, rel32 or rel8) to a function start is a tail call, as the
  decoder takes it;
- a ``jmp`` through a register or memory other than a notrack jump table is an indirect (tail) call, counted
  as the decoder counts it.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

# call rel32 / jmp rel32, and call/jmp through a RIP-relative slot (-fno-plt, or PLT-less GOT calls).
_CALL = re.compile(rb"\xe8(.{4})", re.DOTALL)
_JMP = re.compile(rb"\xe9(.{4})", re.DOTALL)
# Jumps that can leave the function as tail calls too: jcc rel32, and jmp/jcc rel8 (only near either end).
_JCC = re.compile(rb"\x0f[\x80-\x8f](.{4})", re.DOTALL)
_JMP8 = re.compile(rb"[\xeb\x70-\x7f](.)", re.DOTALL)
_REL8_REACH = 130
_SLOT_CALL = re.compile(rb"\xff([\x15\x25])(.{4})", re.DOTALL)
# call through a register or memory not RIP-relative: an indirect call (counted, not followed). jmp the same
# way (ff /4): an indirect tail call, unless a notrack prefix (0x3e) marks it a jump table.
_INDIRECT = re.compile(rb"\xff[\xd0-\xd7\x10-\x14\x16\x17\x50-\x57\x90-\x97]")
_INDIRECT_JMP = re.compile(rb"\xff[\xe0-\xe7\x20-\x24\x26\x27\x60-\x67\xa0-\xa7]")
_NOTRACK = 0x3E
# Any ModRM byte with mod=00 rm=101 (RIP-relative in 64-bit mode), with the disp32 that follows it.
_MODRM_RIP = re.compile(rb"[\x05\x0d\x15\x1d\x25\x2d\x35\x3d](.{4})", re.DOTALL)
_IMM_SIZES = (0, 1, 2, 4)
_MOV_LOAD = 0x8B

class Skim(NamedTuple):
    calls: list  # (site address, target address, tail) in address order
    slots: list  # (site address, GOT slot address, tail)
    data: list  # (ModRM address, data address, immediate size assumed): every RIP-relative candidate
    loads: list  # (ModRM address, data address) of those after a ``mov r, [rip + disp32]`` opcode (0x8b)
    indirect: int


def _top_bytes(lo: int, hi: int) -> bytes:
    """The possible top bytes of an int32 in [lo, hi] (little-endian: its fourth byte)."""
    lo, hi = max(lo, -(1 << 31)), min(hi, (1 << 31) - 1)
    return bytes(sorted({d & 0xFF for d in range(lo >> 24, (hi >> 24) + 1)}))


def rel32_pattern(head: bytes, lo: int, hi: int) -> re.Pattern:
    """``head`` then a disp32 in [lo, hi]: the disp32's top byte is tested in the regex, which drops most bytes
    that only look like the instruction before any Python runs."""
    return re.compile(re.escape(head) + b"(...[" + re.escape(_top_bytes(lo, hi)) + b"])", re.DOTALL)


def call_pattern(span: int) -> re.Pattern:
    """``call rel32`` whose displacement reaches at most ``span`` bytes either way (the code's own span)."""
    return rel32_pattern(b"\xe8", -span, span)


class Patterns(NamedTuple):
    """The displacement-filtered patterns for one file: calls and jumps within its code, RIP-relative operands
    into its data (candidates outside those spans could not pass the range tests anyway)."""
    call: re.Pattern
    jmp: re.Pattern
    jcc: re.Pattern
    modrm: re.Pattern


def patterns(code_lo: int, code_hi: int, data_lo: int, data_hi: int) -> Patterns:
    span = code_hi - code_lo
    tops = _top_bytes(data_lo - code_hi - 8, data_hi - code_lo)
    modrm = re.compile(b"[\x05\x0d\x15\x1d\x25\x2d\x35\x3d](...[" + re.escape(tops) + b"])", re.DOTALL)
    return Patterns(call_pattern(span), rel32_pattern(b"\xe9", -span, span),
                    re.compile(b"\x0f[\x80-\x8f](...[" + re.escape(_top_bytes(-span, span)) + b"])", re.DOTALL),
                    modrm)


ANY = Patterns(_CALL, _JMP, _JCC, _MODRM_RIP)  # no span known: every displacement


def _each(rx: re.Pattern, code: bytes):
    """Every match of ``rx`` in ``code``, overlapping ones too (finditer would resume after a match's end)."""
    m = rx.search(code)
    while m is not None:
        yield m
        m = rx.search(code, m.start() + 1)


def _rel32(m: re.Match, start: int, group: int = 1) -> int:
    """The target of a rel32 branch or RIP-relative disp32 match: relative to the end of the match."""
    return start + m.end() + int.from_bytes(m.group(group), "little", signed=True)


def _calls(code: bytes, start: int, is_target: Callable[[int], bool], rx: Patterns) -> list:
    """(site, target, tail) of calls, and of jumps that leave the function (tail calls), in address order."""
    end = start + len(code)
    calls = [(start + m.start(), t, False) for m in _each(rx.call, code) if is_target(t := _rel32(m, start))]
    for jumps in (rx.jmp, rx.jcc):
        calls += [(start + m.start(), t, True) for m in _each(jumps, code)
                  if not start <= (t := _rel32(m, start)) < end and is_target(t)]
    n = len(code)
    for lo, hi in ((0, min(n, _REL8_REACH)), (max(_REL8_REACH, n - _REL8_REACH), n)):  # rel8 reaches so far
        calls += [(start + lo + m.start(), t, True) for m in _each(_JMP8, code[lo:hi])
                  if not start <= (t := _rel32(m, start + lo)) < end and is_target(t)]
    calls.sort()
    return calls


def _data_refs(code: bytes, start: int, data_lo: int, data_hi: int, rx: Patterns) -> tuple[list, list]:
    """RIP-relative candidates into [data_lo, data_hi), one per possible immediate size, and the ``mov`` loads
    among them (GOT loads of function pointers)."""
    data, loads = [], []
    lo, hi = data_lo - 4, data_hi  # disp32 + its end in [lo, hi) for some immediate size
    for m in _each(rx.modrm, code):
        base = _rel32(m, start)
        if not lo <= base < hi:
            continue
        data += [(start + m.start(), base + imm, imm) for imm in _IMM_SIZES if data_lo <= base + imm < data_hi]
        at = m.start()
        if at and code[at - 1] == _MOV_LOAD and data_lo <= base < data_hi:
            loads.append((start + at, base))
    return data, loads


def skim(code: bytes, start: int, is_target: Callable[[int], bool], data_lo: int, data_hi: int,
         rx: Patterns = ANY) -> Skim:
    """The candidates in ``code`` (at link-time address ``start``): calls whose target passes ``is_target``,
    and data references into [data_lo, data_hi) (the writable sections and the GOT)."""
    calls = _calls(code, start, is_target, rx)
    slots = [(start + m.start(), _rel32(m, start, 2), m.group(1) == b"\x25") for m in _each(_SLOT_CALL, code)]
    data, loads = _data_refs(code, start, data_lo, data_hi, rx)
    indirect = len(_INDIRECT.findall(code)) + sum(
        1 for m in _each(_INDIRECT_JMP, code) if not (m.start() and code[m.start() - 1] == _NOTRACK))
    return Skim(calls, slots, data, loads, indirect)
