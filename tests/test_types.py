"""What the type checker sees: records (``elfpatch.elf.records.Record``, a plain namedtuple at run time) are named
tuples to mypy, so their constructors and fields are checked; and no record field hides a tuple method."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

import elfpatch


def _records() -> list[type]:
    """Every named tuple class the package defines (Record subclasses and typing.NamedTuple ones)."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(elfpatch.__path__, "elfpatch."):
        if info.name.endswith("__main__"):  # runs the CLI
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")
                    and value.__module__ == info.name):
                found[f"{info.name}.{value.__qualname__}"] = value
    return list(found.values())


def test_no_record_field_shadows_a_tuple_method() -> None:
    """A field named ``index`` or ``count`` replaces tuple.index/count on the instance: code (or a checker)
    that means the method gets an int. Fields are named for what they hold (``shndx``, ``symndx``, ``nsyms``)."""
    records = _records()
    assert len(records) > 10  # the walk found the package's records
    shadowing = {cls.__qualname__: sorted(set(cls._fields) & set(dir(tuple))) for cls in records}
    assert {name: fields for name, fields in shadowing.items() if fields} == {}


SNIPPET = """\
from elfpatch.patching.edits import Edit

e = Edit(1, 2, 3, "why")
reveal_type(e.offset)
Edit(1, 2)
Edit("x", 2, 3, "why")
e.nosuch
"""


def test_mypy_checks_records_as_named_tuples(tmp_path: Path) -> None:
    """mypy reads a Record subclass as a typing.NamedTuple: its fields have their types, and a call with a
    missing or mistyped field, or a field that does not exist, is an error (not an opaque class)."""
    src = tmp_path / "use_records.py"
    src.write_text(SNIPPET)
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                          "--config-file", str(ROOT / "pyproject.toml"), str(src)],
                         cwd=ROOT, capture_output=True, text=True).stdout
    lines = {line.split(":", 1)[1] for line in out.splitlines() if line.startswith(str(src))}
    assert '4: note: Revealed type is "int"' in lines, out
    assert any(line.startswith('5: error: Missing positional arguments "new", "why"') for line in lines), out
    assert any(line.startswith('6: error: Argument 1 to "Edit" has incompatible type "str"') for line in lines), out
    assert any(line.startswith('7: error: "Edit" has no attribute "nosuch"') for line in lines), out
