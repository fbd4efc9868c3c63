"""The dlopen/dlclose harness: load shared objects in a child process and get the results back as data.

    from elfpatch.harness import Session
    with Session() as s:
        h = s.open("build/libplugin.so")          # dlopen(RTLD_NOW|RTLD_LOCAL) in the child
        s.call(h, "plugin_load_count", "int(void)")
        s.close(h)                                # dlclose
        s.resident("build/libplugin.so")          # dlopen(RTLD_NOLOAD) probe
        s.why_resident("build/libplugin.so")      # the blockers, as dlcheck reports them
        s.debug().marks                           # LD_DEBUG: NODELETE marks, bindings, scopes
        s.import_module("numpy")                  # import a Python module in the child (as --import does)

``dlcheck(paths, imports=..., preloads=...)`` is the ``elfpatch dlcheck`` report; ``DlHarness`` is what the
pytest fixture ``dlharness`` hands a test. Names are imported on first use, so importing this package costs
nothing.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Session": "elfpatch.harness.session",
    "Exited": "elfpatch.harness.session",
    "HarnessError": "elfpatch.harness.session",
    "DlError": "elfpatch.harness.session",
    "ChildCrashed": "elfpatch.harness.session",
    "HarnessTimeout": "elfpatch.harness.session",
    "ImportFailed": "elfpatch.harness.session",
    "BadTimeout": "elfpatch.harness.session",
    "run": "elfpatch.harness.session",
    "LdDebug": "elfpatch.harness.lddebug",
    "Binding": "elfpatch.harness.lddebug",
    "NodeleteMark": "elfpatch.harness.lddebug",
    "dlcheck": "elfpatch.harness.dlcheck",
    "exit_status": "elfpatch.harness.dlcheck",
    "DlHarness": "elfpatch.harness.fixture",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'elfpatch.harness' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
