"""Opening a name as a regular file only, without blocking and without following a symlink (``open_at``: the
one way every input, temp, journal and small record is opened), and the small files other people own that a
report reads (RECORDs, conda-meta records, the loader's cache), up to a size cap.

O_NONBLOCK makes the open of a FIFO return at once instead of waiting for a writer, and the fstat check then
refuses it (and devices, sockets, directories) before a read could block or never end. O_NOFOLLOW makes a
symlink put in a file's place fail the open (ELOOP) instead of being followed.
"""
from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # typing is not imported on the read path (a Source opens through here)
if TYPE_CHECKING:
    from typing import BinaryIO

_FLAGS = os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegular(OSError):
    """The name names a FIFO, a device, a socket or a directory: nothing a run reads or writes."""

    def __init__(self) -> None:
        super().__init__(errno.EINVAL, "not a regular file")


def open_at(name: str, dir_fd: int | None = None, flags: int = os.O_RDONLY, *,
            follow: bool = False) -> tuple[int, os.stat_result]:
    """``name`` (relative to ``dir_fd``) opened with ``flags`` without blocking and, unless ``follow``, without
    following a symlink; with its stat. Raises OSError, NotRegular for anything but a regular file."""
    fd = os.open(name, flags | _FLAGS | (0 if follow else os.O_NOFOLLOW), dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular()
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def same_inode(a: os.stat_result, b: os.stat_result) -> bool:
    """Whether two stats are of one file (device and inode): what a name names now against what was opened."""
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def open_regular(path: str, limit: int) -> BinaryIO | None:
    """The open file at ``path`` when it is a regular file of at most ``limit`` bytes, else None."""
    try:
        fd, st = open_at(path, follow=True)
    except OSError:
        return None
    if st.st_size > limit:
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def read_regular(path: str, limit: int) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes (also after growing under us), else None."""
    f = open_regular(path, limit)
    if f is None:
        return None
    with f:
        try:
            data = f.read(limit + 1)
        except OSError:
            return None
    return data if len(data) <= limit else None
