"""The harness child: the only process in which elfpatch calls dlopen, dlsym and dlclose.

Started by ``elfpatch.harness.session.Session`` as ``python child.py REQUEST_FD RESPONSE_FD LIFELINE_FD``. Reads one
JSON request per line on REQUEST_FD and writes one JSON answer per line on RESPONSE_FD; both are private
(not inherited by programs the libraries exec). The process's own stdin is /dev/null, its stdout and stderr
belong to the libraries it loads. Uses cffi in ABI mode on the running process's libc, so no compiler is
needed, and imports nothing from elfpatch, so a broken library can only take this process down.

Every request is ``{"op": NAME, "id": N, ...}``; every answer is ``{"ok": true, "pid": PID, "id": N, ...}``
or ``{"ok": false, "error": TEXT, "kind": "dlerror" | "import" | "usage", "pid": PID, "id": N}``. A copy of
this process made by a library's fork() that returns here exits at once, without a word. Before running a
request the child appends a marker line to the ``LD_DEBUG_OUTPUT`` file, so the parent can tell which
request made the loader print what.

LIFELINE_FD is the read end of a pipe nobody writes to and only the parent holds the write end of: when the
parent dies, however (SIGKILL included), that end closes and the kernel kills this process group (see
``guard_parent``), even while a library spins in C in a request.
"""
from __future__ import annotations

import fcntl
import importlib
import json
import os
import select
import signal
import sys

from cffi import FFI

TYPE_CHECKING = False  # the child starts once per session: typing is not imported
if TYPE_CHECKING:
    from typing import Any

CDEF = """
void *dlopen(const char *filename, int flags);
int dlclose(void *handle);
void *dlsym(void *handle, const char *symbol);
char *dlerror(void);
int dlinfo(void *handle, int request, void *info);
struct link_map { uintptr_t l_addr; char *l_name; void *l_ld; struct link_map *l_next, *l_prev; };
int fflush(void *stream);
void exit(int status);
void _exit(int status);
"""
RTLD_LAZY, RTLD_NOLOAD, RTLD_DI_LINKMAP = 0x1, 0x4, 2
MARKER = "elfpatch-harness op"

ffi = FFI()
ffi.cdef(CDEF)
C = ffi.dlopen(None)
# cffi looks a function up with dlsym on first use, and a dlsym clears dlerror's pending message: resolve
# every function now, so that the first dlerror() after a failed dlopen still has something to say.
for _name in ("dlopen", "dlclose", "dlsym", "dlerror", "dlinfo", "fflush", "exit", "_exit"):
    getattr(C, _name)


class UsageError(Exception):
    """A malformed request (bad signature, unknown handle): the caller's mistake, not the loader's."""


class DlError(Exception):
    """dlopen/dlsym/dlclose failed; the message is dlerror's text."""


def dlerror() -> str:
    err = C.dlerror()
    return ffi.string(err).decode("utf-8", "replace") if err != ffi.NULL else "unknown dynamic loader error"


class Child:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.handles: dict[int, object] = {}
        self.next_id = 1
        self.op_count = 0
        self.debug_fd = self._open_debug_log()

    @staticmethod
    def _open_debug_log() -> int | None:
        prefix = os.environ.get("LD_DEBUG_OUTPUT")
        if not prefix or not os.environ.get("LD_DEBUG"):
            return None
        try:  # ld.so appends to the same file unbuffered, so markers and its lines stay in order
            return os.open(f"{prefix}.{os.getpid()}", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError:
            return None

    def mark(self, name: str) -> None:
        self.op_count += 1
        if self.debug_fd is not None:
            os.write(self.debug_fd, f"{os.getpid()}:\t{MARKER} {self.op_count} {name}\n".encode())

    # -- requests --------------------------------------------------------------------------------------

    def op_open(self, req: dict) -> dict:
        path = req.get("path")
        handle = C.dlopen(ffi.NULL if path is None else os.fsencode(path), int(req.get("flags", 2)))
        if handle == ffi.NULL:
            raise DlError(dlerror())
        hid = self.next_id
        self.next_id += 1
        self.handles[hid] = handle
        return {"handle": hid}

    def _handle(self, req: dict) -> object:
        try:
            return self.handles[req["handle"]]
        except KeyError:
            raise UsageError(f"no open handle {req.get('handle')!r}") from None

    def op_close(self, req: dict) -> dict:
        handle = self._handle(req)
        del self.handles[req["handle"]]
        if C.dlclose(handle) != 0:
            raise DlError(dlerror())
        return {}

    def _sym(self, req: dict) -> object:
        C.dlerror()  # clear a stale error: a symbol's value may legitimately be NULL
        addr = C.dlsym(self._handle(req), req["name"].encode())
        if addr == ffi.NULL:
            err = C.dlerror()
            if err != ffi.NULL:
                raise DlError(ffi.string(err).decode("utf-8", "replace"))
        return addr

    def op_sym(self, req: dict) -> dict:
        return {"address": int(ffi.cast("uintptr_t", self._sym(req)))}

    def op_call(self, req: dict) -> dict:
        signature = req.get("signature", "int(void)")
        paren = signature.find("(")
        if paren <= 0:
            raise UsageError(f"not a C function signature: {signature!r}")
        try:
            fntype = ffi.typeof(f"{signature[:paren]}(*){signature[paren:]}")
        except Exception as exc:  # noqa: BLE001 - cffi's parser raises its own CDefError, and others
            raise UsageError(f"bad signature {signature!r}: {exc}") from None
        args = req.get("args", [])
        if len(args) != len(fntype.args) and not fntype.ellipsis:
            raise UsageError(f"{signature} takes {len(fntype.args)} arguments, got {len(args)}")
        addr = self._sym(req)
        if addr == ffi.NULL:
            raise UsageError(f"symbol {req['name']} is NULL")
        fn = ffi.cast(fntype, addr)
        value = fn(*[convert_arg(t, a) for t, a in zip(fntype.args, args)])
        return {"value": convert_result(fntype.result, value)}

    def op_noload(self, req: dict) -> dict:
        handle = C.dlopen(os.fsencode(req["path"]), RTLD_LAZY | RTLD_NOLOAD)
        if handle == ffi.NULL:
            C.dlerror()
            return {"resident": False}
        C.dlclose(handle)  # the probe took a reference; give it back
        return {"resident": True}

    def op_loaded(self, req: dict) -> dict:
        main = C.dlopen(ffi.NULL, RTLD_LAZY)
        lm = ffi.new("struct link_map **")
        if C.dlinfo(main, RTLD_DI_LINKMAP, lm) != 0:
            raise DlError(dlerror())
        names = []
        node = lm[0]
        while node != ffi.NULL:
            names.append(os.fsdecode(ffi.string(node.l_name)) if node.l_name != ffi.NULL else "")
            node = node.l_next
        return {"objects": names}

    def op_import(self, req: dict) -> dict:
        name = req.get("module")
        if not isinstance(name, str) or not name:
            raise UsageError("import needs a module name")
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and the rest: the module's failure, reported
            raise ImportError_(f"cannot import {name}: {type(exc).__name__}: {exc}") from None
        return {}

    def run(self, op: str, req: dict) -> dict:
        """The answer to one request: the handler's result, or the kind and text of its failure."""
        handler = getattr(self, f"op_{op}", None)
        try:
            if handler is None:
                raise UsageError(f"unknown op {op!r}")
            return {"ok": True, **handler(req)}
        except DlError as exc:
            return {"ok": False, "kind": "dlerror", "error": str(exc)}
        except ImportError_ as exc:
            return {"ok": False, "kind": "import", "error": str(exc)}
        except UsageError as exc:
            return {"ok": False, "kind": "usage", "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a bad request must not end the session
            return {"ok": False, "kind": "usage", "error": f"{type(exc).__name__}: {exc}"}

    def forked(self) -> bool:
        """True in a copy of this process that a library's fork() made: it must not answer."""
        return os.getpid() != self.pid


class ImportError_(Exception):
    """A module given to the import request raised."""


def convert_arg(ctype: Any, value: object) -> object:
    if isinstance(value, dict) and "bytes" in value:  # bytes travel as {"bytes": HEX}
        value = bytes.fromhex(value["bytes"])
    if ctype.kind == "pointer":
        if value is None:
            return ffi.NULL
        if isinstance(value, str):
            return ffi.new("char[]", value.encode())
        if isinstance(value, bytes):
            return ffi.new("char[]", value)
        if isinstance(value, int):
            return ffi.cast(ctype, value)
    return value


def convert_result(ctype: Any, value: Any) -> object:
    if ctype.kind == "void":
        return None
    if ctype.kind == "pointer":
        if ctype.item.cname in ("char", "const char") and value != ffi.NULL:
            return ffi.string(value).decode("utf-8", "replace")
        return None if value == ffi.NULL else int(ffi.cast("uintptr_t", value))
    if ctype.kind == "primitive" and ctype.cname in ("char", "signed char", "unsigned char"):
        return value if isinstance(value, int) else ord(value)
    return value


def _end(op: str, code: int) -> None:
    C.fflush(ffi.NULL)
    # exit() runs atexit handlers and static destructors, as a C program's end would; _exit() does not.
    (C.exit if op == "exit" else C._exit)(code)


def _flush_output() -> None:
    """Send what was printed during a request to its pipe before the parent reads the answer."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()  # what Python code printed (an imported module)
        except (OSError, ValueError):
            pass
    C.fflush(ffi.NULL)  # what the library printed


def guard_parent(lifeline: int) -> None:
    """Have the kernel SIGKILL this process group when the lifeline's write end closes (the parent died):
    O_ASYNC with F_SETSIG sends the signal at the last writer's close, with no thread or GIL of ours needed,
    so a constructor spinning in C goes too. Where the kernel refuses, a thread waits for the pipe's end."""
    who = -os.getpgrp() if os.getpgrp() == os.getpid() else os.getpid()  # a group only when it is ours
    try:
        fcntl.fcntl(lifeline, fcntl.F_SETOWN, who)
        fcntl.fcntl(lifeline, fcntl.F_SETSIG, signal.SIGKILL)
        fcntl.fcntl(lifeline, fcntl.F_SETFL, fcntl.fcntl(lifeline, fcntl.F_GETFL) | os.O_ASYNC)
    except (OSError, AttributeError):
        import threading

        threading.Thread(target=_die_at_end, args=(lifeline, who), daemon=True).start()
    poll = select.poll()
    poll.register(lifeline, select.POLLIN)
    if poll.poll(0):  # nothing is ever written: any event is the end, the parent died before the arming
        os.kill(who, signal.SIGKILL)


def _die_at_end(lifeline: int, who: int) -> None:
    while os.read(lifeline, 1):
        pass
    os.kill(who, signal.SIGKILL)


def main(argv: list[str]) -> int:
    requests_fd, answers_fd, lifeline = int(argv[1]), int(argv[2]), int(argv[3])
    guard_parent(lifeline)
    for fd in (requests_fd, answers_fd, lifeline):
        os.set_inheritable(fd, False)  # pass_fds made them inheritable: no helper a library execs keeps them
    requests = os.fdopen(requests_fd, "r")
    out = os.fdopen(answers_fd, "w", buffering=1)
    sys.path[0] = ""  # imports resolve as in ``python -c``: the working directory, not this file's folder
    child = Child()

    def answer(payload: dict, rid: object) -> None:
        # The leading newline ends whatever partial line a library may have written to this pipe.
        out.write("\n" + json.dumps({**payload, "pid": child.pid, "id": rid}) + "\n")
        out.flush()

    answer({"ok": True}, 0)
    for line in requests:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req["op"]
            rid = req.get("id")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            answer({"ok": False, "kind": "usage", "error": f"bad request: {exc}"}, None)
            continue
        child.mark(op)
        if op in ("exit", "_exit"):
            answer({"ok": True}, rid)
            _end(op, int(req.get("code", 0)))
        result = child.run(op, req)
        if child.forked():
            os._exit(0)  # a library forked inside this request and its copy came back here: vanish
        _flush_output()
        answer(result, rid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
