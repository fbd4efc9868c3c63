"""A prefilter for x86-64 code the analysis only needs to skim: the call sites and the RIP-relative data
references of a function, found by regular expressions over its bytes (at C speed) instead of decoding
every instruction.

Decoding each instruction of a 400 MB library's call trees with capstone costs minutes; most of those
functions register nothing and read nothing another initializer constructs. A match here is only a
candidate (the bytes may sit inside another instruction): a call counts only when its target is a known
function start or PLT stub, and the walker decodes a function with capstone before it reports a registration
or a read found in it. What this can miss: data references in encodings not listed below (VEX/EVEX-encoded
loads, which compilers use for vector copies), so a read found only that way is not seen.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

# call rel32 / jmp rel32, and call/jmp through a RIP-relative slot (-fno-plt, or PLT-less GOT calls).
_CALL = re.compile(rb"\xe8(.{4})", re.DOTALL)
_JMP = re.compile(rb"\xe9(.{4})", re.DOTALL)
_SLOT_CALL = re.compile(rb"\xff([\x15\x25])(.{4})", re.DOTALL)
# call through a register or memory not RIP-relative: an indirect call (counted, not followed).
_INDIRECT = re.compile(rb"\xff[\xd0-\xd7\x10-\x14\x16\x17\x50-\x57\x90-\x97]")
# An opcode byte followed by a ModRM with mod=00, rm=101: [rip + disp32]. One character class for the opcode
# (a leading optional prefix or an alternation makes the regex engine several times slower): one-byte opcodes,
# and the second byte of 0x0f-escaped ones, which count only after a 0x0f. Prefixes (REX, 0x66, 0xf2, 0xf3)
# do not move the displacement.
_ONE_BYTE = (b"\x8b\x89\x8d\x88\x8a\x3b\x39\x03\x01\x2b\x29\x85\x84\x83\x80\x81\xc7\xc6\xf7\x0b\x09\x23\x21\x33"
             b"\x31\x38\x3a")
_ESCAPED = b"\xb6\xb7\xbe\xbf\x10\x11\x28\x29\x6f\x7f\x7e\xd6"
_RIP = re.compile(b"([" + re.escape(_ONE_BYTE + _ESCAPED) + b"])([\x05\x0d\x15\x1d\x25\x2d\x35\x3d])(.{4})",
                  re.DOTALL)
_ESCAPED_ONLY = frozenset(_ESCAPED) - frozenset(_ONE_BYTE)
_IMM = {0x80: 1, 0x83: 1, 0xC6: 1, 0x81: 4, 0xC7: 4}
_WRITES = frozenset({0x89, 0x88, 0xC6, 0xC7, 0x01, 0x09, 0x21, 0x29, 0x31})
_ESCAPED_WRITES = frozenset({0x11, 0x29, 0x7F, 0xD6})


class Skim(NamedTuple):
    calls: list  # (site address, target address, tail) in address order
    slots: list  # (site address, GOT slot address, tail)
    refs: list  # (site address, data address, write, is_lea)
    indirect: int


def call_pattern(span: int) -> re.Pattern:
    """``call rel32`` whose displacement reaches at most ``span`` bytes either way: the top byte of a
    displacement within a library's code is near 0x00 or 0xff, which drops most bytes that only look like a
    call before any Python runs."""
    top = min(span >> 24, 0x7F)
    return re.compile(b"\xe8(...[" + re.escape(bytes(range(0, top + 1)) + bytes(range(0xFF - top, 0x100)))
                      + b"])", re.DOTALL)


def skim(code: bytes, start: int, is_target: Callable[[int], bool], data_lo: int, data_hi: int,
         calls_rx: re.Pattern = _CALL) -> Skim:
    """The candidates in ``code`` (at link-time address ``start``): calls whose target passes ``is_target``,
    and data references into [data_lo, data_hi) (the writable sections and the GOT)."""
    end = start + len(code)
    calls = []
    for m in calls_rx.finditer(code):
        target = start + m.end() + int.from_bytes(m.group(1), "little", signed=True)
        if is_target(target):
            calls.append((start + m.start(), target, False))
    for m in _JMP.finditer(code):
        target = start + m.end() + int.from_bytes(m.group(1), "little", signed=True)
        if not start <= target < end and is_target(target):
            calls.append((start + m.start(), target, True))
    calls.sort()
    slots = [(start + m.start(), start + m.end() + int.from_bytes(m.group(2), "little", signed=True),
              m.group(1) == b"\x25") for m in _SLOT_CALL.finditer(code)]
    refs = []
    for m in _RIP.finditer(code):
        op = m.group(1)[0]
        at = m.start()
        escaped = at > 0 and code[at - 1] == 0x0F
        if op in _ESCAPED_ONLY and not escaped:
            continue
        imm = 0 if escaped else _IMM.get(op, 0)
        if op == 0xF7 and not escaped:
            imm = 4 if (m.group(2)[0] >> 3) & 7 == 0 else 0
        elif imm == 4 and at > 0 and code[at - 1] == 0x66:
            imm = 2
        target = start + m.end() + imm + int.from_bytes(m.group(3), "little", signed=True)
        if data_lo <= target < data_hi:
            write = op in (_ESCAPED_WRITES if escaped else _WRITES)
            refs.append((start + at, target, write, op == 0x8D and not escaped))
    return Skim(calls, slots, refs, len(_INDIRECT.findall(code)))
