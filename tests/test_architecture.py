"""The package's shape: its layers, each importing only from its own layer and those below; no import cycles
among elfpatch modules (deferred imports inside functions included); no subpackage named like a public name;
and the read path of `elfpatch unique` imports neither the disassembler nor pyelftools."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "elfpatch"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The elfpatch modules ``name`` imports, wherever the import statement stands (a function body too),
    except under ``if TYPE_CHECKING:``, which never runs."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        found.update(_imported(node, name, is_package, known))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    found.discard(name)
    return found


def _imported(node: ast.AST, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The ``known`` modules one statement of module ``name`` imports (none if it is no import)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = _absolute(node, name, is_package)
    # `from elfpatch.targets import tree` imports a submodule
    return {m for m in (base, *(f"{base}.{alias.name}" for alias in node.names)) if m in known}


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    """The module a ``from ... import`` in module ``name`` reads from, relative levels resolved."""
    base = node.module or ""
    if not node.level:
        return base
    anchor = name.split(".") if is_package else name.split(".")[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([base] if base else []))


class _Tarjan:
    """Tarjan's strongly connected components, in one depth-first pass over ``graph``."""

    def __init__(self, graph: dict[str, set[str]]) -> None:
        self.graph = graph
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.on_stack: set[str] = set()
        self.components: list[list[str]] = []

    def visit(self, v: str) -> None:
        self.index[v] = self.low[v] = len(self.index)
        self.stack.append(v)
        self.on_stack.add(v)
        for w in sorted(self.graph[v]):
            if w not in self.index:
                self.visit(w)
                self.low[v] = min(self.low[v], self.low[w])
            elif w in self.on_stack:
                self.low[v] = min(self.low[v], self.index[w])
        if self.low[v] == self.index[v]:  # v is the root of a component: it is what the stack holds above v
            self.components.append(self._pop_through(v))

    def _pop_through(self, v: str) -> list[str]:
        component = []
        while True:
            w = self.stack.pop()
            self.on_stack.discard(w)
            component.append(w)
            if w == v:
                return component


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    tarjan = _Tarjan(graph)
    for v in sorted(graph):
        if v not in tarjan.index:
            tarjan.visit(v)
    return [sorted(c) for c in tarjan.components if len(c) > 1]


def test_no_import_cycles() -> None:
    mods = modules()
    known = set(mods)
    graph = {name: imports_of(name, path, known) for name, path in mods.items()}
    assert cycles(graph) == []


def test_cycle_finder_finds_a_deferred_cycle(tmp_path: Path) -> None:
    """The check above can fail: a deferred import inside a function closes a cycle."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from elfpatch.b import thing\n")
    b.write_text("def f():\n    from elfpatch.a import other\n")
    known = {"elfpatch.a", "elfpatch.b"}
    graph = {"elfpatch.a": imports_of("elfpatch.a", a, known), "elfpatch.b": imports_of("elfpatch.b", b, known)}
    assert cycles(graph) == [["elfpatch.a", "elfpatch.b"]]


# The layers, lowest first. A module may import from its own layer and the layers below, never from above
# (deferred imports included, as for cycles). A module's layer is that of the longest entry naming it or a
# package above it; the package root `elfpatch` (the lazy public API) is named alone.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the facts everything shares: errors, ELF constants, the record type, the test-only stop point
    ("elfpatch.errors", "elfpatch.elf.const", "elfpatch.elf.records", "elfpatch.fs.teststop", "elfpatch.version",
     "elfpatch.collector"),
    # reading ELF and the loader's view; opening files; containers (ar, zip, wheel); one edit and how it is
    # applied to bytes; the result records and the JSON envelope; the warnings the JSON documents collect
    ("elfpatch.elf", "elfpatch.fs", "elfpatch.formats", "elfpatch.patching.edits", "elfpatch.report",
     "elfpatch.warnlog"),
    # the plan of an image's edits, the one commit protocol that applies them, and a tree's relink through it
    ("elfpatch.patching", "elfpatch.fs.commit", "elfpatch.fs.relink"),
    # what a PATH is: trees, ELF files, archives, wheels, each planned and committed
    ("elfpatch.targets",),
    # the analyses: collisions and owners, static initialization, the dlopen harness
    ("elfpatch.auditing", "elfpatch.inits", "elfpatch.harness"),
    # the subcommands (and the pre-commit hook, which is `unique --check`)
    ("elfpatch.commands",),
    # the entry points: the console script, the API and the package root
    ("elfpatch.cli", "elfpatch.api", "elfpatch.__main__", "elfpatch"),
)


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    """The index of ``module``'s layer (None: no layer names it)."""
    best: tuple[int, int] | None = None  # (length of the entry, layer)
    for i, layer in enumerate(layers):
        for entry in layer:
            covers = module == entry or (entry != "elfpatch" and module.startswith(entry + "."))
            if covers and (best is None or len(entry) > best[0]):
                best = (len(entry), i)
    return None if best is None else best[1]


def upward_imports(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """Each import of a module from a higher layer, as "importer (layer) -> imported (layer)"."""
    out = []
    for name in sorted(graph):
        for dep in sorted(graph[name]):
            low, high = layer_of(name, layers), layer_of(dep, layers)
            if low is not None and high is not None and high > low:
                out.append(f"{name} ({low}) -> {dep} ({high})")
    return out


def test_every_module_has_a_layer() -> None:
    assert [m for m in sorted(modules()) if layer_of(m) is None] == []


def test_imports_point_only_downward() -> None:
    mods = modules()
    known = set(mods)
    graph = {name: imports_of(name, path, known) for name, path in mods.items()}
    assert upward_imports(graph) == []


def test_layer_check_finds_a_deferred_upward_import(tmp_path: Path) -> None:
    """The check above can fail: a low module that imports a command inside a function, and a subpackage's
    module under a longer entry than its package's."""
    low, cmd, edits = tmp_path / "low.py", tmp_path / "cmd.py", tmp_path / "edits.py"
    low.write_text("def f():\n    from elfpatch.cmd import run\n")
    cmd.write_text("from elfpatch.low import thing\n")
    edits.write_text("from elfpatch.pkg.commit import apply\n")
    layers = (("elfpatch.low", "elfpatch.pkg.edits"), ("elfpatch.pkg",), ("elfpatch.cmd",))
    known = {"elfpatch.low", "elfpatch.cmd", "elfpatch.pkg.edits", "elfpatch.pkg.commit"}
    graph = {"elfpatch.low": imports_of("elfpatch.low", low, known),
             "elfpatch.cmd": imports_of("elfpatch.cmd", cmd, known),
             "elfpatch.pkg.edits": imports_of("elfpatch.pkg.edits", edits, known), "elfpatch.pkg.commit": set()}
    assert upward_imports(graph, layers) == ["elfpatch.low (0) -> elfpatch.cmd (2)",
                                             "elfpatch.pkg.edits (0) -> elfpatch.pkg.commit (1)"]


def test_no_subpackage_shadows_a_public_name() -> None:
    """Importing ``elfpatch.X`` sets the attribute ``elfpatch.X`` to the module: a subpackage or module named
    like a public function (``audit``, ``patch``) would replace it for every later caller."""
    import elfpatch

    public = set(elfpatch.__all__)
    assert public, "elfpatch.__all__ lists the public names"
    assert sorted(public & {m.split(".")[1] for m in modules() if m.count(".") >= 1}) == []


def test_unique_imports_no_heavy_modules(tmp_path: Path) -> None:
    """`elfpatch unique` (the hot path, run over whole site-packages) loads neither a disassembler nor
    pyelftools, cffi or LIEF."""
    lib = tmp_path / "empty.o"
    lib.write_bytes(b"")
    code = ("import sys\nfrom elfpatch.cli import main\nmain(['unique', '--check', sys.argv[1]])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('capstone', 'elftools', 'cffi', 'lief'))\n"
            "print('HEAVY:' + ','.join(heavy))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True, cwd=ROOT)
    assert proc.stdout.splitlines()[-1] == "HEAVY:", proc.stdout


LAZY = ("typing", "logging", "hashlib", "ctypes.util", "shutil", "json", "subprocess", "elfpatch.auditing.collisions",
        "elfpatch.auditing.packages", "elfpatch.commands.audit", "elfpatch.commands.dlcheck", "elfpatch.commands.inits")


def test_unique_check_imports_only_what_it_uses(unique_build: Path) -> None:
    """`elfpatch unique --check` on a library with unique symbols (demangled, reported) imports none of the
    modules it does not need: start-up is most of a one-file check. Logging comes in with the first warning,
    json with --json, the audit's modules with `audit`."""
    lib = unique_build / "libholder_v1.so"
    code = ("import sys\nfrom elfpatch.cli import main\nstatus = main(['unique', '--check', sys.argv[1]])\n"
            f"print('STATUS', status, 'LOADED:' + ','.join(m for m in {LAZY!r} if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True, cwd=ROOT)
    assert "found 4 unique symbols" in proc.stdout, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "STATUS 1 LOADED:", proc.stdout
