"""`dlcheck --import MODULE` and `--preload LIB` (issue 16, part 3): an extension module checked as Python loads
it, with a package of our own whose __init__ loads the library the extension needs."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import require_tool

from harness.conftest import dlcheck_cli

DEP = """
int pkgdep_value(void) { return 41; }
"""
EXT = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
int pkgdep_value(void);
static PyObject *value(PyObject *self, PyObject *args) { return PyLong_FromLong(pkgdep_value() + 1); }
static PyMethodDef methods[] = {{"value", value, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&module); }
"""
INIT = """
import ctypes, os
# The extension needs libpkgdep.so, which is nowhere on the loader's search path: load it first, as torch's
# __init__ loads libc10.so and libtorch before any extension of torchvision asks for them.
_dep = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "libpkgdep.so"))
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """<tmp>/pkgdemo: __init__.py, libpkgdep.so and the extension module _ext (DT_NEEDED libpkgdep.so, no
    runpath). Returns the directory that holds the package."""
    require_tool("gcc")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        pytest.skip(f"needs Python.h for {sys.executable} (not in {include})")
    root = tmp_path_factory.mktemp("site")
    pkg = root / "pkgdemo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(INIT)
    (root / "dep.c").write_text(DEP)
    (root / "ext.c").write_text(EXT)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libpkgdep.so", "-o", str(pkg / "libpkgdep.so"),
                    str(root / "dep.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", f"-I{include}", "-o", str(pkg / f"_ext{suffix}"),
                    str(root / "ext.c"), f"-L{pkg}", "-lpkgdep"], check=True)
    return root


def ext(package: Path) -> Path:
    return package / "pkgdemo" / f"_ext{sysconfig.get_config_var('EXT_SUFFIX')}"


def env_with(path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(path)}


def test_the_package_works_in_python(package: Path) -> None:
    """The layout is a real one: Python imports the extension after the package's __init__ ran."""
    proc = subprocess.run([sys.executable, "-c", "import pkgdemo._ext as e; print(e.value())"],
                          capture_output=True, text=True, env=env_with(package), check=True)
    assert proc.stdout.strip() == "42"


def test_without_import_the_extension_cannot_load(package: Path) -> None:
    rc, doc, err = dlcheck_cli(ext(package), env=env_with(package))
    assert rc == 2
    assert "libpkgdep.so: cannot open shared object file" in doc["files"][0]["error"]
    assert len(err.splitlines()) == 1


def test_import_loads_what_the_extension_needs(package: Path) -> None:
    rc, doc, err = dlcheck_cli(ext(package), options=["--import", "pkgdemo"], env=env_with(package))
    assert (rc, err) == (0, "")
    assert doc["imports"] == [{"module": "pkgdemo", "error": None}] and doc["preloads"] == []
    (entry,) = doc["files"]
    assert entry["unloads"] is True and entry["error"] is None
    # What the import loaded is no dependency of the PATH and does not count.
    assert not any("libpkgdep.so" in d["path"] for d in doc["dependencies"])


def test_import_resolves_from_the_working_directory(package: Path) -> None:
    """As `python -c` would: the working directory is on sys.path (not the harness's own folder)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    rc, doc, _ = dlcheck_cli(ext(package), options=["--import", "pkgdemo"], env=env, cwd=package)
    assert rc == 0 and doc["files"][0]["unloads"] is True


def test_preload_by_path_does_the_same(package: Path) -> None:
    dep = package / "pkgdemo" / "libpkgdep.so"
    rc, doc, _ = dlcheck_cli(ext(package), options=["--preload", str(dep)])
    assert rc == 0 and doc["preloads"] == [{"path": str(dep), "error": None}]
    assert doc["files"][0]["unloads"] is True


def test_both_appear_in_the_text_report(package: Path) -> None:
    dep = package / "pkgdemo" / "libpkgdep.so"
    rc, text, _ = dlcheck_cli(ext(package), human=True, options=["--import", "pkgdemo", "--preload", str(dep)],
                              env=env_with(package))
    assert rc == 0
    assert "--import pkgdemo: imported first (not judged)" in text
    assert f"--preload {dep}: opened first with RTLD_GLOBAL (not judged)" in text


def test_a_failed_import_or_preload_is_an_error(package: Path, tmp_path: Path) -> None:
    missing = tmp_path / "libmissing.so"
    rc, doc, err = dlcheck_cli(ext(package), options=["--import", "no_such_module_xyz", "--import", "pkgdemo",
                                                      "--preload", str(missing)], env=env_with(package))
    assert rc == 2
    assert doc["imports"][0]["error"].startswith("cannot import no_such_module_xyz: ModuleNotFoundError")
    assert doc["imports"][1]["error"] is None
    assert "cannot open shared object file" in doc["preloads"][0]["error"]
    assert doc["files"][0]["unloads"] is True  # the PATH is still checked
    lines = err.splitlines()
    assert lines == [f"elfpatch: error: --import no_such_module_xyz: {doc['imports'][0]['error']}",
                     f"elfpatch: error: {missing}: cannot open shared object file: No such file or directory"]


def test_a_module_that_exits_is_an_import_error(tmp_path: Path, unique_build: Path) -> None:
    (tmp_path / "quitter.py").write_text("raise SystemExit(3)\n")
    rc, doc, _ = dlcheck_cli(unique_build / "libuser.so", options=["--import", "quitter"], cwd=tmp_path)
    assert rc == 2 and doc["imports"][0]["error"] == "cannot import quitter: SystemExit: 3"
    assert doc["files"][0]["unloads"] is True


def test_sharing_statics_with_what_an_import_loaded_is_a_cross_binding(unique_build: Path, tmp_path: Path) -> None:
    """A module that loads libholder_v1.so (ctypes, RTLD_LOCAL as Python does): the PATH libholder_v2.so then
    shares v1's unique statics through the unique-symbol table, outside its scope. That counts: the PATH does
    not keep to itself in that process. v1 itself is not judged (the import loaded it)."""
    v1, v2 = unique_build / "libholder_v1.so", unique_build / "libholder_v2.so"
    (tmp_path / "loads_v1.py").write_text(f"import ctypes\nlib = ctypes.CDLL({str(v1)!r})\n")
    rc, doc, _ = dlcheck_cli(v2, options=["--import", "loads_v1"], cwd=tmp_path)
    assert rc == 1
    assert doc["files"][0]["unloads"] is True
    assert {(c["symbol"], c["file"], c["bound_to"]) for c in doc["cross_bindings"]} == {
        ("_ZN6HolderIiE5valueE", str(v2), str(v1)), ("_ZZ7countervE1c", str(v2), str(v1))}
    # With RTLD_GLOBAL the same definitions are in v2's scope (the global scope): no cross binding.
    (tmp_path / "loads_v1_global.py").write_text(
        f"import ctypes\nlib = ctypes.CDLL({str(v1)!r}, mode=ctypes.RTLD_GLOBAL)\n")
    rc, doc, _ = dlcheck_cli(v2, options=["--import", "loads_v1_global"], cwd=tmp_path)
    assert rc == 0 and doc["cross_bindings"] == [] and doc["out_of_scope_bindings"] == []


def test_a_crash_during_an_import_is_reported_on_the_import(unique_build: Path, tmp_path: Path) -> None:
    (tmp_path / "aborts.py").write_text("import os\nos.abort()\n")
    rc, doc, _ = dlcheck_cli(unique_build / "libuser.so", options=["--import", "aborts"], cwd=tmp_path)
    assert rc == 2
    assert "killed by SIGABRT during import aborts" in doc["imports"][0]["error"]
    assert doc["files"][0]["error"] == "not checked: the harness child died or hung while importing aborts"
