"""The per-file work budget of ``inits --dtors/--siof``: what keeps time and memory linear in the bytes decoded
on any input, crafted or huge. Past a limit the analysis does not fail: the function concerned is not seen
(or seen only up to the limit), every entry that may depend on it is reported incomplete, and the file's
``analysis_notes`` say which limit was reached.

- INSTRUCTIONS: instructions decoded per file, and STEPS instructions walked (a function is walked once per
  argument tuple and per fixpoint pass); past either, no further function is decoded (every function the walk
  reaches is decoded whole: no byte skim stands in for decoding, so none has a budget).
- FUNCTION_BYTES: one function is decoded at most this far (a larger one is cut there).
- ARG_TUPLES: distinct argument tuples one function is walked with; further calls walk it with no argument
  known (a superset of what each tuple would run), so a helper chain passing ``2a``/``2a+1`` stays linear.
- STATE_SLOTS: stack slots one abstract state remembers; past that the oldest are forgotten, so no state
  grows with blocks x slots.
- SUMMARY_ENTRIES: objects the kept walks' summaries list in all (each function's walk lists every object its
  calls read or touch, so a deep --depth on a large library keeps millions); past it a call needing a new walk
  is walked no deeper than DEFAULT_DEPTH calls below its initializer (the entries from the first one cut are
  incomplete), so memory stays bounded at any depth.
- A function capstone refuses (CsError, e.g. CS_ERR_MEM) is not seen.
"""
from __future__ import annotations

from typing import Callable

INSTRUCTIONS = 2_000_000  # libtorch_cpu.so (the largest file measured) decodes 222k
STEPS = 4_000_000  # and walks 303k
FUNCTION_BYTES = 1 << 18
ARG_TUPLES = 8
STATE_SLOTS = 64
SUMMARY_ENTRIES = 1_000_000  # libtorch_cpu.so keeps 57k at --depth 3, 2.5M (1 GB) at --depth 8
DEFAULT_DEPTH = 3  # calls followed below an initializer, unless --depth says otherwise
CHUNK = 1 << 16  # bytes handed to capstone at once: its instruction array stays small


class Budget:
    """What one file's analysis has spent, and the functions a limit cut short (address -> why)."""

    def __init__(self, instructions: int = INSTRUCTIONS, steps: int = STEPS, entries: int = SUMMARY_ENTRIES) -> None:
        self.instructions = instructions
        self.steps = steps
        self.entries = entries
        self.decoded = 0
        self.walked = 0
        self.kept = 0  # objects listed by the summaries walked (SUMMARY_ENTRIES)
        self.cut: dict[int, str] = {}
        self.widened: set[int] = set()  # functions walked with arguments dropped (ARG_TUPLES)

    def exhausted(self) -> bool:
        return self.decoded >= self.instructions or self.walked >= self.steps

    def cut_short(self, addr: int, why: str) -> None:
        self.cut.setdefault(addr, why)

    def notes(self, name: Callable[[int], str]) -> list[str]:
        """The file's notes: one per kind of limit reached, naming a few functions (``name``: address -> str)."""
        by_why: dict[str, list[int]] = {}
        for addr, why in self.cut.items():
            by_why.setdefault(why, []).append(addr)
        out = [f"{len(addrs)} function(s) not seen whole ({why}): " + ", ".join(name(a) for a in addrs[:5])
               for why, addrs in by_why.items()]
        if self.widened:
            out.append(f"{len(self.widened)} function(s) called with more than {ARG_TUPLES} argument tuples: "
                       "walked with no argument known past that")
        return out
