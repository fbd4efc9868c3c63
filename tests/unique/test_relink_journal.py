"""The tree's hard-link journal as a real journal: it names each file by device, inode, size, mtime and
ctime; a repair never replaces a name whose file differs from what was recorded; it is removed only when
every name it covers is again one file (or reported), so a re-pointing that fails is finished by the next
run. Each test names the guarantee it attacks; each runs the CLI as root and as nobody, races made
deterministic with the test-only stop point."""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from unique.adversary import USERS, arena, give, need_user, run, start, temps_in

pytestmark = pytest.mark.root


def patched(src: Path, out: Path) -> bytes:
    assert run("root", "unique", "-o", str(out), str(src)).returncode == 0
    return out.read_bytes()


@pytest.fixture
def box(request: pytest.FixtureRequest) -> Iterator[Path]:
    user = request.node.callspec.params["user"]
    need_user(user)
    d = arena(user)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def links(box: Path, data: bytes, user: str, n: int = 4) -> list[Path]:
    """``n`` hard links of one file holding ``data``, a.so first in sorted order."""
    names = [box / f"{c}.so" for c in "abcdefgh"[:n]]
    names[0].write_bytes(data)
    for p in names[1:]:
        os.link(names[0], p)
    give(box, user)
    return names


def journals(d: Path) -> list[str]:
    return [n for n in temps_in(d) if n.endswith(".links")]


@USERS
@pytest.mark.parametrize("change", ["rebuilt", "same size and mtime"])
def test_repair_never_replaces_a_name_changed_since_the_kill(user: str, change: str, box: Path,
                                                             unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: nothing newer is lost. A run is killed just after the first name's rename (a.so is the new,
    patched inode; b, c and d.so still name the old one; the journal says so). Then c.so is rewritten in place
    (`cp new.so c.so` keeps the inode): by a rebuilt library, or by other bytes of the same size with the old
    mtime put back (only the ctime tells). The next run must not point c.so (nor b, d.so: the same inode) at
    the patched old library: they keep what was written (the rebuilt one patched as a file of its own), with
    a warning, and no journal is left."""
    v1, v2 = unique_build / "libholder_v1.so", unique_build / "libholder_v2.so"
    a, b, c, d = links(box, v1.read_bytes(), user)
    start(user, "renamed", "unique", str(box)).kill()
    assert journals(box) and a.stat().st_ino != c.stat().st_ino
    ino, mtime = c.stat().st_ino, c.stat().st_mtime_ns
    if change == "rebuilt":
        new, want = v2.read_bytes(), patched(v2, tmp_path / "v2.so")
    else:
        new = want = bytes(len(v1.read_bytes()))
    _after_ctime(c)  # so the rewrite gets a ctime of its own, on a coarse clock too
    with open(c, "r+b") as f:  # as cp does: the same inode, truncated and written
        f.truncate(0)
        f.write(new)
    if change != "rebuilt":
        os.utime(c, ns=(mtime, mtime))
    assert c.stat().st_ino == ino
    proc = run(user, "unique", str(box))
    assert proc.returncode == 0, proc.stderr
    assert c.read_bytes() == want and b.read_bytes() == want and d.read_bytes() == want
    assert c.stat().st_ino != a.stat().st_ino and a.read_bytes() == patched(v1, tmp_path / "v1.so")
    assert "left as it is" in proc.stderr, proc.stderr
    assert journals(box) == []


@USERS
def test_relink_that_times_out_is_finished_by_the_next_run(user: str, box: Path, unique_build: Path,
                                                           tmp_path: Path) -> None:
    """Guarantee: the names end as one file. A reader holds a lock on the new inode while the run re-points
    the other names (the run is stopped just before it re-points them, the test takes the lock, the run
    goes on with a short --lock-timeout): each other name is reported as still naming the unpatched file, the
    journal stays, and once the reader is gone the next run finishes the switch."""
    v1 = unique_build / "libholder_v1.so"
    names = links(box, v1.read_bytes(), user)
    stopped = start(user, "relinking", "unique", "--lock-timeout", "0.1", str(box))
    fd = os.open(names[0], os.O_RDONLY)  # the new inode: the first name was just renamed over
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        proc = stopped.resume()
    finally:
        os.close(fd)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("elfpatch: error:")]
    assert len(errors) == 3 and all("still names the unpatched file" in e for e in errors), proc.stderr
    assert journals(box), "the journal stays for the next run"
    assert len({p.stat().st_ino for p in names}) == 2
    proc = run(user, "unique", str(box))
    assert proc.returncode == 0, proc.stderr
    assert len({p.stat().st_ino for p in names}) == 1 and names[0].stat().st_nlink == 4
    assert names[0].read_bytes() == patched(v1, tmp_path / "v1.so") and temps_in(box) == []


def _after_ctime(path: Path) -> None:
    """Waits (by touching a scratch file beside it, no timer) until the file system's clock stamps a ctime
    later than ``path``'s: on kernels with coarse timestamps two changes a few ms apart can share one."""
    probe = path.with_name(".ctime-probe")
    recorded = path.stat().st_ctime_ns
    try:
        while True:
            probe.write_bytes(b"")
            if probe.stat().st_ctime_ns > recorded:
                return
    finally:
        probe.unlink(missing_ok=True)


def test_an_oversized_journal_is_never_trusted(tmp_path: Path) -> None:
    """Guarantee: a count from a file is bounded before use. A journal-named file past MAX_JOURNAL bytes (ours
    by every other sign: a regular file of this user, mode 0600, one name, unlocked) is not replayed, so its
    size never decides how much a run reads or pads."""
    from elfpatch.fs.journal import MAX_JOURNAL, trusted

    name = ".elfpatch-0123456789abcdef.links"
    path = tmp_path / name
    path.write_bytes(b'{"journal": "elfpatch-links"}'.ljust(MAX_JOURNAL + 1))
    path.chmod(0o600)
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert trusted(dfd, name) is None
        path.write_bytes(b'{"journal": "elfpatch-links"}'.ljust(MAX_JOURNAL))  # at the bound: trusted
        fd = trusted(dfd, name)
        assert fd is not None
        os.close(fd)
    finally:
        os.close(dfd)
