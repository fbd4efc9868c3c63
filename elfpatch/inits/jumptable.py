"""The cases of an x86-64 jump table, read from the table itself when the code is the compilers' position-
independent switch (GCC and clang, -O1 and up; `notrack` under -fcf-protection):

    cmp   eI, N            ; the bound: the index is at most N (ja) or below N (jae), unsigned
    ja    default
    lea   rB, [rip + T]    ; the table: int32 offsets from T   (lea and a zero-extending mov eI, eI:
    mov   eI, eI           ;                                     either order, the mov optional)
    movsxd rY, dword ptr [rB + rI*4]
    add   rY, rB
    notrack jmp rY             ; a plain `jmp rY` without -fcf-protection (marked_tables: made `notrack`)

A program linked at a fixed address (not PIE) jumps through a table of absolute addresses instead:

    cmp   eI, N
    ja    default
    mov   eI, eI                        ; optional
    notrack jmp qword ptr [rI*8 + T]    ; (a plain `jmp` without -fcf-protection)

Only these exact shapes are taken, with every case inside the function and at an instruction start: the decoder
then gives the jump an edge to each case and nothing else needs to guess. Anything else is None, and the
decoder keeps its sound fallback (every block after the table may be a case).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable

from elfpatch.errors import ElfPatchError

MAX_CASES = 4096
_REG32 = {f"e{r}": f"r{r}" for r in ("ax", "bx", "cx", "dx", "si", "di", "bp")}
_REG32.update({f"r{n}d": f"r{n}" for n in range(8, 16)})
_LEA = re.compile(r"^(r\w+), \[rip ([+-]) (0x[0-9a-f]+|\d+)\]$")
_LOAD = re.compile(r"^(r\w+), dword ptr \[(r\w+) \+ (r\w+)\*4\]$")
_BETWEEN = frozenset({"mov", "sub", "add", "push", "lea"})  # instructions that may sit between bound and jump
_ABSOLUTE = re.compile(r"^qword ptr (?:ds:)?\[(r\w+)\*8 \+ (0x[0-9a-f]+|\d+)\]$")


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
    when the code around it is not one of the shapes above."""
    if insns[n][2] not in ("notrack jmp", "jmp"):
        return None
    absolute = _ABSOLUTE.match(insns[n][3]) if n >= 2 else None
    if absolute is not None:
        return _absolute_targets(insns, n, absolute.group(1), int(absolute.group(2), 0), read)
    return _relative_targets(insns, n, read)


def _relative_targets(insns: list, n: int, read: Callable[[int, int], bytes]) -> list[int] | None:
    """The cases of the position-independent switch: int32 offsets from the table."""
    if n < 4 or insns[n - 1][2] != "add" or insns[n - 2][2] != "movsxd":
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
    if table is None:
        return None
    entries = _entries(read, table, 4, _bound(insns, k + 1, index))
    return None if entries is None else sorted({table + e for e in entries})


def _absolute_targets(insns: list, n: int, index: str, table: int,
                      read: Callable[[int, int], bytes]) -> list[int] | None:
    """The cases of ``jmp qword ptr [rI*8 + T]`` after its bound: the table's 8-byte absolute addresses (None:
    not the shape, or the table not readable). Between the bound and the jump, a few moves that leave rI alone
    (GCC -O1 sets up its frame there: ``sub rsp, 8``) or zero-extend it (``mov eI, eI``)."""
    first = n
    while first > max(n - 3, 0) and insns[first - 1][2] in _BETWEEN:
        dst, _, src = insns[first - 1][3].partition(", ")
        if _wide(dst) == index and not (insns[first - 1][2] == "mov" and dst == src):
            return None
        first -= 1
    entries = _entries(read, table, 8, _bound(insns, first, index))
    return None if entries is None else sorted(set(entries))


def _entries(read: Callable[[int, int], bytes], table: int, width: int, count: int | None) -> list[int] | None:
    """The table's ``count`` entries of ``width`` bytes (int32 offsets are signed, addresses not); None when
    the bound is no bound or the table cannot be read."""
    if count is None or not 0 < count <= MAX_CASES:
        return None
    try:
        raw = read(table, width * count)
    except ElfPatchError:
        return None
    if len(raw) != width * count:
        return None
    return [int.from_bytes(raw[i:i + width], "little", signed=width == 4) for i in range(0, len(raw), width)]


def marked_tables(insns: list, read: Callable[[int, int], bytes]) -> list:
    """``insns`` with each plain ``jmp rY`` or ``jmp qword ptr [rI*8 + T]`` that is a switch above (built without
    -fcf-protection) spelled ``notrack jmp``, as -fcf-protection spells it: the decoder then takes it for the
    table jump it is (edges to its cases) rather than an indirect tail call. Any other jump through a register
    or memory is left as it is."""
    out = insns
    for n, i in enumerate(insns):
        if i[2] == "jmp" and not i[3].startswith("0x") and (not i[3].startswith("qword") or _ABSOLUTE.match(i[3])) \
                and x86_case_targets(insns, n, read) is not None:
            if out is insns:
                out = list(insns)
            out[n] = (i[0], i[1], "notrack jmp", i[3])
    return out


# -- AArch64 ---------------------------------------------------------------------------------------------
# GCC 12 and clang 14 (-O1..-O3, PIC or not) dispatch a dense switch through a table of byte or halfword
# entries, each a case's distance in instructions from a base label:
#
#     cmp   wI, #N           ; the bound, unsigned: then b.hi default, or b.ls to the table code after a
#     b.hi  default          ;   ret / b (GCC -O2); instructions that leave wI alone may come between
#     adrp  xT, T            ; the table  (clang: mov wJ, wI among these; the index is then xJ)
#     add   xT, xT, #:lo12:T
#     ldrb  wE, [xT, wI, uxtw]         (ldrh: uxtw #1, GCC -O0 ldr: uxtw #2; clang: [xT, xJ] / [xT, xJ, lsl #1])
#     adr   xB, base
#     add   xD, xB, wE, sxtb #2        (GCC: signed, sxtb / sxth / sxtw; clang: unsigned, lsl #2)
#     br    xD
#
# The decoder calls a `br` so read A64_TABLE_JUMP: its cases are its only successors; and the load of the
# entry `ldrb.table` (TABLE_LOAD): it reads the table inside its bound (read-only data), no object.

A64_TABLE_JUMP = "br.table"
TABLE_LOAD = ".table"  # the suffix that marks the table's load (ldrb.table): a read of the table, no more
_A64_FLOW = ("b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz", "tbnz", "braa", "braaz", "blraa", "blraaz",
             "retaa", A64_TABLE_JUMP)
_A64_ADD = re.compile(r"^x(\d+), x(\d+), [wx](\d+), (sxtb|sxth|sxtw|lsl) #2$")
_A64_LOAD = re.compile(r"^w(\d+), \[x(\d+), ([wx])(\d+)(?:, (uxtw|lsl)(?: #(\d))?)?\]$")
_A64_ADRP = re.compile(r"^x(\d+), #(0x[0-9a-f]+|\d+)$")
_A64_LO = re.compile(r"^x(\d+), x(\d+), #(0x[0-9a-f]+|\d+)$")
_A64_REG = re.compile(r"\b[wx](\d+)\b")
_A64_QUIET_MOVES = frozenset({"ldr", "ldrb", "ldrh", "ldrsw", "adrp", "add", "mov"})  # flags left alone
_A64_SIZES = {"ldrb": (1, "sxtb"), "ldrh": (2, "sxth"), "ldr": (4, "sxtw")}


def _a64_flow(mnem: str) -> bool:
    return mnem in _A64_FLOW or mnem.startswith("b.")


def _a64_regs(op: str) -> set[int]:
    return {int(r) for r in _A64_REG.findall(op)}


def _a64_parts(insns: list, n: int) -> dict | None:
    """The table code's pieces in the block ending at the jump ``insns[n]``: the table (``table``, its
    register ``table_reg``), the base (``base``), the entry ``size`` and ``signed``ness, the index register
    (``index``; ``wide``: used as xI, not as wI zero-extended by the load) and ``first``, the index of the
    block's first instruction (the scan stops at control flow, 16 instructions at most)."""
    add = _A64_ADD.match(insns[n - 1][3]) if n and insns[n - 1][2] == "add" else None
    if add is None or insns[n][3] != f"x{add.group(1)}":
        return None
    found: dict = {"ext": add.group(4)}
    want = {"elem": int(add.group(3)), "base": int(add.group(2))}  # registers still to be set, by role
    k = n - 2
    while k >= 0 and not _a64_flow(insns[k][2]) and n - k <= 16:
        if not _a64_take(insns[k][2].removesuffix(TABLE_LOAD), insns[k][3], found, want):
            return None
        if "elem" in found:
            found.setdefault("load", k)
        k -= 1
    if not {"elem", "base", "lo", "page"} <= found.keys():
        return None
    found.update(table=found["page"] + found["lo"], first=k + 1)
    return found


def _a64_take(mnem: str, op: str, found: dict, want: dict) -> bool:
    """One instruction before the jump, scanning back: a piece of the shape (recorded in ``found``), one that
    leaves the shape's registers alone, or (False) one that writes or uses them."""
    m = _A64_LOAD.match(op) if mnem in _A64_SIZES else _A64_ADRP.match(op) if mnem in ("adr", "adrp") \
        else _A64_LO.match(op) if mnem == "add" else None
    reg = int(m.group(1)) if m else None
    if mnem in _A64_SIZES and m and reg == want.get("elem"):
        return _a64_load(mnem, m, found, want)
    if mnem == "adr" and m and reg == want.get("base"):
        found["base"] = int(m.group(2), 0)
        del want["base"]
    elif mnem == "add" and m and "elem" in found and "lo" not in found and reg == want["table"] == int(m.group(2)):
        found["lo"] = int(m.group(3), 0)
    elif mnem == "adrp" and m and "lo" in found and reg == want.get("table"):
        found["page"] = int(m.group(2), 0)
        del want["table"]
    else:
        regs = _a64_regs(op)
        if regs & set(want.values()):
            return False
        return "index" not in found or found["index"] not in regs or _a64_alias(mnem, op, found)
    return True


def _a64_load(mnem: str, m: re.Match, found: dict, want: dict) -> bool:
    """``ldrb/ldrh wE, [xT, wI, uxtw #k]`` (or ``[xT, xI, lsl #k]``): entry size, index; the add's extend
    must match the entry (sxtb/sxth: signed) or be lsl (unsigned)."""
    size, signed = _A64_SIZES[mnem]
    shift = int(m.group(6) or 0)
    if found["ext"] not in ("lsl", signed) or shift != size.bit_length() - 1 \
            or (m.group(3) == "w") != (m.group(5) == "uxtw"):
        return False
    found.update(elem=True, size=size, signed=found["ext"] != "lsl", index=int(m.group(4)), wide=m.group(3) == "x")
    want["table"] = found["table_reg"] = int(m.group(2))
    del want["elem"]
    return True


def _a64_alias(mnem: str, op: str, found: dict) -> bool:
    """``mov wJ, wI`` onto the index: the index is wI before it (zero-extended, so the x form is bounded too)."""
    m = re.fullmatch(r"w(\d+), w(\d+)", op) if mnem == "mov" else None
    if m is None or int(m.group(1)) != found["index"]:
        return False
    found.update(index=int(m.group(2)), wide=False)
    return True


_A64_CMP = re.compile(r"^w(\d+), #(0x[0-9a-f]+|\d+)$")
_A64_JUMPS = ("b", "cbz", "cbnz", "tbz", "tbnz")
# Instructions whose first operand is the register they write (a W register write zeroes its upper half).
_A64_W_WRITES = frozenset(("add", "sub", "adds", "subs", "mov", "movz", "and", "orr", "eor", "lsl", "lsr", "ubfx",
                           "uxtb", "uxth", "ldr", "ldur", "ldrb", "ldrh", "ldurb", "ldurh"))
_NUMBER = re.compile(r"0x[0-9a-f]+|\d+")
_LANDINGS: tuple[list | None, Counter] = (None, Counter())


def _a64_check(insns: list, first: int) -> int | None:
    """The index of the bounds check's branch: ``b.hi`` right before the table code, or ``b.ls <it>`` a few
    instructions before a ``ret``/``b`` the table code follows (GCC -O2 puts the default case between)."""
    k = first - 1
    if k >= 1 and insns[k][2] == "b.hi":
        return k
    if k < 1 or insns[k][2] not in ("ret", "b"):
        return None
    for j in range(k - 1, max(k - 9, 0), -1):
        if insns[j][2] == "b.ls" and insns[j][3] == f"#{insns[first][0]:#x}":
            return j
        if _a64_flow(insns[j][2]):
            return None
    return None


def _a64_bound(insns: list, parts: dict) -> tuple[int, int] | None:
    """The entry count the unsigned bounds check (``cmp wI, #N`` and its branch) allows, and its branch's
    index (None: not the shape)."""
    j = _a64_check(insns, parts["first"])
    c = j - 1 if j is not None else -1
    # clang -O3 schedules a load or two between the compare and its branch (neither sets flags nor wI)
    while j is not None and c > max(j - 3, 0) and insns[c][2] in _A64_QUIET_MOVES \
            and _a64_regs(insns[c][3].partition(", ")[0]) != {parts["index"]}:
        c -= 1
    cmp = _A64_CMP.match(insns[c][3]) if c >= 0 and insns[c][2] == "cmp" else None
    if cmp is None or int(cmp.group(1)) != parts["index"]:
        return None
    if parts["wide"]:  # xI indexes: its upper half is zero only when a 32-bit write to wI set it
        prev = insns[c - 1] if c else None
        if prev is None or prev[2] not in _A64_W_WRITES or not prev[3].startswith(f"w{parts['index']}, "):
            return None
    return int(cmp.group(2), 0) + 1, c + 1


def _a64_landings(insns: list) -> Counter:
    """How many direct branches land on each address of ``insns``: worked out once per decoded function (the
    last one is kept), not once per `br`, so a function of many switches costs no more than its length."""
    global _LANDINGS
    last = _LANDINGS
    if last[0] is insns:
        return last[1]
    found: Counter = Counter()
    for i in insns:
        if i[2] in _A64_JUMPS or i[2].startswith("b."):
            target = i[3].rpartition("#")[2]
            if _NUMBER.fullmatch(target):
                found[int(target, 0)] += 1
    _LANDINGS = (insns, found)
    return found


def _a64_entered(insns: list, first: int, n: int, check: int) -> bool:
    """Whether a branch other than the bounds check's ``b.ls`` (``insns[check]``, taken when the index is in
    bounds) lands inside the table code [first, n]: the index there would then be unchecked."""
    landings = _a64_landings(insns)
    inside = sum(landings.get(insns[k][0], 0) for k in range(first, n + 1))
    own = 1 if insns[check][2] == "b.ls" else 0  # _a64_check: it lands on the table code's first instruction
    return inside > own


def a64_case_targets(insns: list, n: int, read: Callable[[int, int], bytes]) -> list[int] | None:
    """The case addresses of the table jump ``insns[n]`` (a ``br``), or None when the code around it is not
    the AArch64 shape above."""
    if insns[n][2] not in ("br", A64_TABLE_JUMP):
        return None
    parts = _a64_parts(insns, n)
    if parts is None or parts["index"] == parts["table_reg"]:
        return None
    bound = _a64_bound(insns, parts)
    if bound is None or not 0 < bound[0] <= MAX_CASES or _a64_entered(insns, parts["first"], n, bound[1]):
        return None
    count = bound[0]
    size = parts["size"]
    try:
        raw = read(parts["table"], size * count)
    except ElfPatchError:
        return None
    if len(raw) != size * count:
        return None
    return sorted({parts["base"] + 4 * int.from_bytes(raw[i:i + size], "little", signed=parts["signed"])
                   for i in range(0, len(raw), size)})


def a64_marked_tables(insns: list, read: Callable[[int, int], bytes]) -> list:
    """``insns`` with each ``br`` that is the AArch64 switch above spelled A64_TABLE_JUMP: the decoder then
    gives it edges to its cases rather than taking it for an indirect tail call."""
    out = insns
    for n, i in enumerate(insns):
        parts = _a64_parts(insns, n) if i[2] == "br" else None
        if parts is not None and a64_case_targets(insns, n, read) is not None:
            if out is insns:
                out = list(insns)
            out[n] = (i[0], i[1], A64_TABLE_JUMP, i[3])
            k = parts["load"]
            out[k] = (out[k][0], out[k][1], out[k][2] + TABLE_LOAD, out[k][3])
    return out
