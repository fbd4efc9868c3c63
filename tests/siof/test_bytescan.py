"""The x86-64 prefilter (elfpatch/initscan/bytescan.py) against single instructions: every encoding that can
carry a RIP-relative operand yields a data-reference candidate, and no look-alike bytes hide a real call.
Each instruction's bytes are checked with capstone first, so the test says what it feeds the filter."""
from __future__ import annotations

import pytest

from elfpatch.initscan.bytescan import ANY, call_pattern, patterns, skim

capstone = pytest.importorskip("capstone")

START, TARGET = 0x1000, 0x5008
DATA = (0x4000, 0x6000)  # the writable sections and the GOT

# (what capstone must decode, bytes before the disp32, bytes after it)
RIP_OPERANDS = [
    ("vmovdqu xmm0, xmmword ptr [rip", "c5fa6f05", ""),  # VEX, 2-byte prefix
    ("vpbroadcastd xmm0, dword ptr [rip", "c4e27958 05", ""),  # VEX, 3-byte prefix, 0f38 map
    ("vmovdqu32 zmm16, zmmword ptr [rip", "62e17e486f05", ""),  # EVEX
    ("vpshufd xmm0, xmmword ptr [rip", "c5f97005", "1b"),  # VEX with an immediate after the displacement
    ("movsxd rax, dword ptr [rip", "486305", ""),
    ("lock xadd dword ptr [rip", "f00fc105", ""),  # an atomic counter
    ("xchg dword ptr [rip", "8705", ""),  # a seq_cst atomic store
    ("test byte ptr [rip", "f605", "01"),
    ("cmp word ptr [rip", "66813d", "3412"),
    ("addsd xmm0, qword ptr [rip", "f20f5805", ""),
    ("fld qword ptr [rip", "dd05", ""),
]


def _insn(head: str, tail: str, at: int = START) -> bytes:
    head_b, tail_b = bytes.fromhex(head.replace(" ", "")), bytes.fromhex(tail)
    disp = TARGET - (at + len(head_b) + 4 + len(tail_b))
    return head_b + disp.to_bytes(4, "little", signed=True) + tail_b


def _decoded(code: bytes) -> list[str]:
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    return [f"{m} {op}" for _a, _s, m, op in md.disasm_lite(code, START)]


@pytest.mark.parametrize("text,head,tail", RIP_OPERANDS, ids=[t.split(" ")[0] + "-" + h[:2]
                                                             for t, h, _ in RIP_OPERANDS])
def test_every_rip_relative_encoding_is_a_candidate(text: str, head: str, tail: str) -> None:
    code = _insn(head, tail) + b"\xc3"
    (insn, ret) = _decoded(code)
    assert insn.startswith(text) and ret.startswith("ret")
    for rx in (ANY, patterns(START, START + 0x100, *DATA)):  # any displacement; this file's spans
        sk = skim(code, START, lambda _t: False, *DATA, rx)
        assert [t for s, t, _imm in sk.data if START <= s < START + len(code) - 1].count(TARGET) == 1


def test_a_look_alike_call_does_not_hide_the_real_one() -> None:
    """``mov esi, 0xe8`` ends in bytes that look like a call whose displacement swallows the real call's
    opcode: matches must overlap."""
    callee = 0x2000
    code = bytes.fromhex("bee8000000") + b"\xe8" + (callee - (START + 10)).to_bytes(4, "little", signed=True)
    assert _decoded(code) == ["mov esi, 0xe8", f"call {callee:#x}"]
    for rx in (None, call_pattern(0x7FFFFFFF)):
        sk = skim(code, START, lambda t: t == callee, *DATA, **({"rx": ANY._replace(call=rx)} if rx else {}))
        assert (START + 5, callee, False) in sk.calls


def test_file_patterns_keep_far_data() -> None:
    """Data 300 MB past the code (as in a large library): the displacement filter keeps its references."""
    code_lo, code_hi, data = 0x1000, 0x12000000, (0x13000000, 0x13800000)
    for at in (code_lo, code_hi - 16):
        for target in (data[0], data[1] - 1):
            head = bytes.fromhex("488b05")
            disp = target - (at + 7)
            code = head + disp.to_bytes(4, "little", signed=True)
            sk = skim(code, at, lambda _t: False, *data, patterns(code_lo, code_hi, *data))
            assert target in [t for _s, t, _imm in sk.data]


def test_call_pattern_reaches_the_whole_span() -> None:
    """A call from one end of the code to the other (the PLT is code) passes the displacement filter."""
    for span in (0x1000, 0x00FFFFFF, 0x01000000, 0x1A000000):
        rx = call_pattern(span)
        for disp in (span - 6, -(span - 6), 0, -1):
            code = b"\xe8" + disp.to_bytes(4, "little", signed=True)
            assert rx.fullmatch(code), (hex(span), disp)


@pytest.mark.parametrize("code,indirect", [("ffe0", 1), ("41ffe3", 1), ("ff6010", 1), ("3effe0", 0),
                                           ("ffd0", 1), ("ff2500000000", 0)])
def test_indirect_jumps_are_counted_as_the_decoder_counts_them(code: str, indirect: int) -> None:
    """``jmp rax`` / ``jmp [rax+16]``: an indirect tail call; ``notrack jmp rax``: a jump table; ``jmp [rip+X]``:
    a GOT slot, followed."""
    assert skim(bytes.fromhex(code), START, lambda _t: False, *DATA).indirect == indirect


@pytest.mark.parametrize("head,size", [("eb", 1), ("74", 1), ("0f84", 4), ("e9", 4)])
def test_jumps_out_of_the_function_are_tail_calls(head: str, size: int) -> None:
    """``jmp``/``je`` to another function's start, short or near: what clang's conditional tail calls and GCC's
    jumps into a ``.cold`` part look like; the skim and the decoder both take them as tail calls."""
    from elfpatch.initscan.disasm import EM_X86_64, Call, Disassembler

    code = bytes.fromhex("31c0" + head) + bytes(size) + b"\xc3"
    callee = START + len(code) + 0x10  # past the function's end, within rel8 reach
    disp = callee - (START + 2 + len(bytes.fromhex(head)) + size)
    code = bytes.fromhex("31c0" + head) + disp.to_bytes(size, "little", signed=True) + b"\xc3"
    assert _decoded(code)[1].split(" ")[1] == hex(callee)
    for rx in (ANY, patterns(START, callee + 1, *DATA)):
        sk = skim(code, START, lambda t: t == callee, *DATA, rx)
        assert [(t, tail) for _s, t, tail in sk.calls] == [(callee, True)]
    dis = Disassembler(EM_X86_64, lambda a, n: code[a - START: a - START + n], lambda _a: None)
    assert [ev.target for ev in dis.sweep(START, START + len(code), {}) if isinstance(ev, Call)] == [callee]
