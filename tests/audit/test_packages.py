"""Package ownership (elfpatch.auditing.packages): dist-info RECORDs, conda-meta records, wheel names; malformed
records own nothing and never fail."""
from __future__ import annotations

import json
import os
from pathlib import Path

from elfpatch.auditing.packages import Owners, Package, wheel_package


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_record_paths_relative_to_the_site(tmp_path: Path) -> None:
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    lib = write(site / "foo" / "_foo.so", b"")
    tool = write(tmp_path / "env" / "bin" / "footool", b"")
    write(site / "foo_bar-2.0.dist-info" / "RECORD",
          "foo/_foo.so,sha256=x,0\n../../../bin/footool,,\nfoo_bar-2.0.dist-info/RECORD,,\n")
    owners = Owners()
    assert owners.of(str(lib)) == Package("foo_bar", "2.0")  # no METADATA: the directory's name
    assert owners.of(str(tool)) == Package("foo_bar", "2.0")
    assert owners.of(str(tool)) == Package("foo_bar", "2.0"), "asked twice"
    assert Owners().of(str(tool)) == Package("foo_bar", "2.0"), "asked first"
    assert owners.of(str(write(site / "foo" / "unlisted.so", b""))) is None
    # Relative paths, as a user types them, resolve the same way.
    cwd = os.getcwd()
    try:
        os.chdir(site)
        assert owners.of("foo/_foo.so") == Package("foo_bar", "2.0")
    finally:
        os.chdir(cwd)


def test_metadata_name_and_nearest_record_wins(tmp_path: Path) -> None:
    env = tmp_path / "env"
    site = env / "site-packages"
    lib = write(site / "torch" / "lib" / "libtorch.so", b"")
    write(site / "torch-2.1.0.dist-info" / "RECORD", "torch/lib/libtorch.so,,\n")
    write(site / "torch-2.1.0.dist-info" / "METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.1.0+cpu\n")
    write(env / "conda-meta" / "pytorch-2.1.0-py311.json",
          json.dumps({"name": "pytorch", "version": "2.1.0", "files": ["site-packages/torch/lib/libtorch.so",
                                                                       "lib/libomp.so"]}))
    omp = write(env / "lib" / "libomp.so", b"")
    owners = Owners()
    assert owners.of(str(lib)) == Package("torch", "2.1.0+cpu")
    assert owners.of(str(omp)) == Package("pytorch", "2.1.0")


def test_malformed_records_own_nothing(tmp_path: Path) -> None:
    lib = write(tmp_path / "pkg" / "_x.so", b"")
    write(tmp_path / "bad-1.dist-info" / "RECORD", b"pkg/_x.so\x00,\"unterminated\n\xff\xfe")
    write(tmp_path / "conda-meta" / "a.json", "[1, 2]")
    write(tmp_path / "conda-meta" / "b.json", json.dumps({"name": 3, "files": "pkg/_x.so"}))
    write(tmp_path / "conda-meta" / "c.json", json.dumps({"name": "c", "files": [None, 7, ""]}))
    (tmp_path / "nodir-1.dist-info").mkdir()
    assert Owners().of(str(lib)) is None
    assert Owners().of(str(tmp_path / "missing" / "file.so")) is None


def test_wheel_names() -> None:
    assert wheel_package("dist/torch-2.1.0+cpu-cp311-cp311-linux_x86_64.whl") == Package("torch", "2.1.0+cpu")
    assert wheel_package("scikit_learn-1.3.0-1-cp311-cp311-manylinux_2_17_x86_64.whl") == Package(
        "scikit_learn", "1.3.0")
    assert wheel_package("notawheel.zip") is None
    assert Owners().of("/x/pkg-1.0-py3-none-any.whl", "pkg/_x.so") == Package("pkg", "1.0")
