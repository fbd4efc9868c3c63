"""Permissions and file-system refusals, for real, as root and as user nobody: file capabilities, owner, mode
and xattrs kept; read-only files, unwritable directories, a read-only mount, a running executable
(ETXTBSY) and chattr +i/+a. A refusal must be exit 2, one `elfpatch: error: PATH: reason` line, the file
byte-identical and no temp file left."""
from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest
from conftest import NOBODY, require_tool, run_as_nobody, run_cli

from unique.helpers import temps

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown, setcap, mount, setpriv")]

CAP = "security.capability"
UNIQUE_SRC = """\
// Blocks on stdin. The static local of an inline function is an STB_GNU_UNIQUE object.
#include <unistd.h>
inline int &counter() { static int c = 0; return c; }
int main() { char b; ++counter(); return static_cast<int>(read(0, &b, 1)) + counter() - 1; }
"""
MODES = pytest.mark.parametrize("how", [[], ["--inplace"]], ids=["default", "inplace"])


def need(*tools: str) -> None:
    require_tool(*tools, packages="libcap2-bin, e2fsprogs, util-linux, g++, binutils")


Runner = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def as_nobody(nobody_python: tuple[str, Path]) -> Runner:
    return lambda *args: run_as_nobody(nobody_python, *args)


def assert_refused(proc: subprocess.CompletedProcess, path: Path, before: bytes, reason: str) -> None:
    """The failure contract: exit 2, one stderr line naming the file and why, file and directory untouched."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"elfpatch: error: {path}: "), lines[0]
    assert reason.lower() in lines[0].lower(), lines[0]
    assert "Traceback" not in proc.stderr
    assert path.read_bytes() == before
    assert temps(path.parent) == []


def meta(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


@pytest.fixture(scope="module")
def patched_lib(unique_build: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """What a correct patch of libholder_v1.so looks like: `-o` from the untouched build output."""
    out = tmp_path_factory.mktemp("expected") / "libholder_v1.so"
    run_cli("unique", "-o", str(out), str(unique_build / "libholder_v1.so"), check=True)
    data = out.read_bytes()
    assert data != (unique_build / "libholder_v1.so").read_bytes()
    return data


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A fresh 0755 directory under /tmp: nobody cannot reach tmp_path (below 0700 /tmp/pytest-of-root)."""
    d = Path(tempfile.mkdtemp(prefix="elfpatch-perm-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d)


# -- metadata kept -------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["default", "inplace", "output"])
def test_file_capability_kept(lib: Path, patched_lib: bytes, tmp_path: Path, how: str) -> None:
    need("setcap", "getcap")
    # Owned by nobody: the copy's fchown to nobody would clear a capability set before it.
    os.chown(lib, NOBODY, NOBODY)
    subprocess.run(["setcap", "cap_net_raw+ep", str(lib)], check=True)
    raw = os.getxattr(lib, CAP)
    before, mode = lib.read_bytes(), meta(lib)[2]
    target, args = lib, [str(lib)]
    if how == "inplace":
        args = ["--inplace", str(lib)]
    elif how == "output":
        (tmp_path / "out").mkdir()
        target = tmp_path / "out" / "patched.so"
        args = ["-o", str(target), str(lib)]
    run_cli("unique", *args, check=True)
    assert target.read_bytes() == patched_lib
    assert CAP in os.listxattr(target), f"{how}: the file capability is gone"
    assert os.getxattr(target, CAP) == raw
    getcap = subprocess.run(["getcap", str(target)], capture_output=True, text=True, check=True).stdout
    assert "cap_net_raw=ep" in getcap, getcap
    if how == "output":
        # -o copies mode and every xattr (as `cp --preserve=mode,xattr`), not the owner; PATH is untouched.
        assert meta(target) == (os.getuid(), os.getgid(), mode)
        assert lib.read_bytes() == before and os.getxattr(lib, CAP) == raw
    else:
        assert meta(target) == (NOBODY, NOBODY, mode)


def test_output_of_capability_file_as_non_root_is_refused(open_dir: Path, unique_build: Path,
                                                          as_nobody: Runner) -> None:
    """Setting security.capability needs CAP_SETFCAP: rather than drop it from OUT silently, -o refuses."""
    need("setcap")
    src = open_dir / "libholder_v1.so"
    shutil.copy(unique_build / "libholder_v1.so", src)
    subprocess.run(["setcap", "cap_net_raw+ep", str(src)], check=True)
    out = open_dir / "out"
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)
    proc = as_nobody("unique", "-o", str(out / "patched.so"), str(src))
    assert_refused(proc, src, src.read_bytes(), f"cannot keep extended attribute {CAP}")
    assert list(out.iterdir()) == [], "no OUT and no temp file beside it"


@pytest.mark.parametrize("mode", [0o754, 0o2755, 0o4755], ids=lambda m: f"{m:04o}")
@MODES
def test_owner_group_mode_xattr_kept(lib: Path, patched_lib: bytes, mode: int, how: list[str]) -> None:
    os.chown(lib, NOBODY, NOBODY)  # before chmod: a chown clears set-id bits
    os.chmod(lib, mode)
    try:
        os.setxattr(lib, "user.elfpatch.test", b"kept")
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        pytest.skip(f"no user.* xattrs on the file system of {lib.parent}")
    ino = os.stat(lib).st_ino
    run_cli("unique", *how, str(lib), check=True)
    assert meta(lib) == (NOBODY, NOBODY, mode)
    assert os.getxattr(lib, "user.elfpatch.test") == b"kept"
    assert lib.read_bytes() == patched_lib
    # The default mode renamed a new inode into place; --inplace wrote into the old one.
    assert (os.stat(lib).st_ino == ino) == bool(how)
    assert temps(lib.parent) == []


def test_inplace_as_owner_keeps_setuid(open_dir: Path, unique_build: Path, patched_lib: bytes,
                                       as_nobody: Runner) -> None:
    """A write by a process without CAP_FSETID makes the kernel clear S_ISUID: the owner puts it back."""
    f = open_dir / "libholder_v1.so"
    shutil.copy(unique_build / "libholder_v1.so", f)
    os.chown(f, NOBODY, NOBODY)
    os.chmod(f, 0o4755)
    proc = as_nobody("unique", "--inplace", str(f))
    assert proc.returncode == 0, proc.stderr
    assert f.read_bytes() == patched_lib
    assert meta(f) == (NOBODY, NOBODY, 0o4755)


def test_inplace_refuses_what_it_could_not_restore(open_dir: Path, unique_build: Path, as_nobody: Runner) -> None:
    """Without the privilege to put back what a write drops — a file capability (CAP_SETFCAP), a set-user-ID
    bit on another user's file — --inplace refuses before writing, rather than drop it silently."""
    need("setcap")
    cap_file = open_dir / "libcap.so"
    shutil.copy(unique_build / "libholder_v1.so", cap_file)
    os.chown(cap_file, NOBODY, NOBODY)
    subprocess.run(["setcap", "cap_net_raw+ep", str(cap_file)], check=True)
    raw = os.getxattr(cap_file, CAP)
    assert_refused(as_nobody("unique", "--inplace", str(cap_file)), cap_file, cap_file.read_bytes(),
                   f"would drop its file capability ({CAP})")
    assert os.getxattr(cap_file, CAP) == raw
    suid = open_dir / "libsuid.so"
    shutil.copy(unique_build / "libholder_v1.so", suid)
    suid.chmod(0o4777)  # root's, yet writable by anyone: nobody may write it but not chmod it back
    assert_refused(as_nobody("unique", "--inplace", str(suid)), suid, suid.read_bytes(),
                   "would drop its set-user-ID or set-group-ID bit")
    assert meta(suid) == (0, 0, 0o4777)


# -- read-only files and directories --------------------------------------------------------------------

@MODES
def test_read_only_file_as_root(lib: Path, patched_lib: bytes, how: list[str]) -> None:
    """Root's DAC override opens a 0444 file for writing too: both modes patch it and keep 0444."""
    lib.chmod(0o444)
    run_cli("unique", *how, str(lib), check=True)
    assert lib.read_bytes() == patched_lib
    assert meta(lib)[2] == 0o444
    assert temps(lib.parent) == []


def test_read_only_file_of_nobody_in_writable_dir(open_dir: Path, unique_build: Path, patched_lib: bytes,
                                                  as_nobody: Runner) -> None:
    d = open_dir / "shared"
    d.mkdir()
    d.chmod(0o777)
    f = d / "libholder_v1.so"
    shutil.copy(unique_build / "libholder_v1.so", f)
    os.chown(f, NOBODY, NOBODY)
    f.chmod(0o444)
    before = f.read_bytes()
    # --inplace opens the file itself for writing: refused.
    assert_refused(as_nobody("unique", "--inplace", str(f)), f, before, "permission denied")
    # The default mode needs only the directory: like `sed -i`, the rename replaces the read-only file.
    proc = as_nobody("unique", str(f))
    assert proc.returncode == 0, proc.stderr
    assert f.read_bytes() == patched_lib
    assert meta(f) == (NOBODY, NOBODY, 0o444)
    assert temps(d) == []


def test_file_of_another_user_in_writable_dir(open_dir: Path, unique_build: Path, as_nobody: Runner) -> None:
    """The directory would let nobody rename over root's file; elfpatch refuses, as it cannot keep the owner."""
    d = open_dir / "shared"
    d.mkdir()
    d.chmod(0o777)
    f = d / "libholder_v1.so"
    shutil.copy(unique_build / "libholder_v1.so", f)
    f.chmod(0o644)
    before = f.read_bytes()
    assert_refused(as_nobody("unique", str(f)), f, before, "cannot keep its owner and group")
    assert_refused(as_nobody("unique", "--inplace", str(f)), f, before, "permission denied")
    assert meta(f) == (0, 0, 0o644)


def test_directory_without_write_permission(open_dir: Path, unique_build: Path, patched_lib: bytes,
                                            as_nobody: Runner) -> None:
    d = open_dir / "ro"
    d.mkdir()
    f = d / "libholder_v1.so"
    shutil.copy(unique_build / "libholder_v1.so", f)
    os.chown(f, NOBODY, NOBODY)
    os.chown(d, NOBODY, NOBODY)
    d.chmod(0o555)
    before = f.read_bytes()
    # No temp file can be created beside it.
    assert_refused(as_nobody("unique", str(f)), f, before, "permission denied")
    proc = as_nobody("unique", "--check", str(f))
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert f.read_bytes() == before
    # The file itself is writable by its owner: --inplace patches it, same inode.
    ino = os.stat(f).st_ino
    proc = as_nobody("unique", "--inplace", str(f))
    assert proc.returncode == 0, proc.stderr
    assert f.read_bytes() == patched_lib and os.stat(f).st_ino == ino
    assert temps(d) == []


# -- read-only mount ------------------------------------------------------------------------------------

@pytest.fixture
def ro_lib(unique_build: Path) -> Iterator[Path]:
    """libholder_v1.so on a tmpfs remounted read-only; unmounted afterwards whatever happens."""
    mnt = Path(tempfile.mkdtemp(prefix="elfpatch-ro-", dir="/tmp"))
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        f = mnt / "libholder_v1.so"
        shutil.copy(unique_build / "libholder_v1.so", f)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        yield f
    finally:
        if subprocess.run(["umount", str(mnt)]).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=True)
        mnt.rmdir()


@MODES
def test_read_only_filesystem_refused(ro_lib: Path, how: list[str]) -> None:
    before = ro_lib.read_bytes()
    assert_refused(run_cli("unique", *how, str(ro_lib)), ro_lib, before, "read-only file system")


def test_read_only_filesystem_check_and_output(ro_lib: Path, tmp_path: Path, patched_lib: bytes) -> None:
    before = ro_lib.read_bytes()
    proc = run_cli("unique", "--check", str(ro_lib))
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    out = tmp_path / "out.so"
    run_cli("unique", "-o", str(out), str(ro_lib), check=True)
    assert out.read_bytes() == patched_lib
    assert ro_lib.read_bytes() == before
    assert temps(tmp_path) == []


# -- a running executable ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def waiter_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PIE that blocks on stdin and has an STB_GNU_UNIQUE symbol (unique_exe exits at once)."""
    need("g++", "readelf")
    d = tmp_path_factory.mktemp("waiter")
    (d / "waiter.cpp").write_text(UNIQUE_SRC)
    subprocess.run(["g++", "-O0", "-o", str(d / "waiter"), str(d / "waiter.cpp")], check=True)
    syms = subprocess.run(["readelf", "-sW", str(d / "waiter")], capture_output=True, text=True, check=True).stdout
    assert any(" UNIQUE " in line and "_ZZ7countervE1c" in line for line in syms.splitlines()), syms
    return d / "waiter"


def test_running_executable(waiter_build: Path, tmp_path: Path) -> None:
    exe = tmp_path / "waiter"
    shutil.copy(waiter_build, exe)
    expected = tmp_path / "expected"
    run_cli("unique", "-o", str(expected), str(waiter_build), check=True)
    before = exe.read_bytes()
    assert expected.read_bytes() != before
    proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE)  # Popen returns once exec has succeeded
    try:
        try:
            fd = os.open(exe, os.O_RDWR)
        except OSError as exc:
            assert exc.errno == errno.ETXTBSY, exc
        else:
            os.close(fd)
            pytest.skip("this kernel lets a running executable be opened for writing (no ETXTBSY)")
        assert_refused(run_cli("unique", "--inplace", str(exe)), exe, before, "text file busy")
        assert proc.poll() is None
        # The default mode renames a new file over the name; the process keeps running the old inode.
        run_cli("unique", str(exe), check=True)
        assert exe.read_bytes() == expected.read_bytes()
        assert temps(tmp_path) == []
        assert proc.poll() is None
        assert os.readlink(f"/proc/{proc.pid}/exe").endswith(" (deleted)")
        assert proc.stdin is not None
        proc.stdin.close()  # EOF: it exits 0
        assert proc.wait(timeout=10) == 0
        assert subprocess.run([str(exe)], stdin=subprocess.DEVNULL, timeout=10).returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- chattr +i / +a ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("attr", ["i", "a"], ids=["immutable", "append-only"])
@MODES
def test_immutable_or_append_only_file(lib: Path, attr: str, how: list[str]) -> None:
    """The kernel refuses both the rename over such a file and opening it for writing (EPERM), even to root."""
    need("chattr")
    before = lib.read_bytes()
    proc = subprocess.run(["chattr", f"+{attr}", str(lib)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"chattr +{attr} does not work on the file system of {lib.parent}: {proc.stderr.strip()}")
    try:
        assert_refused(run_cli("unique", *how, str(lib)), lib, before, "operation not permitted")
    finally:
        subprocess.run(["chattr", f"-{attr}", str(lib)], check=True)
