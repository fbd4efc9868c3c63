"""The yardstick for `inits --dtors --siof` speed: a straightforward pass over the same file, timed beside the
real command in the same run. Its work is what any first attempt does: capstone's detailed API in pure Python,
every initializer and every function it calls, to depth 3, decoded whole (each function once: the functions the
analysis itself decodes), every operand looked at (memory operands' access and address, call targets), no data
flow at all: the ratio is a lower bound on what the analysis saves.

    .venv/bin/python bench/straight_pass.py [--reps N] [--depth N] [LIBRARY]

Default LIBRARY: libtorch_cpu.so from the torch wheel (bench.py's TORCH_WHEEL, extracted into bench/out).
The functions the analysis decodes are recorded first (untimed, bench/out/straight_pass.functions); the pass
decodes exactly those. Prints each side's median wall and CPU seconds (user + system), and the ratios.
``--pass-only FUNCTIONS`` runs the pass itself once (what the timed runs call)."""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
from bench import ELFPATCH, OUT, TORCH_WHEEL  # noqa: E402


def record(path: str, depth: int, out: Path) -> None:
    """Writes the functions ``inits --dtors --siof`` decodes on ``path`` (start and end, one pair a line): the
    work the straight pass is given, so that both sides decode the same code."""
    from elfpatch.elf.file import ElfFile
    from elfpatch.fs.source import Source
    from elfpatch.inits import analysis
    from elfpatch.inits.disasm import Disassembler
    from elfpatch.inits.order import list_initializers

    seen: dict[int, int] = {}
    decode = Disassembler.decode

    def recorded(self: Disassembler, start: int, end: int):  # type: ignore[no-untyped-def]
        seen.setdefault(start, end)
        return decode(self, start, end)

    Disassembler.decode = recorded  # type: ignore[method-assign]
    try:
        listing = list_initializers(path)
        with Source(path) as src:
            analysis.analyze(ElfFile(src.data, path), listing, depth)
    finally:
        Disassembler.decode = decode  # type: ignore[method-assign]
    out.parent.mkdir(parents=True, exist_ok=True)  # bench/out is made by bench.py, which may not have run
    out.write_text("".join(f"{a} {e}\n" for a, e in seen.items()))


def straight_pass(path: str, functions: Path) -> tuple[int, int, int]:
    """(functions, instructions, memory operands) the pass decodes and looks at: the listing, then each function
    of ``functions`` decoded whole with capstone's detailed API, each operand read (a memory operand's access
    and address terms, a call's or jump's target)."""
    import capstone
    from capstone import x86_const

    from elfpatch.elf.file import ElfFile
    from elfpatch.fs.source import Source
    from elfpatch.inits.order import list_initializers

    list_initializers(path)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    md.skipdata = True
    spans = [tuple(map(int, line.split())) for line in functions.read_text().splitlines()]
    insns = mems = 0
    with Source(path) as src:
        elf = ElfFile(src.data, path)
        for start, end in spans:
            code = elf.read(elf.vaddr_to_offset(start, end - start), end - start)
            for insn in md.disasm(code, start):
                insns += 1
                flow = insn.group(capstone.CS_GRP_CALL) or insn.group(capstone.CS_GRP_JUMP)
                for op in insn.operands:
                    if op.type == x86_const.X86_OP_MEM:
                        mems += 1
                        _ = (op.access, op.mem.base, op.mem.index, op.mem.scale, op.mem.disp)
                    elif op.type == x86_const.X86_OP_IMM and flow:
                        _ = op.imm
    return len(spans), insns, mems


def _timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, cpu s) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library", nargs="?")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--pass-only", metavar="FUNCTIONS", type=Path)
    args = ap.parse_args()
    lib = args.library or str(OUT / "libtorch_cpu.so")
    if args.pass_only:
        t = time.process_time()
        funcs, insns, mems = straight_pass(lib, args.pass_only)
        print(f"straight pass: {funcs} functions, {insns} instructions, {mems} memory operands, "
              f"{time.process_time() - t:.1f} s CPU")
        return 0
    if not Path(lib).exists():
        import zipfile

        with zipfile.ZipFile(TORCH_WHEEL) as whl:
            Path(lib).write_bytes(whl.read("torch/lib/libtorch_cpu.so"))
    ours = [*ELFPATCH, "inits", "--dtors", "--siof", "--depth", str(args.depth), "--json", lib]
    functions = OUT / "straight_pass.functions"
    record(lib, args.depth, functions)
    straight = [sys.executable, __file__, "--pass-only", str(functions), lib]
    runs: dict[str, list] = {"inits --dtors --siof": [], "straight pass": []}
    for _ in range(args.reps):  # in turn, so that load on the machine hits both alike
        runs["inits --dtors --siof"].append(_timed(ours))
        runs["straight pass"].append(_timed(straight))
    med = {k: [statistics.median(r[i] for r in v) for i in range(2)] for k, v in runs.items()}
    for k, v in runs.items():
        print(f"{k:22} wall {med[k][0]:6.2f} s  cpu {med[k][1]:6.2f} s  (median of {len(v)})")
    a, b = med["straight pass"], med["inits --dtors --siof"]
    print(f"straight pass / inits: wall {a[0] / b[0]:.1f}x, cpu {a[1] / b[1]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
