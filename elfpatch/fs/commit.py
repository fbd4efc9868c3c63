"""The one commit protocol: every changed file (an ELF file, an archive, a wheel) reaches the disk through it.

1. Refuse early what cannot end well: a directory that is append-only or immutable (a temp could not be
   removed again), an existing -o OUT that is not a regular file (a device, a FIFO).
2. A temp in the destination's own directory (``Temp``): unnamed (O_TMPFILE) where the file system allows it
   and /proc is there to link it in through later, so no other run can ever take it as an input and a kill
   leaves nothing; else a short, exclusively created ``.elfpatch-<16 hex>.tmp`` (fits NAME_MAX beside any
   name) that the creating run holds a lock on. Either carries our marker (``TEMP_MARK``, an extended
   attribute) until just before its rename.
3. The content (a sparse copy that keeps holes, plus the one-byte edits; or a whole new wheel), then the
   metadata: owner, mode, extended attributes, and exactly the original's access ACL (a directory's default
   ACL inherited by the temp is dropped), then the caller's verification of the written bytes.
4. Under the input's lock, check that its name still names the inode that was read (device, inode, size,
   mtime); if not, nothing is written and the file gets an error.
5. Give the temp its name (linkat), rename it over the destination (renameat, relative to the directory
   file descriptor), fsync the directory with --fsync.

Stale temps of killed runs are removed by the next run that creates a temp in that directory: only those
that carry our marker and that no live process holds a lock on (a PID says nothing across PID namespaces,
a name says nothing at all: a file named like a temp without the marker is someone's, an input like any;
elfpatch.fs.temps). Where the file system keeps no user extended attributes a temp carries no marker: it
is ours only while its run holds its lock, and a killed run's is never removed, only warned about.
``write_inplace`` writes only the changed bytes into the existing inode (keeps hard links; not atomic).
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import stat
import sys
from contextvars import ContextVar
from typing import Callable, Union

from elfpatch.errors import ElfPatchError, WriteError, warn
from elfpatch.fs import teststop
from elfpatch.fs.copy import copy_sparse
from elfpatch.fs.regular import same_inode
from elfpatch.fs.source import Place, Source, os_error
from elfpatch.fs.temps import (
    TEMP_MARK,
    clean_stale_temps_once,
    create_locked,
    exclusive,
    mark_temp,
    unmark_temp,
)
from elfpatch.patching.edits import Edit, apply_to_fd, check_fd, reverted

__all__ = ["Temp", "replace_atomic", "write_inplace"]

Verifier = Callable[[Union[bytes, mmap.mmap]], None]

FS_IOC_GETFLAGS = 0x80086601
FS_IMMUTABLE_FL, FS_APPEND_FL = 0x10, 0x20
ACL_ACCESS = "system.posix_acl_access"


def _os_error(exc: OSError, what: str, path: str | None) -> WriteError:
    return os_error(exc, what, path)


# -- temp files --------------------------------------------------------------------------------------

# Called with the finished temp's stat just before it is renamed into place (and what it returns, with the
# new file's stat, just after): a tree records there, in a journal, the hard links it is about to re-point,
# so that no kill leaves them split without a record.
AfterInstall = Callable[[os.stat_result], None]
before_install: ContextVar[Callable[[os.stat_result], AfterInstall | None] | None] = ContextVar("before_install",
                                                                                             default=None)


def _dir_flags(dir_fd: int) -> int:
    buf = bytearray(8)
    try:
        fcntl.ioctl(dir_fd, FS_IOC_GETFLAGS, buf)
    except OSError:
        return 0
    return int.from_bytes(buf[:4], "little" if sys.byteorder == "little" else "big")


def check_replaceable(dest: Place, *, output: bool) -> None:
    """Refuse, before anything is created, what the rename could not do cleanly or must not do."""
    flags = _dir_flags(dest.dir_fd)
    if flags & (FS_APPEND_FL | FS_IMMUTABLE_FL):
        what = "append-only (chattr +a)" if flags & FS_APPEND_FL else "immutable (chattr +i)"
        raise WriteError(f"its directory is {what}: a file in it cannot be replaced (a temp could not be removed "
                         "either); use --inplace or -o elsewhere", dest.path)
    if output:
        st = dest.lstat()
        if st is not None and stat.S_ISLNK(st.st_mode):
            try:
                st = os.stat(dest.name, dir_fd=dest.dir_fd)
            except OSError:
                st = None  # a dangling link: replaced by the new file, as any link OUT is
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise WriteError(f"-o {dest.path} exists and is not a regular file; refusing to replace it", dest.path)


def _proc_names(fd: int) -> bool:
    """Whether /proc/self/fd/FD is this file (linkat through it is how an unnamed temp gets a name)."""
    try:
        st, via = os.fstat(fd), os.stat(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return same_inode(st, via)


class Temp:
    """A temp file in ``dest``'s directory, removed unless ``install`` renamed it over ``dest``."""

    def __init__(self, dest: Place) -> None:
        self.dest = dest
        self.name = ""  # set once it has a name in the directory
        self.fd = -1
        clean_stale_temps_once(dest.dir_fd)
        self.fd = self._create_unnamed()
        self.unnamed = self.fd >= 0
        if not self.unnamed:
            self.fd, self.name = self._create_named()
        fcntl.flock(self.fd, fcntl.LOCK_EX)  # our own: liveness for clean_stale_temps
        mark_temp(self.fd)  # after the lock: a cleaner never takes a temp being made for a dead run's
        teststop.stop("temp")

    def _create_unnamed(self) -> int:
        """An O_TMPFILE temp, or -1 where it could not be given a name later: the file system has no
        O_TMPFILE, or there is no /proc to link it through (a chroot, a minimal container)."""
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600, dir_fd=self.dest.dir_fd)
        except (OSError, AttributeError) as exc:
            if isinstance(exc, OSError) and exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL,
                                                                errno.ENOENT):
                raise _os_error(exc, "cannot create a temp file beside it", self.dest.path) from exc
            return -1
        if _proc_names(fd):
            return fd
        os.close(fd)
        return -1

    def _create_named(self) -> tuple[int, str]:
        return create_locked(self.dest.dir_fd, os.O_RDWR, self.dest.path, what="temp file",
                             failure="cannot create a temp file beside it")

    def _link(self) -> None:
        """Give an unnamed temp a (temp) name: linkat through /proc, which needs no capability (checked to be
        there when the temp was made)."""
        def link(name: str) -> bool:
            os.link(f"/proc/self/fd/{self.fd}", name, dst_dir_fd=self.dest.dir_fd, follow_symlinks=True)
            return True

        _, self.name = exclusive(link, "temp file", self.dest.path)

    def install(self) -> None:
        """Rename the temp over the destination (after ``before_install``'s hook, if one is set)."""
        hook = before_install.get()
        after = hook(os.fstat(self.fd)) if hook is not None else None
        if not self.name:
            self._link()
        teststop.stop("linked")
        unmark_temp(self.fd)
        os.replace(self.name, self.dest.name, src_dir_fd=self.dest.dir_fd, dst_dir_fd=self.dest.dir_fd)
        self.name = ""
        if after is not None:
            after(os.fstat(self.fd))

    def close(self) -> None:
        if self.name:
            try:
                os.unlink(self.name, dir_fd=self.dest.dir_fd)
            except OSError:
                pass
            self.name = ""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Temp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def commit(self, src: Source, verify: Verifier, *, owner: bool, fsync: bool) -> None:
        """Steps 3 (metadata, verification) to 5 of the protocol, for a temp whose content is written."""
        path = src.path
        try:
            copy_metadata(src.stat, src.fd, self.fd, path, owner=owner)
            teststop.stop("written")
            if fsync:
                os.fsync(self.fd)
        except OSError as exc:
            raise _os_error(exc, "cannot write the patched copy", path) from exc
        _verify_fd(self.fd, verify)
        teststop.stop("verified")
        if owner:
            if not src.unchanged():
                raise WriteError("changed on disk during the run (replaced, rewritten or truncated); nothing "
                                 "written, run again", path)
        else:
            check_replaceable(self.dest, output=True)
        try:
            self.install()
        except OSError as exc:
            raise _os_error(exc, "cannot rename the patched copy into place", self.dest.path) from exc
        teststop.stop("renamed")
        if fsync:
            os.fsync(self.dest.dir_fd)


def open_temp(src: Source, output: str | None) -> tuple[Temp, Place]:
    """The destination (src's own place, or -o OUT's) checked, and a temp beside it. The caller closes both
    (the place only when it differs from src's)."""
    dest = Place.of(output, follow=False) if output else src.place
    try:
        check_replaceable(dest, output=bool(output))
        return Temp(dest), dest
    except BaseException:
        if dest is not src.place:
            dest.close()
        raise


def _keep_owner(st: os.stat_result, dst_fd: int, path: str) -> None:
    dst = os.fstat(dst_fd)
    if (dst.st_uid, dst.st_gid) != (st.st_uid, st.st_gid):
        try:
            os.fchown(dst_fd, st.st_uid, st.st_gid)
        except PermissionError as exc:
            raise WriteError("cannot keep its owner and group (not permitted); use --inplace", path) from exc


def _xattr_names(fd: int) -> list[str]:
    """The file's extended attribute names (none where the file system has no xattrs)."""
    try:
        return os.listxattr(fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        return []


def _drop_inherited_acl(dst_fd: int, path: str) -> None:
    """Remove an access ACL the temp inherited from its directory's default ACL."""
    try:
        os.removexattr(dst_fd, ACL_ACCESS)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise _os_error(exc, "cannot drop the access ACL its directory's default ACL gave", path) from exc


def copy_metadata(st: os.stat_result, src_fd: int, dst_fd: int, path: str, *, owner: bool = True) -> None:
    """Owner, group, mode bits and extended attributes (file capabilities included), in the order that keeps
    them: chown clears set-id bits and security.capability, so it goes first. The access ACL is exactly the
    original's: one that the temp inherited from its directory's default ACL is removed."""
    if owner:
        _keep_owner(st, dst_fd, path)
    names = _xattr_names(src_fd)
    if ACL_ACCESS not in names:
        _drop_inherited_acl(dst_fd, path)
    os.fchmod(dst_fd, stat.S_IMODE(st.st_mode))
    for name in names:
        if name == TEMP_MARK:
            continue  # ours, never a property of the file
        try:
            os.setxattr(dst_fd, name, os.getxattr(src_fd, name))
        except OSError as exc:
            raise _os_error(exc, f"cannot keep extended attribute {name}", path) from exc
    if stat.S_IMODE(os.fstat(dst_fd).st_mode) != stat.S_IMODE(st.st_mode):
        os.fchmod(dst_fd, stat.S_IMODE(st.st_mode))


def _verify_fd(fd: int, verify: Verifier) -> None:
    size = os.fstat(fd).st_size
    if size == 0:
        verify(b"")
        return
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
        verify(m)


# -- the two write modes -----------------------------------------------------------------------------

def replace_atomic(src: Source, edits: list[Edit], verify: Verifier, *, output: str | None = None,
                   fsync: bool = False) -> None:
    """src's bytes with ``edits``, committed over src (a symlink PATH stays a symlink) or to ``output``."""
    tmp, dest = open_temp(src, output)
    try:
        try:
            copy_sparse(src.fd, tmp.fd, src.size)
            src.check_intact()
            check_fd(tmp.fd, edits)
            apply_to_fd(tmp.fd, edits)
        except OSError as exc:
            raise _os_error(exc, "cannot write the patched copy", src.path) from exc
        tmp.commit(src, verify, owner=output is None, fsync=fsync)
    finally:
        tmp.close()
        if dest is not src.place:
            dest.close()


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
    check_fd(src.fd, edits)
    if not src.unchanged():
        raise WriteError("changed on disk during the run (replaced, rewritten or truncated); nothing written, "
                         "run again", src.path)
    try:
        cap = _may_restore_privileges(src)
    except OSError as exc:
        raise _os_error(exc, "cannot read its file capability", src.path) from exc
    try:
        apply_to_fd(src.fd, edits, "inplace")
        _restore_privileges(src, cap)
        if fsync:
            os.fsync(src.fd)
        _verify_fd(src.fd, verify)
    except (OSError, ElfPatchError) as exc:
        try:
            apply_to_fd(src.fd, reverted(edits))
            _restore_privileges(src, cap)
        except OSError:
            warn(src.path, "could not restore the original bytes")
        if isinstance(exc, OSError):
            raise _os_error(exc, "cannot write in place", src.path) from exc
        raise
