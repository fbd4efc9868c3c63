"""The cases of an x86-64 jump table, read from the table itself when the code is the compilers' position-
independent switch (GCC and clang, -O1 and up; `notrack` under -fcf-protection):

    cmp   eI, N            ; the bound: the index is at most N (ja) or below N (jae), unsigned
    ja    default
    lea   rB, [rip + T]    ; the table: int32 offsets from T   (lea and a zero-extending mov eI, eI:
    mov   eI, eI           ;                                     either order, the mov optional)
    movsxd rY, dword ptr [rB + rI*4]
    add   rY, rB
    notrack jmp rY             ; a plain `jmp rY` without -fcf-protection (marked_tables: made `notrack`)

Only this exact shape is taken, with every case inside the function and at an instruction start: the decoder
then gives the jump an edge to each case and nothing else needs to guess. Anything else is None, and the
decoder keeps its sound fallback (every block after the table may be a case).
"""
from __future__ import annotations

import re
from typing import Callable

from elfpatch.errors import ElfPatchError

MAX_CASES = 4096
_REG32 = {f"e{r}": f"r{r}" for r in ("ax", "bx", "cx", "dx", "si", "di", "bp")}
_REG32.update({f"r{n}d": f"r{n}" for n in range(8, 16)})
_LEA = re.compile(r"^(r\w+), \[rip ([+-]) (0x[0-9a-f]+|\d+)\]$")
_LOAD = re.compile(r"^(r\w+), dword ptr \[(r\w+) \+ (r\w+)\*4\]$")


def _wide(reg: str) -> str:
    return _REG32.get(reg, reg)


def _bound(insns: list, k: int, index: str) -> int | None:
    """How many entries the bounds check before instruction ``k`` allows (None: not the shape)."""
    if k < 2 or insns[k - 1][2] not in ("ja", "jae"):
        return None
    mnem, op = insns[k - 2][2], insns[k - 2][3]
    reg, _, imm = op.partition(", ")
    if mnem != "cmp" or _wide(reg) != index or not re.fullmatch(r"0x[0-9a-f]+|\d+", imm):
        return None
    n = int(imm, 0)
    return n + 1 if insns[k - 1][2] == "ja" else n


def x86_case_targets(insns: list, n: int, read: Callable[[int, int], bytes]) -> list[int] | None:
    """The case addresses of the table jump ``insns[n]`` ((address, size, mnemonic, op_str) tuples), or None
    when the code around it is not the shape above."""
    if n < 4 or insns[n][2] not in ("notrack jmp", "jmp") or insns[n - 1][2] != "add" or insns[n - 2][2] != "movsxd":
        return None
    load = _LOAD.match(insns[n - 2][3])
    if load is None or insns[n][3] != load.group(1) or insns[n - 1][3] != f"{load.group(1)}, {load.group(2)}":
        return None
    base, index = load.group(2), load.group(3)
    if base == index:
        return None
    k, table = n - 3, None
    for _ in range(2):  # lea rB, [rip + T] and an optional mov eI, eI, in either order
        mnem, op = insns[k][2], insns[k][3]
        lea = _LEA.match(op) if mnem == "lea" else None
        if lea is not None and lea.group(1) == base and table is None:
            delta = int(lea.group(3), 0)
            table = insns[k][0] + insns[k][1] + (delta if lea.group(2) == "+" else -delta)
        elif not (mnem == "mov" and op.partition(", ")[0] == op.partition(", ")[2]
                  and _wide(op.partition(", ")[0]) == index):
            break
        k -= 1
    count = _bound(insns, k + 1, index) if table is not None else None
    if table is None or count is None or not 0 < count <= MAX_CASES:
        return None
    try:
        raw = read(table, 4 * count)
    except ElfPatchError:
        return None
    if len(raw) != 4 * count:
        return None
    return sorted({table + int.from_bytes(raw[i:i + 4], "little", signed=True) for i in range(0, len(raw), 4)})


def marked_tables(insns: list, read: Callable[[int, int], bytes]) -> list:
    """``insns`` with each plain ``jmp rY`` that is the switch above (built without -fcf-protection) spelled
    ``notrack jmp``, as -fcf-protection spells it: the decoder then takes it for the table jump it is (edges to
    its cases) rather than an indirect tail call. Any other jump through a register is left as it is."""
    out = insns
    for n, i in enumerate(insns):
        if i[2] == "jmp" and not i[3].startswith(("0x", "qword")) and x86_case_targets(insns, n, read) is not None:
            if out is insns:
                out = list(insns)
            out[n] = (i[0], i[1], "notrack jmp", i[3])
    return out
