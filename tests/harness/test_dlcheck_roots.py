"""Still-referenced chains followed to their roots, and advice that works (issue 16, part 2): the lightgbm case
(a plugin exporting its static libstdc++), checked against LD_DEBUG and against what each fix really does."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest
from conftest import require_tool
from helpers import run_main

from elfpatch.harness import Session
from elfpatch.harness.blockers import is_system
from harness.conftest import dlcheck_cli


def blocker(entry: dict, kind: str) -> dict:
    (found,) = [b for b in entry["blockers"] if b["kind"] == kind]
    return found


def libstdcxx(log_objects: list[str]) -> str:
    (path,) = [p for p in log_objects if "/libstdc++.so" in p]
    return path


@pytest.fixture(scope="module")
def patched_plugins(dl_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libstaticcxx.so and libstaticcxx_full.so after `elfpatch unique`, beside libcxxhelper.so."""
    out = tmp_path_factory.mktemp("patched_cxx")
    shutil.copy(dl_build / "libcxxhelper.so", out / "libcxxhelper.so")
    for name in ("libstaticcxx.so", "libstaticcxx_full.so"):
        run_main("unique", "-o", str(out / name), str(dl_build / name), check=True)
    return out


def test_the_loader_binds_libstdcxx_to_the_plugins_copies(dl_build: Path) -> None:
    """What the fixture reproduces, in the loader's words: libstdc++ binds its own references to the plugin's
    exported copies (relocation dependency) and is marked NODELETE by unique symbols of its own."""
    plugin = str(dl_build / "libstaticcxx.so")
    with Session() as s:
        s.open(plugin)
        system = libstdcxx(s.loaded())
        log = s.debug()
    to_plugin = {b.symbol for b in log.bindings if b.file == system and b.bound_to == plugin}
    assert "_ZNSt5ctypeIcE2idE" in to_plugin  # std::ctype<char>::id, a locale facet's id
    assert any(d.path == plugin and d.needed_by == system and d.relocation for d in log.dependencies)
    assert log.nodelete(system, "unique symbol")


def test_root_cause_names_libstdcxx_and_never_suggests_unique(dl_build: Path) -> None:
    plugin = dl_build / "libstaticcxx.so"
    rc, doc, _ = dlcheck_cli(plugin)
    assert rc == 1
    (entry,) = doc["files"]
    held = blocker(entry, "still-referenced")
    (root,) = [r for r in held["roots"] if r["never_unloads"]]
    assert "/libstdc++.so" in root["path"] and root["system"] and is_system(root["path"])
    assert "NODELETE" in root["never_unloads"]
    (link,) = root["chain"]
    assert link["object"] == root["path"] and link["holds"] == str(plugin)
    assert "relocation dependency" in link["reasons"]
    assert link["symbol_count"] > 0 and link["own_symbols"] is True and link["symbols"]
    rc, text, _ = dlcheck_cli(plugin, human=True)
    assert f"`elfpatch unique {plugin}`" not in text
    assert "`elfpatch unique` alone would not make it unload" in text
    assert "-Wl,--exclude-libs,ALL" in text and "version script" in text
    assert "--preload libstdc++.so.6" in text and "`elfpatch unique` cannot help" in text
    assert f"root {root['path']}: " in text


def test_each_piece_of_advice_is_true(dl_build: Path, patched_plugins: Path) -> None:
    """elfpatch unique would not help (the patched plugin still stays); hiding libstdc++'s symbols or loading
    libstdc++ first does (both unload)."""
    rc, doc, _ = dlcheck_cli(patched_plugins / "libstaticcxx.so")
    assert rc == 1 and doc["files"][0]["unloads"] is False
    assert [b["kind"] for b in doc["files"][0]["blockers"]] == ["still-referenced"]
    rc, doc, _ = dlcheck_cli(dl_build / "libstaticcxx_hidden.so")
    assert rc == 0 and doc["files"][0]["unloads"] is True
    rc, doc, _ = dlcheck_cli(dl_build / "libstaticcxx.so", options=["--preload", "libstdc++.so.6"])
    assert rc == 0 and doc["files"][0]["unloads"] is True
    assert doc["preloads"] == [{"path": "libstdc++.so.6", "error": None}]


@pytest.mark.parametrize("name", ["libstaticcxx.so", "libstaticcxx_full.so"])
def test_unique_is_suggested_exactly_where_it_helps(name: str, dl_build: Path, patched_plugins: Path) -> None:
    """The guarantee itself: dlcheck suggests `elfpatch unique` on the plugin if and only if the patched plugin
    unloads. With libstaticcxx_full.so (where the plugin's copies preempt every unique symbol of the system
    libstdc++, which is then never marked, as when both come from the same GCC) it is the fix."""
    plugin = dl_build / name
    rc, text, _ = dlcheck_cli(plugin, human=True)
    assert rc == 1
    suggested = f"`elfpatch unique {plugin}`" in text
    rc, doc, _ = dlcheck_cli(patched_plugins / name)
    assert suggested == (doc["files"][0]["unloads"] is True)
    if name == "libstaticcxx.so":
        assert not suggested


def test_same_gcc_full_export_is_fixed_by_unique(dl_build: Path, patched_plugins: Path) -> None:
    """On this toolchain (g++'s libstdc++.a and the system libstdc++.so of one GCC release) the fully exported
    plugin is the case where `elfpatch unique` helps: the suggestion is there, and the patched plugin unloads."""
    plugin = dl_build / "libstaticcxx_full.so"
    rc, doc, _ = dlcheck_cli(plugin)
    (entry,) = doc["files"]
    if any(r["never_unloads"] for b in entry["blockers"] for r in b.get("roots", [])):
        pytest.skip("the system libstdc++ is newer than g++'s static one: it keeps unique symbols of its own")
    rc, text, _ = dlcheck_cli(plugin, human=True)
    assert f"`elfpatch unique {plugin}`" in text
    rc, doc, _ = dlcheck_cli(patched_plugins / "libstaticcxx_full.so")
    assert rc == 0 and doc["files"][0]["unloads"] is True


PIN = """
int user_value(void);
int pin_value(void) { return user_value(); }
"""


def test_a_chain_to_a_nodelete_root(unique_build: Path, patched: Path, build_lib: Callable[..., Path]) -> None:
    """libuser.so (unloadable) <- libpin.so (DT_NEEDED, -z nodelete): the chain names the link's reason and the
    root; the advice does not send the user to `elfpatch unique`."""
    pin = build_lib("libpin_roots", PIN, f"-L{patched}", "-l:libuser.so", f"-Wl,-rpath,{patched}",
                    "-Wl,-z,nodelete")
    user = patched / "libuser.so"
    rc, doc, _ = dlcheck_cli(user, pin)
    assert rc == 1
    held = blocker(doc["files"][0], "still-referenced")
    (root,) = held["roots"]
    assert root["path"] == str(pin) and root["kinds"] == ["nodelete-flag"] and root["never_unloads"]
    assert [(link["object"], link["holds"], link["reasons"]) for link in root["chain"]] == [
        (str(pin), str(user), ["DT_NEEDED"])]
    assert held["links"][0]["reasons"] == ["DT_NEEDED"]
    rc, text, _ = dlcheck_cli(user, pin, human=True)
    assert f"`elfpatch unique {user}`" not in text
    assert f"it is still needed by {pin} (DT_NEEDED), which stayed loaded." in text


BASE = "int base_value(void) { return 3; }\n"
UNIQUE_USER = """
template <class T> struct Counter { static int value; };
template <class T> int Counter<T>::value = 1;
extern "C" int base_value(void);
extern "C" int bump(void) { return ++Counter<int>::value + base_value(); }
"""


def test_a_chain_to_a_unique_root_suggests_patching_the_root(build_lib: Callable[..., Path],
                                                              tmp_path: Path) -> None:
    """libbase.so stays only because libuniq.so, which needs it, stays for its unique symbol: patch the
    root, not the held library; after that both unload."""
    require_tool("g++")
    base = build_lib("libbase_roots", BASE, "-Wl,-soname,libbase_roots.so")
    src = tmp_path / "uniq.cpp"
    src.write_text(UNIQUE_USER)
    uniq = tmp_path / "libuniq.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", str(uniq), str(src), f"-L{base.parent}",
                    "-l:libbase_roots.so", f"-Wl,-rpath,{base.parent}"], check=True)
    rc, doc, _ = dlcheck_cli(base, uniq)
    assert rc == 1
    held = blocker(doc["files"][0], "still-referenced")
    (root,) = held["roots"]
    assert (root["path"], root["kinds"], root["never_unloads"]) == (str(uniq), ["unique-symbol"], None)
    rc, text, _ = dlcheck_cli(base, uniq, human=True)
    assert f"it goes when {uniq} goes: run `elfpatch unique` on it" in text
    assert f"`elfpatch unique {base}`" not in text
    run_main("unique", str(uniq), check=True)
    rc, doc, _ = dlcheck_cli(base, uniq)
    assert rc == 0 and [f["unloads"] for f in doc["files"]] == [True, True]


def test_python_packages_under_usr_are_not_system_libraries() -> None:
    """pip installs into /usr/local/lib/python3.X/dist-packages: those libraries are the user's to patch, and
    advice must not treat them as the distribution's."""
    assert is_system("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    assert not is_system("/usr/local/lib/python3.11/dist-packages/torch/lib/libc10.so")
    assert not is_system("/usr/lib/python3/dist-packages/numpy/fft/_pocketfft_umath.so")
    assert not is_system("/opt/app/lib/libplugin.so")
