"""`inits --dtors --siof` against what generated programs observe at run time (the truth machine, see
campaign.py): on the first eight seeds, each build in its per-seed subset of the matrix must have
(a) no false clean: every read before construction the run saw is a finding, or its reader's entry or its file
    says the analysis is incomplete;
(b) no false finding: every finding was observed, or the source implies it;
(c) every registration the `__cxa_atexit` shim logs listed (and each listed entry matched at most once).
Clang builds carry "clang" in their id (the `cross` marker: not every machine has clang); AArch64 builds
("a64-" variants) are built with the cross compilers and run under qemu-user."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import case

from truth.build import Variant, build, run, shim, tools, variants_for, write_sources
from truth.check import Module, Outcome, _entries_of, analyse, check
from truth.generator import CROSS_ROUTES, ROUTES, Context, Obj, Program, generate

SEEDS = (1, 2, 3, 4, 5, 6, 7, 8)
# AArch64 builds run under qemu-user: among them those whose libraries call their own exported functions
# through the PLT (seeds 5, 10, 11: each such stub was taken for a function, its registrations lost)
A64 = [(5, "a64-gcc-O3-pie-o2"), (9, "a64-clang-O2-pie-o1"), (10, "a64-gcc-O2-shared-cf-strip-o1"),
       (11, "a64-gcc-O2-nopie-cf-o2")]
CASES = [(seed, v.name) for seed in SEEDS for v in variants_for(seed, 3)] + A64
IDS = [f"seed{seed}-{name}" for seed, name in CASES]
PARAMS = [case(seed, name, needs=tools(Variant.parse(name).compiler, Variant.parse(name).arch))
          for seed, name in CASES]


@functools.cache
def _workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="elfpatch-truth-"))


@functools.cache
def _built(seed: int, variant: str) -> tuple:
    v = Variant.parse(variant)
    require_tool(*tools(v.compiler, v.arch), packages="g++, clang, g++-aarch64-linux-gnu, qemu-user")
    prog = generate(seed)
    directory = _workdir() / str(seed)
    b = build(prog, v, directory, write_sources(prog, directory))
    stdout, logs = run(b, shim(_workdir(), v.arch))
    return prog, b, stdout, logs


@functools.cache
def _outcome(seed: int, variant: str) -> Outcome:
    return check(*_built(seed, variant))


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    shutil.rmtree(_workdir(), ignore_errors=True)


def _lines(items: list[dict]) -> str:
    return "\n".join(str(i) for i in items)


@pytest.mark.parametrize(("seed", "variant"), PARAMS, ids=IDS)
def test_no_false_clean(seed: int, variant: str) -> None:
    """Property (a): a read the program saw before construction is never hidden behind a complete result."""
    out = _outcome(seed, variant)
    assert not out.false_cleans, f"{len(out.false_cleans)} false clean(s):\n{_lines(out.false_cleans)}"


@pytest.mark.parametrize(("seed", "variant"), PARAMS, ids=IDS)
def test_no_false_finding(seed: int, variant: str) -> None:
    """Property (b): each finding is a read the run observed early or the source implies."""
    out = _outcome(seed, variant)
    assert not out.false_findings, f"{len(out.false_findings)} false finding(s):\n{_lines(out.false_findings)}"


@pytest.mark.parametrize(("seed", "variant"), PARAMS, ids=IDS)
def test_every_registration_listed_once(seed: int, variant: str) -> None:
    """Property (c): `exit_time_destructors` lists each registration the shim logged, once."""
    out = _outcome(seed, variant)
    assert not out.dtors_missed, _lines(out.dtors_missed)
    assert out.dtors_listed == out.dtors_logged, (out.dtors_listed, out.dtors_logged)


def test_seed_set_covers_every_route_and_reader() -> None:
    """The fixed seeds exercise what the machine is for: every route, inline and template objects, constructor
    functions (with and without priority), libraries with and without DT_NEEDED on each other."""
    progs = [generate(s) for s in SEEDS]
    reads = [(o.module, r) for p in progs for o in [*p.objects, *p.contexts] for r in o.reads]
    assert {r.route for _, r in reads} == set(ROUTES)
    assert {r.route for module, r in reads if r.target.module != module} == set(CROSS_ROUTES)
    assert {(module, r.target.module) for module, r in reads} >= {("libA", "main"), ("libB", "libA")}
    assert {o.kind for p in progs for o in p.objects} == {"plain", "inline", "template"}
    ctors = [c for p in progs for c in p.contexts if c.function]
    assert any(c.priority for c in ctors) and any(c.priority is None for c in ctors)
    assert {p.b_needs_a for p in progs if "libB" in p.modules} == {True, False}


def test_the_runs_observe_early_reads() -> None:
    """The properties are not vacuous: the seed set's gcc builds see reads before construction and
    registrations."""
    outs = [_outcome(s, v) for s, v in CASES if v.startswith("gcc") and s in SEEDS[:2]]
    assert sum(o.early for o in outs) >= 10
    assert sum(o.dtors_logged for o in outs) >= 10


def test_a_callback_left_by_an_earlier_initializer_is_what_keeps_its_reads_unproven() -> None:
    """The hook route's reads run in another module's call back (the runtime's truth_fire): seed 21 sees one
    before construction in a later initializer than the one that left the callback (in the seed set they are
    left and fired by one initializer, whose handing is an indirect call), and the note on the earlier
    initializer's callback is among what makes that entry incomplete."""
    out = _outcome(21, "gcc-O0-shared-o1")
    assert not out.false_cleans and not out.entry_complete_misses
    hooked = [m for m in out.incomplete_misses if "hook" in m["routes"]]
    assert any("a callback an earlier initializer left with another module" in m["causes"] for m in hooked)


def test_checker_reports_a_hidden_read_as_false_clean() -> None:
    """The checker itself: the same analysis with its findings removed and every entry claiming complete makes
    each observed early read a false clean (and every finding it had, a finding no longer: none false)."""
    seed, variant = next((s, v) for s, v in CASES if v.startswith("gcc"))
    outcome = _outcome(seed, variant)

    def doctored(paths: list[Path], *flags: str) -> list[dict]:
        docs = analyse(paths, *flags)
        for doc in docs:
            doc["findings"], doc["load_findings"], doc["analysis_complete"] = [], [], True
            for e in doc["init"]:
                if e.get("analysis"):
                    e["analysis"]["complete"] = True
        return docs

    hidden = check(*_built(seed, variant), analyser=doctored)
    assert outcome.early > 0 and hidden.early == outcome.early
    assert len(hidden.false_cleans) == hidden.early and hidden.found == 0 and not hidden.false_findings


def test_a_constructor_function_lto_merged_is_run_by_the_merged_initializer() -> None:
    """The checker itself: GCC's -flto -O0 merges `constructor` functions with the units' initializers into
    one `_sub_I_65535_0.0`; a read (or a finding) of such a function's context is that entry's, not nobody's
    (no entry would make every early read of it an entry-complete miss and every finding of it false). With
    an entry of its own, the function is that entry alone."""
    contexts = [Context(1, "main", "u0"), Context(2, "main", "u1"), Context(3, "main", "u0", "truth_ctor_fn3")]
    prog = Program(1, {"main": ["u0", "u1"]}, False, [], contexts, {"u0": set(), "u1": set()})
    merged = {"address": 0x149C, "symbol": "_sub_I_65535_0.0", "demangled": None, "source": None,
              "toolchain": False}
    assert [_entries_of(prog, c, {"init": [merged]}) for c in contexts] == [{0x149C}] * 3
    own = {"address": 0x1200, "symbol": "truth_ctor_fn3", "demangled": None, "source": "u0.cpp", "toolchain": False}
    assert [_entries_of(prog, c, {"init": [merged, own]}) for c in contexts] == [{0x149C}, {0x149C}, {0x1200}]


def test_a_load_findings_object_is_named_by_its_own_files_symbols(tmp_path: Path) -> None:
    """The checker itself: a finding of the load names an object of another module, which a stripped file
    knows by address alone; that address is looked up in that module's symbols (its ``file``), not in the
    reader's (where the same address may name another object, or nothing)."""
    prog = Program(1, {"main": ["u0"], "libA": ["u1"]}, False,
                   [Obj(1, "main", "u0", "plain", False), Obj(2, "libA", "u1", "plain", False)], [], {})
    reader, other = tmp_path / "libA.so", tmp_path / "prog"
    mod = Module({}, {0x4010: "g2"}, {}, {os.path.realpath(reader): {0x4010: "g2"},
                                         os.path.realpath(other): {0x4010: "g1"}})
    assert mod.object_id(prog, {"address": 0x4010, "symbol": None, "file": str(other)}) == 1
    assert mod.object_id(prog, {"address": 0x4010, "symbol": None}) == 2  # no file: the reader's own object


def test_a_seed_names_one_program_in_every_process() -> None:
    """A seed must rebuild the same program in another run (a report names seeds): no set order or hash seed
    may leak into the generator's choices."""
    code = ("import hashlib, sys; sys.path.insert(0, sys.argv[1]); from truth.emit import emit; "
            "from truth.generator import generate; "
            "text = repr([sorted(emit(generate(s)).items()) for s in range(1, 30)]); "
            "print(hashlib.sha256(text.encode()).hexdigest())")
    tests = str(Path(__file__).resolve().parents[1])
    digests = {subprocess.run([sys.executable, "-c", code, tests], env=dict(os.environ, PYTHONHASHSEED=str(h)),
                              capture_output=True, text=True, check=True).stdout for h in (1, 2, 3)}
    assert len(digests) == 1, digests


def test_a_constructor_function_lto_merged_is_run_by_the_merged_entry() -> None:
    """GCC's LTO merges `constructor` functions into the one initializer with the units (no entry keeps their
    name): a read such a function observes before construction is the merged entry's, as a unit's is (counted
    against no entry, a finding on it was a "false finding" and the read an entry-complete miss)."""
    from truth.check import _entries_of

    prog = generate(5)
    ctx = next(c for c in prog.contexts if c.function and c.priority is None)
    merged = {"toolchain": False, "symbol": "_sub_I_65535_0.0", "demangled": None, "source": None, "address": 16}
    own = {"toolchain": False, "symbol": ctx.function, "demangled": None, "source": None, "address": 32}
    assert _entries_of(prog, ctx, {"init": [merged]}) == {16}
    assert _entries_of(prog, ctx, {"init": [merged, own]}) == {32}  # its own entry, when it has one
