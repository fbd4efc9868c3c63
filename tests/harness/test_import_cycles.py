"""No import cycles through the harness and `elfpatch dlcheck`, deferred imports (inside functions) included:
every ``import``/``from ... import`` statement anywhere in a module counts as an edge."""
from __future__ import annotations

import ast
from pathlib import Path

import elfpatch

PACKAGE = Path(elfpatch.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, name: str) -> set[str]:
    """The elfpatch modules ``path`` imports, by any statement at any depth (resolved to modules that exist:
    ``from elfpatch.harness import blockers`` is the module, ``from elfpatch.errors import X`` is errors)."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: up from this module's package
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            if target.startswith("elfpatch") and target in MODULES:
                out.add(target)
                break
    return out


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
OURS = {m for m in MODULES if m.startswith("elfpatch.harness") or m == "elfpatch.main_dlcheck"}


def test_no_cycle_through_the_harness_or_dlcheck() -> None:
    graph = {m: imports_of(p, m) for m, p in MODULES.items()}
    assert graph["elfpatch.harness.session"] >= {"elfpatch.harness.blockers", "elfpatch.harness.lddebug"}

    def cycle_from(start: str) -> list[str] | None:
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return [*path, start]
                if nxt not in path:
                    stack.append((nxt, [*path, nxt]))
        return None

    cycles = {m: c for m in sorted(OURS) if (c := cycle_from(m)) is not None}
    assert cycles == {}
