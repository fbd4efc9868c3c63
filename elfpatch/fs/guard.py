"""A SIGBUS guard for read-only maps of files that other processes may truncate.

Reading a page of a map past the file's current end raises SIGBUS, and its default action kills the whole
run (exit 135, no report). Inside a guarded range the handler instead maps a page of zeros over the faulting
page, so the read completes (with zeros) and the run goes on; the owner of the range then asks ``faulted``
and turns the file into a per-file error. A fault outside every guarded range restores the default action,
so a real bug still dies as it would have (or meets the handler that was installed before, such as
faulthandler's).

Linux with glibc only (the handler is installed with sigaction through ctypes); elsewhere ``guard`` is a
no-op and a truncation still kills the run, as before.
"""
from __future__ import annotations

import ctypes
import mmap
import signal
import sys
import threading

SA_SIGINFO = 4
MAP_FIXED = 0x10

_lock = threading.Lock()
_ranges: dict[int, list[int]] = {}  # id -> [start, end, faults]
_snapshot: tuple[list[int], ...] = ()  # what the handler reads: replaced whole, never changed in place
_installed: bool | None = None
_keep: list[object] = []  # the ctypes callback and sigaction must outlive the handler


class _SigInfo(ctypes.Structure):  # the head of siginfo_t: si_addr follows three ints (aligned)
    _fields_ = [("si_signo", ctypes.c_int), ("si_errno", ctypes.c_int), ("si_code", ctypes.c_int),
                ("si_addr", ctypes.c_void_p)]


class _SigAction(ctypes.Structure):  # glibc's struct sigaction on Linux
    _fields_ = [("sa_handler", ctypes.c_void_p), ("sa_mask", ctypes.c_ulong * (128 // ctypes.sizeof(ctypes.c_ulong))),
                ("sa_flags", ctypes.c_int), ("sa_restorer", ctypes.c_void_p)]


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(_SigInfo), ctypes.c_void_p)


def _install() -> bool:
    global _installed
    if _installed is not None:
        return _installed
    _installed = False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        page = mmap.PAGESIZE

        def on_sigbus(signo: int, info: ctypes._Pointer, context: int) -> None:
            addr = info.contents.si_addr or 0
            for r in _snapshot:
                if r[0] <= addr < r[1]:
                    start = addr & ~(page - 1)
                    if libc.mmap(start, page, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED,
                                 -1, 0) == start:
                        r[2] += 1
                        return
            # Not ours: put back the handler that was there (default: die), which the retried access meets.
            libc.sigaction(signal.SIGBUS, ctypes.byref(previous), None)

        callback = _HANDLER(on_sigbus)
        action, previous = _SigAction(), _SigAction()
        action.sa_handler = ctypes.cast(callback, ctypes.c_void_p).value
        action.sa_flags = SA_SIGINFO
        if libc.sigaction(signal.SIGBUS, ctypes.byref(action), ctypes.byref(previous)) != 0:
            return False
        _keep.extend((callback, action, previous, libc))
        _installed = True
    except (OSError, AttributeError, ValueError):
        pass
    return _installed


class _PyBuffer(ctypes.Structure):  # CPython's Py_buffer
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]


def _address(m: mmap.mmap) -> int:
    """The start address of a map, through the buffer protocol (a read-only map has no writable view)."""
    view = _PyBuffer()
    if _get_buffer(m, ctypes.byref(view), 0) != 0:
        raise ValueError("no buffer")
    try:
        return view.buf or 0
    finally:
        _release_buffer(ctypes.byref(view))


def _publish() -> None:
    global _snapshot
    _snapshot = tuple(_ranges.values())


class Guard:
    """Guards one map while it is open; ``faulted`` says whether a read hit a truncated page."""

    def __init__(self, m: mmap.mmap) -> None:
        self.key = id(self)
        self.active = False
        if not _install():
            return
        try:
            start = _address(m)
        except (ValueError, AttributeError, TypeError):
            return
        self._range = [start, start + len(m), 0]
        with _lock:
            _ranges[self.key] = self._range
            _publish()
        self.active = True

    @property
    def faulted(self) -> bool:
        return self.active and self._range[2] > 0

    def release(self) -> None:
        with _lock:
            _ranges.pop(self.key, None)
            _publish()
