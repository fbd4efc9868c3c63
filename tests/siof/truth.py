"""Run-time truth for the siof fixtures: what the LD_PRELOAD shim logs (native_tests/siof/shim.c)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SIOF = Path(__file__).resolve().parents[2] / "native_tests" / "siof" / "build"
A64_SYSROOT = "/usr/aarch64-linux-gnu"


def runner(variant: str) -> list[str] | None:
    """The command prefix that runs a variant's programs: none natively, qemu for AArch64 (None: cannot)."""
    if variant.startswith("a64-"):
        qemu = shutil.which("qemu-aarch64")
        if not qemu or not os.path.isdir(A64_SYSROOT):
            return None
        return [qemu, "-L", A64_SYSROOT]
    return []


def registrations(variant: str, target: str) -> list[tuple[str, str, str]]:
    """(kind, dtor, object) for every registration the target (``dtors`` or ``libdtors.so``) makes at load."""
    d = SIOF / variant
    prefix = runner(variant)
    assert prefix is not None
    prog = [str(d / "dtors")] if target == "dtors" else [str(d / "dlopen_driver"), str(d / target)]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SHIM_LOG": str(log), "SHIM_TARGET": target}
        if prefix:  # qemu passes its own environment on; the guest's LD_PRELOAD goes with -E
            cmd = prefix + ["-E", f"LD_PRELOAD={d / 'shim.so'}", "-E", f"SHIM_LOG={log}", "-E",
                            f"SHIM_TARGET={target}"] + prog
        else:
            env["LD_PRELOAD"] = str(d / "shim.so")
            cmd = prog
        subprocess.run(cmd, env=env, check=True, timeout=120, capture_output=True)
        lines = log.read_text().splitlines() if log.exists() else []
    return [tuple(line.split(" ")) for line in lines]  # type: ignore[misc]
