"""The README's pytest-plugin example `test_reload_starts_fresh`, run as written against a plugin that counts its
loads in a constructor: it must fail while the plugin never unloads (a unique static pins it) and pass once
`elfpatch unique` has patched it."""
from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

PLUGIN = r"""
static int loads;
__attribute__((constructor)) static void on_load(void) { ++loads; }
extern "C" int plugin_load_count(void) { return loads; }
inline int &pinned() { static int n; return n; }  // a static local of an inline function: STB_GNU_UNIQUE
extern "C" int touch(void) { return ++pinned(); }
"""


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^    def test_reload_starts_fresh\(dlharness\):\n(?:        .*\n)+", text, re.M)
    assert m, "the README's example"
    return textwrap.dedent(m.group(0))


def test_readme_reload_example_fails_while_the_plugin_stays_resident(dlharness, tmp_path: Path) -> None:
    """Guarantee: the example catches a plugin that never unloads at the first close that leaves it resident
    (its in-loop `== 1` alone passed there: a constructor's count stays 1 when the library is never loaded
    again, so the second iteration "started fresh" without a reload)."""
    src = tmp_path / "plugin.cpp"
    src.write_text(PLUGIN)
    lib = tmp_path / "build" / "myplugin.so"
    lib.parent.mkdir()
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to build the plugin")
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    namespace: dict = {}
    exec(_readme_example().replace("build/myplugin.so", str(lib)), namespace)  # the README's own code, as written
    example = namespace["test_reload_starts_fresh"]
    opens = _CountingHarness(dlharness)
    with pytest.raises(AssertionError):
        example(opens)  # pinned by its unique symbol: never unloads
    assert opens.opens == 1, "the first close that did not unload fails the example, before a reload is trusted"
    run_cli("unique", str(lib), check=True)
    example(dlharness)


class _CountingHarness:
    """dlharness whose sessions count their dlopen calls."""

    def __init__(self, harness) -> None:
        self.harness = harness
        self.opens = 0

    def session(self):
        outer, session = self, self.harness.session()

        class Counting:
            def __getattr__(self, name: str):
                return getattr(session, name)

            def open(self, *args, **kwargs):
                outer.opens += 1
                return session.open(*args, **kwargs)

        return Counting()
