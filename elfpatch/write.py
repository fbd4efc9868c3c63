"""Getting a file's bytes in, and edited bytes out, without ever leaving a half-written file.

- ``Source`` opens an input once: the resolved path, one read-only map of its bytes, and (for writers) an
  exclusive lock that is known to be on the inode the path names right now.
- ``replace_atomic``: copy beside the original (copy_file_range, so a reflink or an in-kernel copy), apply
  the one-byte edits, copy owner, mode and extended attributes, verify the copy, rename it over the original.
  A failure or a kill at any moment leaves the original untouched and at most a temp file that the next run
  in that directory removes.
- ``write_inplace``: write only the changed bytes into the existing inode (keeps hard links; not atomic).
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import stat
from typing import Callable, Iterable

from elfpatch.errors import ElfPatchError, VerifyError, WriteError, warn
from elfpatch.plan import Edit

Verifier = Callable[[bytes], None]

TEMP_RE = re.compile(r"^\..*\.elfpatch-(\d+)-[0-9a-f]{8}\.tmp$")
_LOCK_RETRIES = 8


def _os_error(exc: OSError, what: str, path: str) -> WriteError:
    return WriteError(f"{what}: {exc.strerror or exc}", path)


class Source:
    """One input file, opened and mapped once. Use as a context manager."""

    def __init__(self, path: str, *, lock: bool = False, writable: bool = False) -> None:
        self.path = path
        self.real = os.path.realpath(path)
        # O_NONBLOCK: opening a FIFO given as PATH must fail below (not a regular file), not hang.
        flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC | os.O_NONBLOCK
        for _ in range(_LOCK_RETRIES):
            try:
                self.fd = os.open(self.real, flags)
            except OSError as exc:
                if exc.errno == errno.ETXTBSY:
                    raise WriteError("text file busy: the executable is running; --inplace cannot write it "
                                     "(the default mode replaces it atomically)", path) from exc
                raise _os_error(exc, "cannot open", path) from exc
            self.stat = os.fstat(self.fd)
            if not lock:
                break
            # Another run may rename a patched copy over this path while we wait: the lock is only
            # meaningful if the path still names the inode we locked.
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                now = os.stat(self.real)
            except OSError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (self.stat.st_dev, self.stat.st_ino):
                self.stat = os.fstat(self.fd)
                clean_stale_temps_once(os.path.dirname(self.real))
                break
            os.close(self.fd)
        else:
            raise WriteError("file keeps being replaced by another process", path)
        if not stat.S_ISREG(self.stat.st_mode):
            os.close(self.fd)
            raise ElfPatchError("not a regular file", path)
        self.size = self.stat.st_size
        self._map = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ) if self.size else None
        self.data: bytes | mmap.mmap = self._map if self._map is not None else b""

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a memoryview still points into the map; the GC will close it
                pass
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- temp files --------------------------------------------------------------------------------------

_cleaned_dirs: set[str] = set()


def temp_name(target: str) -> str:
    head, tail = os.path.split(target)
    return os.path.join(head, f".{tail}.elfpatch-{os.getpid()}-{os.urandom(4).hex()}.tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_temps(directory: str) -> list[str]:
    """Remove temp files that a killed run left in ``directory`` (their pid is no longer alive)."""
    removed = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return removed
    for name in names:
        m = TEMP_RE.match(name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def clean_stale_temps_once(directory: str) -> None:
    """clean_stale_temps, once per directory per process: every writing run, whether or not it then needs a
    temp of its own (--inplace, nothing left to patch), removes what killed runs left."""
    directory = directory or "."
    if directory not in _cleaned_dirs:
        _cleaned_dirs.add(directory)
        clean_stale_temps(directory)


def create_temp(target: str) -> tuple[int, str]:
    """An exclusively created, private temp file in ``target``'s own directory (no symlink races)."""
    clean_stale_temps_once(os.path.dirname(target))
    for _ in range(16):
        tmp = temp_name(target)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _os_error(exc, "cannot create a temp file beside it", target) from exc
        return fd, tmp
    raise WriteError("cannot create a unique temp file name", target)


# -- copying -----------------------------------------------------------------------------------------

def copy_fd(src: int, dst: int, size: int, src_offset: int = 0, dst_offset: int = 0) -> None:
    """Copy ``size`` bytes in the kernel: copy_file_range (may reflink), else sendfile."""
    done = 0
    use_cfr = hasattr(os, "copy_file_range")
    while done < size:
        n = 0
        if use_cfr:
            try:
                n = os.copy_file_range(src, dst, size - done, src_offset + done, dst_offset + done)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                    raise
                use_cfr = False
                continue
        else:
            os.lseek(dst, dst_offset + done, os.SEEK_SET)
            n = os.sendfile(dst, src, src_offset + done, size - done)
        if n == 0:
            raise WriteError("source file shrank while it was copied")
        done += n


def copy_metadata(st: os.stat_result, src_fd: int, dst_fd: int, path: str, *, owner: bool = True) -> None:
    """Owner, group, mode bits and extended attributes (file capabilities included), in the order that keeps
    them: chown clears set-id bits and security.capability, so it goes first."""
    if owner:
        dst = os.fstat(dst_fd)
        if (dst.st_uid, dst.st_gid) != (st.st_uid, st.st_gid):
            try:
                os.fchown(dst_fd, st.st_uid, st.st_gid)
            except PermissionError as exc:
                raise WriteError("cannot keep its owner and group (not permitted); use --inplace", path) from exc
    os.fchmod(dst_fd, stat.S_IMODE(st.st_mode))
    try:
        names = os.listxattr(src_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return
        raise
    for name in names:
        try:
            os.setxattr(dst_fd, name, os.getxattr(src_fd, name))
        except OSError as exc:
            raise _os_error(exc, f"cannot keep extended attribute {name}", path) from exc


def _apply(fd: int, edits: Iterable[Edit]) -> None:
    for e in edits:
        if os.pwrite(fd, bytes((e.new,)), e.offset) != 1:
            raise WriteError(f"short write at {e.offset:#x}")


def _check_fd(fd: int, edits: Iterable[Edit], want_old: bool = True) -> None:
    for e in edits:
        got = os.pread(fd, 1, e.offset)
        want = e.old if want_old else e.new
        if got != bytes((want,)):
            raise VerifyError(f"byte at {e.offset:#x} ({e.why}) is not what the plan read; nothing written")


def _verify_fd(fd: int, verify: Verifier) -> None:
    size = os.fstat(fd).st_size
    if size == 0:
        verify(b"")
        return
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
        verify(m)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the two write modes -----------------------------------------------------------------------------

def replace_atomic(src: Source, edits: list[Edit], verify: Verifier, *, output: str | None = None,
                   fsync: bool = False) -> None:
    """Write src's bytes with ``edits`` to a temp file beside the destination, verify, rename into place.

    The destination is the file src resolves to (a symlink stays a symlink), or ``output``.
    """
    target = os.path.abspath(output) if output else src.real
    tmp_fd, tmp = create_temp(target)
    try:
        try:
            copy_fd(src.fd, tmp_fd, src.size)
            _check_fd(tmp_fd, edits)
            _apply(tmp_fd, edits)
            copy_metadata(src.stat, src.fd, tmp_fd, src.path, owner=output is None)
            if fsync:
                os.fsync(tmp_fd)
        except OSError as exc:
            raise _os_error(exc, "cannot write the patched copy", src.path) from exc
        _verify_fd(tmp_fd, verify)
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise _os_error(exc, "cannot rename the patched copy into place", output or src.path) from exc
        tmp = ""
        if fsync:
            fsync_dir(os.path.dirname(target))
    finally:
        os.close(tmp_fd)
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass


CAPABILITY = "security.capability"


def _capability(fd: int) -> bytes | None:
    try:
        return os.getxattr(fd, CAPABILITY)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
        raise


def _may_restore_privileges(src: Source) -> bytes | None:
    """A write makes the kernel drop the file's capability, and its set-id bits when the writer lacks
    CAP_FSETID. Check, before anything is written, that this process can put them back (else refuse);
    return the capability to restore."""
    cap = _capability(src.fd)
    if cap is not None:
        try:
            os.setxattr(src.fd, CAPABILITY, cap)  # the value it has: proves CAP_SETFCAP, changes no byte
        except OSError as exc:
            raise WriteError(f"writing in place would drop its file capability ({CAPABILITY}) and restoring "
                             f"it is not permitted ({exc.strerror}); run as root", src.path) from exc
    mode, euid = src.stat.st_mode, os.geteuid()
    setgid = mode & stat.S_ISGID and mode & stat.S_IXGRP  # the kernel keeps S_ISGID without group exec
    if euid != 0 and (mode & stat.S_ISUID or setgid):
        in_group = src.stat.st_gid in (os.getegid(), *os.getgroups())
        if src.stat.st_uid != euid or (setgid and not in_group):
            raise WriteError("writing in place would drop its set-user-ID or set-group-ID bit and restoring it "
                             "is not permitted; run as its owner or root", src.path)
    return cap


def _restore_privileges(src: Source, cap: bytes | None) -> None:
    if os.fstat(src.fd).st_mode != src.stat.st_mode:
        os.fchmod(src.fd, stat.S_IMODE(src.stat.st_mode))
    if cap is not None and _capability(src.fd) != cap:
        os.setxattr(src.fd, CAPABILITY, cap)


def write_inplace(src: Source, edits: list[Edit], verify: Verifier, *, fsync: bool = False) -> None:
    """Write the changed bytes into the open file itself, then put back the set-id bits and file capability
    the kernel drops on a write; on a failed verification, put the old bytes back."""
    _check_fd(src.fd, edits)
    try:
        cap = _may_restore_privileges(src)
    except OSError as exc:
        raise _os_error(exc, "cannot read its file capability", src.path) from exc
    try:
        _apply(src.fd, edits)
        _restore_privileges(src, cap)
        if fsync:
            os.fsync(src.fd)
        _verify_fd(src.fd, verify)
    except (OSError, ElfPatchError) as exc:
        try:
            _apply(src.fd, [Edit(e.offset, e.new, e.old, e.why) for e in edits])
            _restore_privileges(src, cap)
        except OSError:
            warn(src.path, "could not restore the original bytes")
        if isinstance(exc, OSError):
            raise _os_error(exc, "cannot write in place", src.path) from exc
        raise
