"""Reading an input: where it is (``Place``: an open directory and a name in it) and its bytes (``Source``).

A path is only a name: between the moment a run looks at it and the moment it writes, another process can
replace a directory on the way by a symlink, the file by a newer one, or truncate it. So a file is opened
relative to a directory file descriptor with O_NOFOLLOW (a symlink put in its place fails the open instead of
being followed), never blocks on open (O_NONBLOCK: a FIFO is refused as not a regular file), is locked with a
bounded wait, and remembers what it was when read (device, inode, size, mtime) so that the commit can check,
under the lock, that the name still names it. Its map is guarded (elfpatch.fs.guard): a truncation while it is
read becomes a per-file error, not a SIGBUS.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import time

from elfpatch.errors import ElfPatchError, ParseError, WriteError, logger, one_line
from elfpatch.fs import teststop
from elfpatch.fs.guard import Guard
from elfpatch.fs.regular import NotRegular, open_at

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging

# Seconds a writing run waits for another process's lock on a file before it gives up on that file.
LOCK_TIMEOUT = 60.0
_LOCK_RETRIES = 8
# Seconds of waiting for a lock after which the run says what it waits for.
WAIT_NOTICE = 1.0
# Where that is said: a child of the "elfpatch" logger, which a pool worker sends straight to the parent's
# handlers (its other warnings travel back with its reports, too late for this one).
def wait_log() -> logging.Logger:
    """The "elfpatch.wait" logger, made through ``logger()`` so that the CLI's warning lines are set up first
    (logging is imported only by a run that has something to say)."""
    return logger().getChild("wait")

Identity = tuple  # (st_dev, st_ino, st_size, st_mtime_ns)


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def os_error(exc: OSError, what: str, path: str | None) -> WriteError:
    return WriteError(f"{what}: {exc.strerror or exc}", path)


class Place:
    """A name inside an open directory: where a file is read, and where its replacement is renamed to."""

    def __init__(self, dir_fd: int, name: str, path: str, *, owns: bool = True) -> None:
        self.dir_fd, self.name, self.path, self.owns = dir_fd, name, path, owns

    @classmethod
    def of(cls, path: str, *, follow: bool = True) -> Place:
        """The place of a path given by the user. With ``follow``, a symlink is resolved first (the file it
        names is the one read and replaced; the link stays a link); without, the name itself is the place."""
        full = os.path.realpath(path) if follow else os.path.abspath(path)
        head, name = os.path.split(full)
        if not name:
            raise ElfPatchError("not a file", path)
        try:
            fd = os.open(head or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise os_error(exc, "cannot open its directory", path) from exc
        return cls(fd, name, path)

    def lstat(self) -> os.stat_result | None:
        """What the name names now (not following a symlink), or None if nothing."""
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def close(self) -> None:
        if self.owns and self.dir_fd >= 0:
            os.close(self.dir_fd)
        self.dir_fd = -1

    def __enter__(self) -> Place:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def lock_holder(st: os.stat_result) -> str | None:
    """The pid holding a flock on this inode, from /proc/locks, or None when it cannot be told."""
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                fields = line.split()
                if "FLOCK" in fields and key in fields and "->" not in fields:
                    return fields[fields.index(key) - 1]
    except OSError:
        pass
    return None


def lock_file(fd: int, timeout: float, path: str, deadline: float | None = None) -> None:
    """flock(LOCK_EX) with a bounded wait: a reader holding a lock must not hang a writing run forever.
    ``deadline`` (time.monotonic()): when several waits share one timeout. A wait past WAIT_NOTICE seconds
    is said once (which file, which pid), as apt does: a silent run of up to a minute looks hung."""
    start = time.monotonic()
    if deadline is None:
        deadline = start + max(timeout, 0.0)
    delay, told = 0.001, False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        now = time.monotonic()
        if deadline - now <= 0:
            pid = lock_holder(os.fstat(fd))
            raise WriteError(f"timed out after {timeout:g} s waiting for the lock on it"
                             f"{f' (held by pid {pid})' if pid else ''}: another process holds flock on this file "
                             "(see --lock-timeout)", path)
        if not told and now - start >= WAIT_NOTICE:
            told = True
            pid = lock_holder(os.fstat(fd))
            wait_log().warning("%s", one_line(f"{path}: waiting for the lock on it, held by "
                                              f"{f'pid {pid}' if pid else 'another process'} (at most "
                                              f"{timeout:g} s; see --lock-timeout)"))
        time.sleep(min(delay, deadline - now))
        delay = min(delay * 2, 0.05)


class Source:
    """One input file, opened and mapped once. Use as a context manager.

    ``place``: where it is (default: ``Place.of(path)``, following a symlink PATH); ``lock``: take an
    exclusive lock that is known to be on the inode the name names; ``writable``: for --inplace."""

    def __init__(self, path: str, *, lock: bool = False, writable: bool = False, place: Place | None = None,
                 lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.path = path
        self.place = place if place is not None else Place.of(path)
        self._owns_place = place is None
        self.fd = -1
        self._map: mmap.mmap | None = None
        self._guard: Guard | None = None
        try:
            self._open(lock, writable, lock_timeout)
        except BaseException:
            self.close()
            raise

    @property
    def real(self) -> str:
        """The file's own path (a symlink PATH resolved), for messages and scratch space beside it."""
        return os.path.realpath(self.path) if self._owns_place else self.path

    def _open(self, lock: bool, writable: bool, lock_timeout: float) -> None:
        flags = os.O_RDWR if writable else os.O_RDONLY
        deadline = time.monotonic() + max(lock_timeout, 0.0)
        for _ in range(_LOCK_RETRIES):
            try:
                self.fd, self.stat = open_at(self.place.name, self.place.dir_fd, flags)
            except NotRegular as exc:
                raise ElfPatchError("not a regular file", self.path) from exc
            except OSError as exc:
                if exc.errno == errno.ETXTBSY:
                    raise WriteError("text file busy: the executable is running; --inplace cannot write it "
                                     "(the default mode replaces it atomically)", self.path) from exc
                if exc.errno == errno.ELOOP:
                    raise WriteError("is a symlink now (replaced during the run?); not followed", self.path) from exc
                raise os_error(exc, "cannot open", self.path) from exc
            if not lock:
                break
            lock_file(self.fd, lock_timeout, self.path, deadline)
            # Another run may rename a patched copy over this name while we wait: the lock is only
            # meaningful if the name still names the inode we locked.
            now = self.place.lstat()
            if now is not None and (now.st_dev, now.st_ino) == (self.stat.st_dev, self.stat.st_ino):
                self.stat = os.fstat(self.fd)
                teststop.stop("locked")
                break
            os.close(self.fd)
            self.fd = -1
        else:
            raise WriteError("file keeps being replaced by another process", self.path)
        self.ident = identity(self.stat)
        self.size = self.stat.st_size
        if self.size:
            try:
                self._map = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:  # e.g. a sysfs file: its size is a guess, it cannot be mapped
                raise ElfPatchError(f"cannot map it: {getattr(exc, 'strerror', None) or exc}", self.path) from exc
            self._guard = Guard(self._map)
            teststop.stop("mapped")
        self.data: bytes | mmap.mmap = self._map if self._map is not None else b""

    def check_intact(self) -> None:
        """Raise if a read of the map hit a page the file no longer has (truncated while it was read)."""
        if self._guard is not None and self._guard.faulted:
            raise ParseError("the file was truncated while it was read; nothing written", self.path)

    def unchanged(self) -> bool:
        """Whether the name still names the file as it was read (same inode, size and mtime), and every read
        of it saw its bytes."""
        if self._guard is not None and self._guard.faulted:
            return False
        now = self.place.lstat()
        return now is not None and identity(now) == self.ident and identity(os.fstat(self.fd)) == self.ident

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
                if self._guard is not None:
                    self._guard.release()
            except BufferError:  # a memoryview still points into the map; the GC will close it (still guarded)
                pass
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self._owns_place:
            self.place.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        faulted = self._guard is not None and self._guard.faulted
        self.close()
        if faulted and exc_type is None:
            raise ParseError("the file was truncated while it was read; its report would be wrong", self.path)
