"""The pytest plugin: installed through the pytest11 entry point, cheap to import, usable as documented."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

USER_TEST = '''
import pytest

PLUGIN = {plugin!r}
V1, V2 = {v1!r}, {v2!r}


def test_my_plugin_unloads(dlharness):
    assert not dlharness.unloads(PLUGIN, calls=["plugin_load_count"])  # it is the unpatched fixture


def test_modules_share_state(dlharness):
    shared = dlharness.cross_bindings(V1, V2)
    assert {{b["symbol"] for b in shared}} == {{"_ZN6HolderIiE5valueE", "_ZZ7countervE1c"}}


def test_session(dlharness):
    s = dlharness.session()
    h = s.open(V1)
    assert s.call(h, "holder_value", "int(void)") == 1
'''


def test_entry_point_is_registered() -> None:
    from importlib.metadata import entry_points

    eps = entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    assert any(ep.value == "elfpatch.harness.pytest_plugin" for ep in group)


def test_importing_the_plugin_loads_nothing_heavy() -> None:
    code = ("import sys, elfpatch.harness.pytest_plugin as p; "
            "print(sorted(m for m in sys.modules if m.startswith(('elfpatch.', 'cffi', '_cffi'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['elfpatch.harness', 'elfpatch.harness.pytest_plugin', 'elfpatch.version']"


@pytest.mark.slow  # a pytest run in a child
def test_a_users_test_file(pytester: pytest.Pytester, unique_build: Path) -> None:
    pytester.makepyfile(USER_TEST.format(plugin=str(unique_build / "libplugin.so"),
                                         v1=str(unique_build / "libholder_v1.so"),
                                         v2=str(unique_build / "libholder_v2.so")))
    # A subprocess, so that only the installed entry point (no conftest, no -p) can provide the fixture.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
