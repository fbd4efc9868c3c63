"""Helpers for the audit tests: lay out packages as pip installs them, run `elfpatch audit --json`."""
from __future__ import annotations

import base64
import hashlib
import shutil
from pathlib import Path

from helpers import run_main
from jsonschema_check import cli_json

# The packages of the fixture site-packages: name, version, {installed path: file in native_tests/audit/build}.
PACKAGES = {
    "pkga": ("1.0", {"pkga/_a.so": "_a.so"}),
    "pkgb": ("2.0", {"pkgb/_b.so": "_b.so"}),
    "pkgc": ("1.0", {"pkgc/libcore.so": "libcore.so", "pkgc/_c.so": "_c.so"}),
}
SLOTS, NAME, INSTANCES = "_ZN8RegistryIiE5slotsE", "_ZN8RegistryIiE4nameE", "_ZZ9instancesvE1n"


def record_row(root: Path, rel: str) -> str:
    data = (root / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}\n"


def install(root: Path, name: str, version: str, files: dict[str, bytes | Path]) -> Path:
    """One package as pip leaves it: its files, and NAME-VERSION.dist-info with METADATA and RECORD."""
    for rel, content in files.items():
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(content, dst)
        else:
            dst.write_bytes(content)
    info = root / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nA package.\n")
    rows = [record_row(root, rel) for rel in files] + [record_row(root, f"{info.name}/METADATA"),
                                                       f"{info.name}/RECORD,,\n"]
    (info / "RECORD").write_text("".join(rows))
    return info


def site_packages(root: Path, build: Path) -> Path:
    root.mkdir(parents=True)
    for name, (version, files) in PACKAGES.items():
        install(root, name, version, {rel: build / src for rel, src in files.items()})
        (root / name / "__init__.py").write_text("")
    return root


def audit_json(*args: str) -> tuple[int, dict]:
    proc = run_main("audit", "--json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, cli_json(proc.stdout)


def by_symbol(doc: dict) -> dict[str, dict]:
    return {c["symbol"]: c for c in doc["collisions"]}


def rel(entry: dict, root: Path) -> str:
    return str(Path(entry["path"]).relative_to(root))
