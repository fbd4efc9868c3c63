"""Copying bytes between file descriptors in the kernel: a range (copy_file_range, else sendfile) and a whole
file that keeps its holes. The commit's temp and a wheel's unchanged stretches are both copied here."""
from __future__ import annotations

import errno
import fcntl
import os

from elfpatch.errors import WriteError
from elfpatch.fs import teststop

__all__ = ["copy_fd", "copy_sparse"]

COPY_STEP = 16 << 20  # bytes per copy call: a kill or stop point can land in the middle of a copy
FICLONE = 0x40049409


def copy_fd(src: int, dst: int, size: int, src_offset: int = 0, dst_offset: int = 0) -> None:
    """Copy ``size`` bytes in the kernel: copy_file_range (may reflink), else sendfile."""
    done = 0
    use_cfr = hasattr(os, "copy_file_range")
    while done < size:
        n = 0
        step = min(size - done, COPY_STEP)
        if use_cfr:
            try:
                n = os.copy_file_range(src, dst, step, src_offset + done, dst_offset + done)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                    raise
                use_cfr = False
                continue
        else:
            os.lseek(dst, dst_offset + done, os.SEEK_SET)
            n = os.sendfile(dst, src, src_offset + done, step)
        if n == 0:
            raise WriteError("source file shrank while it was copied")
        done += n
        if done < size:
            teststop.stop("copying")


def copy_sparse(src: int, dst: int, size: int) -> None:
    """A whole-file copy that keeps holes: a reflink where the file system has them, else the data extents
    (SEEK_DATA/SEEK_HOLE) copied and the rest left unwritten."""
    try:
        fcntl.ioctl(dst, FICLONE, src)
        if os.fstat(dst).st_size == size:
            return
    except OSError:
        pass
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(src, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    break  # only a hole is left
                raise
            if start >= size:
                break
            end = min(os.lseek(src, start, os.SEEK_HOLE), size)
            copy_fd(src, dst, end - start, start, start)
            pos = end
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP) or pos:
            raise
        copy_fd(src, dst, size)  # no SEEK_DATA here: a plain copy
        return
    os.ftruncate(dst, size)
