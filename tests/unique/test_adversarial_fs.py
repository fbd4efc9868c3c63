"""Adversarial file systems and inputs: permissions never widened, nothing hangs or crashes, the report tells
the truth, no spurious failure. Each test names the guarantee it attacks; each runs the CLI as root and as
nobody (the package copied where nobody can reach it, tests/unique/adversary.py)."""
from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path
from typing import Iterator

import pytest
from jsonschema_check import cli_json
from targets.helpers import DIST, build_wheel, wheel_files

from unique.adversary import NOBODY, USERS, arena, give, need_user, one_error_line, run, start, temps_in

pytestmark = pytest.mark.root


@pytest.fixture
def box(request: pytest.FixtureRequest) -> Iterator[Path]:
    """An arena for the test's ``user`` parameter, removed afterwards (immutable flags dropped first)."""
    user = request.node.callspec.params.get("user", "root")
    need_user(user)
    d = arena(user)
    yield d
    subprocess.run(["chattr", "-R", "-i", "-a", str(d)], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


def put(data: bytes, path: Path, user: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return give(path, user)


def chattr(flag: str, path: Path) -> None:
    proc = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"chattr {flag} not supported here: {proc.stderr.strip()}")


# -- 3. Never widen permissions ---------------------------------------------------------------------------

def acl(*entries: tuple[int, int, int]) -> bytes:
    """The kernel's xattr form of a POSIX ACL (version 2; tag, permissions, id)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


UNDEF = 0xFFFFFFFF
USER_OBJ, USER, GROUP_OBJ, MASK, OTHER = 1, 2, 4, 0x10, 0x20


@USERS
def test_directory_default_acl_never_reaches_the_new_file(user: str, box: Path, original: bytes) -> None:
    """Guarantee: never widen permissions. The directory's default ACL grants a third user read access; the
    0750 original has no ACL. The patched file has exactly the original's permissions: mode 0750, no access
    ACL, so the third user still cannot read it."""
    lib = put(original, box / "lib.so", user, 0o750)
    try:
        os.setxattr(box, "system.posix_acl_default",
                    acl((USER_OBJ, 7, UNDEF), (USER, 5, 4242), (GROUP_OBJ, 5, UNDEF), (MASK, 5, UNDEF),
                        (OTHER, 5, UNDEF)))
    except OSError as exc:
        pytest.skip(f"no POSIX ACLs here: {exc.strerror}")
    proc = run(user, "unique", str(lib))
    assert proc.returncode == 0, proc.stderr
    assert "system.posix_acl_access" not in os.listxattr(lib)
    assert oct(lib.stat().st_mode & 0o7777) == oct(0o750)
    probe = subprocess.run(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "cat", str(lib)],
                           capture_output=True)
    assert probe.returncode != 0, "a third user reads the patched file"


@USERS
def test_original_access_acl_is_kept_exactly(user: str, box: Path, original: bytes) -> None:
    """Guarantee: never widen (nor narrow) permissions. A file with its own access ACL keeps exactly that ACL,
    whatever the directory's default."""
    lib = put(original, box / "lib.so", user, 0o640)
    mine = acl((USER_OBJ, 6, UNDEF), (USER, 4, 4243), (GROUP_OBJ, 4, UNDEF), (MASK, 4, UNDEF), (OTHER, 0, UNDEF))
    try:
        os.setxattr(lib, "system.posix_acl_access", mine)
        os.setxattr(box, "system.posix_acl_default",
                    acl((USER_OBJ, 7, UNDEF), (USER, 7, 4242), (GROUP_OBJ, 7, UNDEF), (MASK, 7, UNDEF),
                        (OTHER, 7, UNDEF)))
    except OSError as exc:
        pytest.skip(f"no POSIX ACLs here: {exc.strerror}")
    proc = run(user, "unique", str(lib))
    assert proc.returncode == 0, proc.stderr
    assert os.getxattr(lib, "system.posix_acl_access") == mine
    assert oct(lib.stat().st_mode & 0o7777) == oct(0o640)


# -- 4. Never hang, never crash ---------------------------------------------------------------------------

@USERS
def test_lock_wait_is_bounded_and_names_the_holder(user: str, box: Path, original: bytes) -> None:
    """Guarantee: never hang. Any process that can read a file can hold a lock on it; a writing run waits at
    most --lock-timeout, then gives one line naming the holder, leaves the file as it is and goes on with the
    next PATH."""
    lib = put(original, box / "lib.so", user)
    other = put(original, box / "other.so", user)
    fd = os.open(lib, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        proc = run(user, "unique", "--lock-timeout", "0.2", str(lib), str(other))
    finally:
        os.close(fd)
    one_error_line(proc, lib, "lock", f"held by pid {os.getpid()}")
    assert lib.read_bytes() == original and other.read_bytes() != original
    assert run(user, "unique", "--lock-timeout", "soon", str(lib)).returncode == 2


@USERS
def test_thin_archive_naming_a_fifo_does_not_block(user: str, box: Path, original: bytes) -> None:
    """Guarantee: no open blocks. A thin archive names a FIFO (no writer ever comes): --check and the default
    mode report it as not a regular file instead of blocking in open()."""
    member = put(original, box / "member.o", user)
    subprocess.run(["ar", "rcT", str(box / "thin.a"), "member.o"], cwd=box, check=True)
    give(box / "thin.a", user)
    member.unlink()
    os.mkfifo(member)
    give(member, user)
    for args in (["--check"], []):
        proc = run(user, "unique", *args, str(box / "thin.a"))
        one_error_line(proc, box / "thin.a", "not a regular file")


@USERS
@pytest.mark.parametrize("mode", [["--check"], []], ids=["check", "default"])
def test_file_truncated_while_read_is_a_per_file_error(user: str, mode: list[str], box: Path,
                                                       original: bytes) -> None:
    """Guarantee: never crash. The file is truncated by another process after it was mapped, before it is
    parsed (a read of the map past the new end raises SIGBUS): one error line for it, the next PATH is still
    processed and the report printed; nothing written."""
    lib = put(original, box / "lib.so", user)
    other = put(original, box / "other.so", user)
    run_ = start(user, "mapped", "unique", *mode, str(lib), str(other))
    os.truncate(lib, 64)
    proc = run_.resume()
    one_error_line(proc, lib, "truncated")
    assert "other.so" in proc.stdout and "2 files" in proc.stdout, proc.stdout
    assert lib.read_bytes() == original[:64]
    assert temps_in(box) == []


@USERS
def test_unmappable_file_is_a_per_file_error(user: str, box: Path, original: bytes) -> None:
    """Guarantee: never crash. A sysfs file cannot be mapped (its size is a guess): one error line, the next
    PATH is processed and the report printed."""
    sysfs = Path("/sys/kernel/notes")
    if not os.access(sysfs, os.R_OK):
        pytest.skip("no readable /sys/kernel/notes")
    other = put(original, box / "other.so", user)
    proc = run(user, "unique", "--check", str(sysfs), str(other))
    one_error_line(proc, sysfs, "cannot map")
    assert "2 files" in proc.stdout, proc.stdout


# -- 5. The report tells the truth ------------------------------------------------------------------------

@USERS
def test_failed_relink_is_reported_as_it_is(user: str, box: Path, original: bytes, expected: bytes) -> None:
    """Guarantee: the report tells the truth, and the names end as one file. The tree's second name for a
    library lies in a directory where it cannot be re-pointed (root: immutable; nobody: not writable): the
    first name is reported patched (it is), the second gets an error saying it still names the unpatched
    file (it does); exit 2. The journal stays beside the first name: once the directory can be written
    again, the next run finishes the switch (one inode, patched, no journal left)."""
    lib = put(original, box / "a" / "lib.so", user)
    (box / "ro").mkdir()
    os.link(lib, box / "ro" / "lib.so")
    give(box / "a", user)
    if user == "root":
        chattr("+i", box / "ro")
    else:
        os.chown(box / "ro", 0, 0)
        (box / "ro").chmod(0o755)
    proc = run(user, "unique", "--json", str(box))
    assert proc.returncode == 2, proc.stderr
    doc = cli_json(proc.stdout)
    status = {Path(f["path"]).relative_to(box).as_posix(): f["status"] for f in doc["files"]}
    assert status == {"a/lib.so": "patched", "ro/lib.so": "error"}, doc
    assert doc["summary"]["patched"] > 0
    err = next(f["error"] for f in doc["files"] if f["status"] == "error")
    assert "still names the unpatched file" in err
    assert lib.read_bytes() == expected and (box / "ro" / "lib.so").read_bytes() == original
    assert temps_in(box / "ro") == [] and [n for n in temps_in(box / "a") if n.endswith(".links")], "kept"
    if user == "root":
        chattr("-i", box / "ro")
    else:
        os.chown(box / "ro", NOBODY, NOBODY)  # the directory only: a chown of the file is a change to it
    proc = run(user, "unique", str(box))
    assert proc.returncode == 0, proc.stderr
    assert (box / "ro" / "lib.so").stat().st_ino == lib.stat().st_ino and lib.read_bytes() == expected
    assert temps_in(box / "ro") == [] and temps_in(box / "a") == []


@USERS
@pytest.mark.parametrize("where", ["outside", "inside"])
def test_relink_through_a_bind_mount_is_reported_as_it_is(user: str, where: str, box: Path, original: bytes,
                                                          expected: bytes) -> None:
    """Guarantee: the report tells the truth. The tree's second name for a library is reached through a bind
    mount (link() across mounts fails with EXDEV). Bound from outside the tree: that name cannot be
    re-pointed and gets an error saying it still names the unpatched file (it does), the first name is
    reported patched (it is). Bound from a directory of the tree: the name is re-pointed under its other
    path, so no error is reported for it."""
    lib = put(original, box / "a" / "lib.so", user)
    src = box / "c" if where == "inside" else box.parent / (box.name + "-outside")
    src.mkdir()
    try:
        os.link(lib, src / "lib2.so")
        (box / "b").mkdir()
        give(box, user)
        give(src, user)
        if subprocess.run(["mount", "--bind", str(src), str(box / "b")], capture_output=True).returncode != 0:
            pytest.skip("cannot bind-mount here")
        try:
            proc = run(user, "unique", "--json", str(box))
            doc = cli_json(proc.stdout)
            status = {Path(f["path"]).relative_to(box).as_posix(): f["status"] for f in doc["files"]}
            assert status["a/lib.so"] == "patched" and doc["summary"]["patched"] > 0, doc
            if where == "outside":
                assert proc.returncode == 2 and status["b/lib2.so"] == "error", doc
                assert "still names the unpatched file" in proc.stderr
                assert (box / "b" / "lib2.so").read_bytes() == original
            else:
                assert proc.returncode == 0, proc.stderr
                assert (box / "b" / "lib2.so").read_bytes() == expected
                assert (box / "c" / "lib2.so").stat().st_ino == lib.stat().st_ino
            assert lib.read_bytes() == expected and temps_in(box / "b") == []
        finally:
            subprocess.run(["umount", str(box / "b")], check=True)
    finally:
        if where == "outside":
            shutil.rmtree(src, ignore_errors=True)


@USERS
@pytest.mark.parametrize("phase", ["linked", "renamed", "relinking", "relink-temp@2", "relinked@2"])
def test_kill_while_relinking_is_repaired_by_the_next_run(user: str, phase: str, box: Path, original: bytes,
                                                          expected: bytes) -> None:
    """Guarantee: the next run repairs a switch a kill interrupted. Five hard links of one library; the run is
    killed just before the first name's rename, just after it, before re-pointing the others, with the
    second one's link made under its temp name (which the journal names), or after re-pointing two of the
    four other names: from the rename on, the names are split across two inodes, and a journal written
    before the rename lies beside the first name. The next run completes the switch: one inode, patched, no
    journal and no temp left."""
    lib = put(original, box / "a.so", user)
    names = [box / n for n in ("b.so", "c.so", "d.so")] + [box / "sub" / "e.so"]
    (box / "sub").mkdir()
    for n in names:
        os.link(lib, n)
    give(box, user)
    run_ = start(user, phase, "unique", str(box))
    run_.kill()
    inodes = {p.name: p.stat().st_ino for p in [lib, *names]}
    assert len(set(inodes.values())) == (1 if phase == "linked" else 2), inodes
    assert [n for n in os.listdir(box) if n.endswith(".links")], os.listdir(box)
    proc = run(user, "unique", str(box))
    assert proc.returncode == 0, proc.stderr
    assert len({p.stat().st_ino for p in [lib, *names]}) == 1
    assert lib.read_bytes() == expected and lib.stat().st_nlink == 5
    assert temps_in(box) == [] and temps_in(box / "sub") == []


@USERS
@pytest.mark.parametrize("member", ["RECORD", "RECORD.jws"])
def test_wheel_record_that_is_elf_is_not_reported_patched(user: str, member: str, box: Path, unique_build: Path,
                                                          original: bytes) -> None:
    """Guarantee: the report tells the truth. A wheel whose dist-info RECORD (or its signature) is an ELF
    file with unique symbols: the writer rewrites or drops those members, so they are reported skipped with
    the reason, never "patched" (nor "found" by --check). A signature is dropped and the library patched; a
    RECORD that is not text cannot be rewritten: the run fails on the wheel, which stays byte-identical."""
    files = wheel_files(unique_build / "libholder_v1.so")
    if member == "RECORD":
        files[f"{DIST}/RECORD"] = original
        whl = build_wheel(box, files, record=False)
    else:
        files[f"{DIST}/RECORD.jws"] = original
        whl = build_wheel(box, files)
    give(whl, user)
    before = whl.read_bytes()
    proc = run(user, "unique", "--check", "--json", str(whl))
    assert proc.returncode == 1, proc.stderr
    by_member = {f["member"]: f for f in cli_json(proc.stdout)["files"]}
    assert by_member[f"{DIST}/{member}"]["status"] == "skipped" and "RECORD" in by_member[f"{DIST}/{member}"]["reason"]
    assert by_member["holderpkg/libholder.so"]["status"] == "found"
    proc = run(user, "unique", "--json", str(whl))
    if member == "RECORD":
        one_error_line(proc, whl, "RECORD is not UTF-8")
        assert "patched" not in {f["status"] for f in cli_json(proc.stdout)["files"]}
        assert whl.read_bytes() == before
    else:
        assert proc.returncode == 0, proc.stderr
        by_member = {f["member"]: f for f in cli_json(proc.stdout)["files"]}
        assert by_member[f"{DIST}/{member}"]["status"] == "skipped"
        assert by_member["holderpkg/libholder.so"]["status"] == "patched"
        assert run(user, "unique", "--check", str(whl)).returncode == 0
        assert f"{DIST}/{member}" not in zipfile.ZipFile(whl).namelist()


def test_listable_but_not_enterable_directory_fails_the_tree(original: bytes) -> None:
    """Guarantee: the report tells the truth. As nobody, a directory that can be listed but not entered (r
    without x) hides its files: --check fails the tree (exit 2) instead of counting them skipped. (Root
    enters any directory, so only nobody can meet this.)"""
    need_user("nobody")
    d = arena("root")
    try:
        put(original, d / "closed" / "lib.so", "root")
        (d / "closed").chmod(0o744)
        proc = run("nobody", "unique", "--check", str(d))
        one_error_line(proc, d, "cannot read directory", "permission denied")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# -- 7. No spurious failures ------------------------------------------------------------------------------

@USERS
def test_check_on_a_wheel_needs_no_space_beside_it(user: str, box: Path, unique_build: Path) -> None:
    """Guarantee: read-only modes need no scratch space beside the target. The wheel sits on a full file
    system and every member is inflated into a scratch file (ELFPATCH_SCRATCH_IN_MEMORY=0): --check still
    works (exit 1), its scratch files go to $TMPDIR."""
    full = box / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(full)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        whl = build_wheel(full, {"holderpkg/libholder.so": (unique_build / "libholder_v1.so").read_bytes()})
        give(whl, user)
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\1" * 65536):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        proc = run(user, "unique", "--check", str(whl), env={"ELFPATCH_SCRATCH_IN_MEMORY": "0", "TMPDIR": "/tmp"})
        assert proc.returncode == 1, proc.stderr
    finally:
        subprocess.run(["umount", str(full)], check=True)


@USERS
def test_long_file_name_is_patched_atomically(user: str, box: Path, original: bytes, expected: bytes) -> None:
    """Guarantee: no spurious failure. A 250-byte file name: the temp name must still fit NAME_MAX."""
    lib = put(original, box / ("l" * 247 + ".so"), user)
    proc = run(user, "unique", str(lib))
    assert proc.returncode == 0, proc.stderr
    assert lib.read_bytes() == expected and temps_in(box) == []


@USERS
def test_append_only_directory_keeps_no_temp(user: str, box: Path, original: bytes) -> None:
    """Guarantee: a failed run changes nothing. In an append-only directory (chattr +a) nothing can be renamed
    or removed: the run is refused before any temp is created, so none is left behind."""
    lib = put(original, box / "lib.so", user)
    chattr("+a", box)
    proc = run(user, "unique", str(lib))
    one_error_line(proc, lib, "append-only")
    assert lib.read_bytes() == original and temps_in(box) == []
    assert run(user, "unique", "--inplace", str(lib)).returncode == 0, "--inplace needs no rename"


@USERS
def test_invalid_max_member_setting_says_so(user: str, box: Path, unique_build: Path) -> None:
    """Guarantee: no spurious failure. An invalid ELFPATCH_MAX_MEMBER is reported as an invalid setting, not
    as a malformed wheel."""
    whl = build_wheel(box, wheel_files(unique_build / "libholder_v1.so"))
    give(whl, user)
    proc = run(user, "unique", "--check", str(whl), env={"ELFPATCH_MAX_MEMBER": "lots"})
    line = one_error_line(proc, whl, "invalid setting ELFPATCH_MAX_MEMBER")
    assert "malformed" not in line
    assert zipfile.ZipFile(whl).testzip() is None


@USERS
def test_sparse_file_keeps_its_holes(user: str, box: Path, original: bytes, expected: bytes) -> None:
    """Guarantee: no spurious failure (a full disk). A library followed by a 1 GiB hole takes a few KB on disk;
    the patched file must too (SEEK_DATA/SEEK_HOLE copy or reflink), with the same bytes."""
    lib = put(original, box / "lib.so", user)
    os.truncate(lib, len(original) + (1 << 30))
    before = lib.stat().st_blocks * 512
    if before > 4 << 20:
        pytest.skip("this file system does not make sparse files")
    proc = run(user, "unique", str(lib))
    assert proc.returncode == 0, proc.stderr
    assert lib.stat().st_size == len(original) + (1 << 30)
    assert lib.stat().st_blocks * 512 <= before + (1 << 20), (before, lib.stat().st_blocks * 512)
    with open(lib, "rb") as f:
        assert f.read(len(expected)) == expected
        f.seek(-4096, os.SEEK_END)
        assert f.read() == bytes(4096)


def test_nobody_constant_is_debian_nobody() -> None:
    import pwd

    try:
        assert pwd.getpwnam("nobody").pw_uid == NOBODY
    except KeyError:
        pytest.skip("no user nobody")
