"""The package's shape: no import cycles among elfpatch modules (deferred imports inside functions included),
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
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base in known:
                found.add(base)
            for alias in node.names:  # `from elfpatch.targets import tree` imports a submodule
                sub = f"{base}.{alias.name}"
                if sub in known:
                    found.add(sub)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return out


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
