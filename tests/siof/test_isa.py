"""The decoder calls both ISAs' transfer functions (inits/x86.py, inits/a64.py) through one protocol
(inits/isa.py ``Isa``): the type checker says both satisfy it, and that a class missing a member does not."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from elfpatch.elf.const import EM_AARCH64, EM_X86_64
from elfpatch.inits.a64 import _A64
from elfpatch.inits.disasm import Disassembler
from elfpatch.inits.x86 import _X86

SNIPPET = """\
from elfpatch.inits.a64 import _A64
from elfpatch.inits.isa import Isa
from elfpatch.inits.x86 import _X86


class NoStep:
    args: tuple = ()

    def plans(self, insns: list) -> list:
        return []


x86: Isa = _X86(lambda a: None, lambda a: None)
a64: Isa = _A64(lambda a: None, lambda a: None)
bad: Isa = NoStep()
"""


def test_both_isas_satisfy_the_protocol(tmp_path: Path) -> None:
    """mypy accepts x86-64's and AArch64's transfer functions as an Isa and refuses a class without step/run:
    a change to one ISA's calling convention that the decoder does not follow is a type error."""
    src = tmp_path / "use_isa.py"
    src.write_text(SNIPPET)
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                          "--config-file", str(ROOT / "pyproject.toml"), str(src)],
                         cwd=ROOT, capture_output=True, text=True).stdout
    errors = [line.split(":", 2)[1] for line in out.splitlines() if line.startswith(str(src)) and ": error:" in line]
    assert errors == ["15"], out  # the NoStep line, and only it


def test_the_decoder_picks_the_isa_of_the_machine() -> None:
    def read(_a: int, _n: int) -> bytes:
        return b""

    assert isinstance(Disassembler(EM_X86_64, read, lambda _a: None).arch, _X86)
    assert isinstance(Disassembler(EM_AARCH64, read, lambda _a: None).arch, _A64)
