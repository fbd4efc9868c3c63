"""Small files other people own that a report reads (RECORDs, conda-meta records, the loader's cache): a
regular file only, opened without blocking, up to a size cap.

O_NONBLOCK makes the open of a FIFO return at once instead of waiting for a writer, and the fstat check then
refuses it (and devices, sockets, directories) before a read could block or never end.
"""
from __future__ import annotations

import os
import stat
from typing import BinaryIO


def open_regular(path: str, limit: int) -> BinaryIO | None:
    """The open file at ``path`` when it is a regular file of at most ``limit`` bytes, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > limit:
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
