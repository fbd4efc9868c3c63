"""The parent side of the harness: one child process per Session, requests as data, answers as data.

Nothing here calls the loader: a library that crashes, hangs or never unloads does so in the child, and the
caller gets a HarnessError (ChildCrashed, HarnessTimeout) or a plain answer instead.
"""
from __future__ import annotations

import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from elfpatch.errors import ElfPatchError
from elfpatch.harness import stopping
from elfpatch.harness.lddebug import LdDebug, parse_file

CHILD = str(Path(__file__).with_name("child.py"))
DEFAULT_LD_DEBUG = "bindings,scopes,files"
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 86400.0  # a day: longer is a typo, and select() overflows on 1e308
POLL_SLICE = 0.25  # how often death is checked without a pidfd (and output drained while waiting)
DEATH_GRACE = 5.0  # after the answer pipe closes, how long the child may take to finish dying
OUTPUT_TAIL = 1 << 20  # bytes of the child's stdout and of its stderr kept (the end)
SUMMARY_CHARS = 400  # characters of stderr quoted in a one-line crash message
MAX_ANSWER = 64 << 20  # an answer line longer than this is not the child's

# dlopen flags (glibc's values; the same on every architecture elfpatch's fixtures build for).
RTLD_LAZY, RTLD_NOW, RTLD_NOLOAD, RTLD_DEEPBIND = 0x1, 0x2, 0x4, 0x8
RTLD_LOCAL, RTLD_GLOBAL, RTLD_NODELETE = 0x0, 0x100, 0x1000
FLAG_NAMES = {"RTLD_LAZY": RTLD_LAZY, "RTLD_NOW": RTLD_NOW, "RTLD_NOLOAD": RTLD_NOLOAD,
              "RTLD_DEEPBIND": RTLD_DEEPBIND, "RTLD_LOCAL": RTLD_LOCAL, "RTLD_GLOBAL": RTLD_GLOBAL,
              "RTLD_NODELETE": RTLD_NODELETE}

Flags = Union[int, str]
PathLike = Union[str, "os.PathLike[str]"]


class HarnessError(ElfPatchError):
    """The harness could not do what was asked (child failed to start, bad request)."""


class DlError(HarnessError):
    """dlopen, dlsym or dlclose failed in the child; ``message`` is dlerror's text."""


class ChildCrashed(HarnessError):
    """The child died during a request (a library crashed it); ``signal`` is set when a signal killed it."""

    def __init__(self, message: str, returncode: int | None, stderr: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.signal = -returncode if returncode is not None and returncode < 0 else None
        self.stderr = stderr


class HarnessTimeout(HarnessError):
    """A request did not finish within the timeout; the child was killed."""


class ImportFailed(HarnessError):
    """``import_module`` raised in the child; ``message`` is the exception's one-line text."""


class BadTimeout(HarnessError, ValueError):
    """A timeout that is not a finite number of seconds in range (a usage error: also a ValueError)."""


def parse_flags(flags: Flags) -> int:
    """``RTLD_NOW|RTLD_LOCAL`` (names, ``|`` or ``,`` separated, ``RTLD_`` optional) or an int."""
    if isinstance(flags, int):
        return flags
    value = 0
    for part in flags.replace(",", "|").split("|"):
        name = part.strip().upper()
        if not name:
            continue
        name = name if name.startswith("RTLD_") else f"RTLD_{name}"
        if name not in FLAG_NAMES:
            raise HarnessError(f"unknown dlopen flag {part.strip()!r}")
        value |= FLAG_NAMES[name]
    return value


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _loader_path(path: PathLike) -> str:
    """A path with a slash made absolute (the link map then names it the same way); a bare name such as
    ``libc.so.6`` left for dlopen to search."""
    text = os.fspath(path)
    return os.path.abspath(text) if "/" in text else text


class Exited:
    """How the child ended: ``returncode`` (negative: killed by that signal) and what it printed."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self) -> str:
        return f"Exited(returncode={self.returncode})"


class Session:
    """One child process that loads libraries on request. Use as a context manager.

    Paths with a slash are made absolute before they reach the child; bare names are searched by dlopen.
    ``stdout()`` and ``stderr()`` return what the libraries printed so far (the last ``OUTPUT_TAIL`` bytes
    of each; ``stdout_dropped``/``stderr_dropped`` count what was dropped before them); ``debug()`` the parsed
    ``LD_DEBUG`` output (see ``elfpatch.harness.lddebug``).

    The child runs in a process group of its own, and the group is killed when the session ends, so a
    helper process that a library started goes with it; the group also goes when this process ends however
    it ends (SIGKILL too, whichever thread started the session: the child holds the read end of a pipe
    whose write end only this process has, see ``child.guard_parent``). Requests and answers travel on two
    private pipes (never stdin/stdout, never inherited by what the libraries exec); every answer carries the
    child's PID and the request's number, so a copy of the child made by a library's fork() cannot answer
    for it.
    """

    def __init__(self, *, env: Mapping[str, str] | None = None, ld_debug: str | None = DEFAULT_LD_DEBUG,
                 timeout: float = DEFAULT_TIMEOUT, cwd: str | None = None) -> None:
        self.timeout = check_timeout(timeout)
        self.exited: Exited | None = None
        self._out = _Tail()
        self._err = _Tail()
        self._paths: dict[int, str] = {}
        self._lost: str | None = None  # why the child is gone, once it crashed or was killed
        self._seq = 0
        self._buf = b""
        self._returncode: int | None = None
        self._proc: subprocess.Popen | None = None
        self._lifeline = -1
        with stopping.held():  # a signal meanwhile ends us only once the child is tracked
            self._tmp = tempfile.mkdtemp(prefix="elfpatch-harness-")
            stopping.track(self, self._abandon)
            self._start(env, ld_debug, cwd)
        self.pid: int = self._child.pid
        assert self._child.stdout is not None and self._child.stderr is not None  # both are pipes
        self._req, self._resp = self._pipes
        self._pidfd = _pidfd(self.pid)
        for fd in (self._resp, self._child.stdout.fileno(), self._child.stderr.fileno()):
            os.set_blocking(fd, False)
        try:
            self._receive(0, "start-up", self.timeout)
            self.preloaded: list[str] = self.loaded()  # the child's own objects (Python, libc, cffi ...)
        except HarnessError:
            self._cleanup()
            raise

    @property
    def _child(self) -> subprocess.Popen[bytes]:
        """The child process: _start sets it before anything else uses it."""
        assert self._proc is not None
        return self._proc

    def _start(self, env: Mapping[str, str] | None, ld_debug: str | None, cwd: str | None) -> None:
        child_env = dict(os.environ if env is None else env)
        for var in ("LD_DEBUG", "LD_DEBUG_OUTPUT"):
            child_env.pop(var, None)
        if ld_debug:
            child_env["LD_DEBUG"] = ld_debug
            child_env["LD_DEBUG_OUTPUT"] = os.path.join(self._tmp, "ld")
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        life_r, life_w = os.pipe()  # never written: its end, when this process dies, kills the child's group
        try:
            self._proc = subprocess.Popen([sys.executable, CHILD, str(req_r), str(resp_w), str(life_r)],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, pass_fds=(req_r, resp_w, life_r),
                                          env=child_env, cwd=cwd, start_new_session=True)
        except OSError as exc:
            for fd in (req_w, resp_r, life_w):
                os.close(fd)
            shutil.rmtree(self._tmp, ignore_errors=True)
            stopping.untrack(self)
            raise HarnessError(f"cannot start the harness child: {exc}") from None
        finally:
            for fd in (req_r, resp_w, life_r):
                os.close(fd)
        self._pipes = (req_w, resp_r)
        self._lifeline = life_w

    # -- plumbing ----------------------------------------------------------------------------------

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

    def request(self, op: str, timeout: float | None = None, what: str | None = None, **fields: Any) -> dict:
        """Send one request and return the child's answer (a dict with ``ok``); raises ChildCrashed or
        HarnessTimeout when the child dies or hangs. ``what`` names the step in those errors."""
        if what is None:
            subject = fields.get("name") or fields.get("path") or fields.get("module")
            what = f"{op} {subject}" if subject else op
        wait = self.timeout if timeout is None else check_timeout(timeout)
        if self.exited is not None or self._lost is not None or self._resp < 0:
            why = self._lost or "it ended"
            raise HarnessError(f"the harness child has already exited ({why}); cannot {what}")
        if not self._alive():
            self._died(what)  # it died between requests (a library's own thread crashed it)
        self._seq += 1
        try:
            os.write(self._req, json.dumps({**fields, "op": op, "id": self._seq}).encode() + b"\n")
        except BrokenPipeError:
            pass  # the child is gone; _receive reports how
        except (OSError, TypeError, ValueError) as exc:
            raise HarnessError(f"cannot send {what} to the harness child: {exc}") from None
        return self._receive(self._seq, what, wait)

    def _receive(self, seq: int, what: str, timeout: float) -> dict:
        """The answer to request ``seq``: lines from another process (a fork of the child) or that are not
        the child's JSON are skipped. Drains the child's output meanwhile, so it never blocks on a pipe."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self._answer(seq)
            if answer is not None:
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                self._lost = f"killed after a timeout during {what}"
                raise HarnessTimeout(f"{what}: no answer within {timeout:g} s; the harness child was killed")
            dead = self._wait_io(min(left, POLL_SLICE))
            eof = self._drain_resp()
            answer = self._answer(seq)
            if answer is not None:
                return answer
            if eof or dead or not self._alive():
                self._died(what)

    def _answer(self, seq: int) -> dict | None:
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict) and answer.get("pid") == self.pid and answer.get("id") == seq:
                return answer
        if len(self._buf) > MAX_ANSWER:
            self._kill()
            self._lost = "killed after an oversized answer"
            raise HarnessError(f"the harness child sent more than {MAX_ANSWER} bytes without a line break; "
                               "it was killed")
        return None

    def _wait_io(self, seconds: float) -> bool:
        """Wait for an answer, output or the child's death; drain output. True when the child has died."""
        assert self._child.stdout is not None and self._child.stderr is not None  # both are pipes
        fds = [self._resp, self._child.stdout.fileno(), self._child.stderr.fileno()]
        if self._pidfd is not None:
            fds.append(self._pidfd)
        try:
            ready = select.select(fds, [], [], max(seconds, 0))[0]
        except (OSError, ValueError):
            ready = []
        self._drain_output()
        return self._pidfd is not None and self._pidfd in ready

    def _drain_resp(self) -> bool:
        """Read what the answer pipe holds; True at its end (every writer gone: the child is too)."""
        while True:
            try:
                chunk = os.read(self._resp, 65536)
            except OSError:  # BlockingIOError: nothing more for now
                return False
            if not chunk:
                return True
            self._buf += chunk

    def _drain_output(self) -> None:
        for pipe, tail in ((self._child.stdout, self._out), (self._child.stderr, self._err)):
            if pipe is None or pipe.closed:
                continue
            while True:
                try:
                    chunk = os.read(pipe.fileno(), 1 << 20)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    break
                tail.add(chunk)

    def _alive(self) -> bool:
        """Whether the child still runs; a dead child is left unreaped (its PID, the process group's ID,
        cannot be reused before the group is killed)."""
        if self._returncode is not None:
            return False
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:
            return False

    def _died(self, what: str) -> None:
        deadline = time.monotonic() + DEATH_GRACE
        while self._alive() and time.monotonic() < deadline:  # the pipe closed first: give exit a moment
            self._wait_io(POLL_SLICE)
        rc = self._kill()
        self._drain_output()
        how = f"was killed by {signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"
        self._lost = f"{how} during {what}"
        raise ChildCrashed(f"the harness child {how} during {what}" + self._err.summary(), rc, self.stderr())

    def _kill(self) -> int:
        """Kill the child's whole process group (helpers a library started too), reap the child, return
        its status."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self._returncode is None:
            self._returncode = self._child.wait()
        return self._returncode

    def _cleanup(self) -> None:
        self._kill()
        self._drain_output()
        for fd in (self._req, self._resp, self._pidfd, self._lifeline):  # the lifeline after the kill
            if fd is not None and fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req = self._resp = self._lifeline = -1
        self._pidfd = None
        for pipe in (self._child.stdout, self._child.stderr):
            if pipe is not None:
                pipe.close()
        shutil.rmtree(self._tmp, ignore_errors=True)
        stopping.untrack(self)

    def _abandon(self) -> None:
        """What a signal that ends the process does to this session (see ``stopping``): kill the child's
        group, reap the child and remove the files, with no lock the interrupted code might hold."""
        if self._proc is not None and self._returncode is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
                os.waitpid(self._proc.pid, 0)
            except (ProcessLookupError, PermissionError, ChildProcessError):
                pass
            self._returncode = -signal.SIGKILL  # reaped: the group is never signalled again (its ID may be reused)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def terminate(self) -> None:
        """Kill the child (no exit handlers run; use ``exit()`` for those) and remove its files."""
        if self._resp >= 0:
            self._cleanup()

    @staticmethod
    def _check(answer: dict, what: str, *fields: str) -> dict:
        if answer.get("ok"):
            missing = [f for f in fields if f not in answer]
            if missing:
                raise HarnessError(f"the harness child's answer lacks {', '.join(missing)}", what)
            return answer
        if answer.get("kind") == "dlerror":
            raise DlError(str(answer.get("error")))  # dlerror's text already names the object
        if answer.get("kind") == "import":
            raise ImportFailed(str(answer.get("error")), what)
        raise HarnessError(str(answer.get("error", "request failed")), what)

    # -- the operations ----------------------------------------------------------------------------

    def open(self, path: PathLike | None, flags: Flags = "RTLD_NOW|RTLD_LOCAL") -> int:
        """dlopen ``path`` (None: the main program); returns a handle number, raises DlError."""
        target = None if path is None else _loader_path(path)
        answer = self.request("open", what=f"dlopen {target}", path=target, flags=parse_flags(flags))
        handle = self._check(answer, target or "dlopen(NULL)", "handle")["handle"]
        self._paths[handle] = target or ""
        return handle

    def close(self, handle: int) -> None:
        """dlclose; raises DlError when dlclose fails."""
        what = f"dlclose {self._paths.get(handle, f'handle {handle}')}"
        self._check(self.request("close", what=what, handle=handle), what)
        self._paths.pop(handle, None)

    def import_module(self, name: str) -> None:
        """Import the Python module ``name`` in the child, as ``python -c 'import NAME'`` run in the
        session's working directory would (its extension modules are dlopened by Python itself); raises
        ImportFailed with the exception's one-line text."""
        self._check(self.request("import", what=f"import {name}", module=name), f"import {name}")

    def sym(self, handle: int, name: str) -> int:
        """dlsym: the symbol's address as an int; raises DlError when it is not found."""
        return self._check(self.request("sym", handle=handle, name=name), name, "address")["address"]

    def call(self, handle: int, name: str, signature: str = "int(void)", *args: Any,
             timeout: float | None = None) -> Any:
        """Look ``name`` up with dlsym and call it as ``signature`` (C syntax, e.g. ``int(int, char *)``).
        Ints, floats, str/bytes (for ``char *``) and None (NULL) go in; numbers, str (``char *`` results),
        addresses (other pointers) or None come back."""
        wire = [{"bytes": a.hex()} if isinstance(a, (bytes, bytearray)) else a for a in args]
        answer = self.request("call", timeout=timeout, what=f"call {name}", handle=handle, name=name,
                              signature=signature, args=wire)
        return self._check(answer, name, "value")["value"]

    def resident(self, path: PathLike) -> bool:
        """Whether ``path`` is loaded in the child: dlopen with RTLD_NOLOAD (the reference it takes is
        given back at once)."""
        target = _loader_path(path)
        answer = self.request("noload", what=f"RTLD_NOLOAD probe of {target}", path=target)
        return bool(self._check(answer, os.fspath(path), "resident")["resident"])

    def open_handles(self, path: PathLike) -> int:
        """How many handles this session opened for ``path`` and has not closed."""
        target = _loader_path(path)
        return sum(1 for p in self._paths.values() if p == target)

    def why_resident(self, path: PathLike) -> list[dict]:
        """Why ``path`` is still loaded: dlcheck's blockers (unique-symbol, nodelete-flag, still-referenced,
        open-handle, ...), or [] when it is not loaded."""
        from elfpatch.harness.blockers import explain_resident

        return explain_resident(self, os.fspath(path))

    def loaded(self) -> list[str]:
        """The names of every object in the child's link map, in load order ('' is the main program)."""
        objects = self._check(self.request("loaded"), "link map", "objects")["objects"]
        if not isinstance(objects, list) or not all(isinstance(o, str) for o in objects):
            raise HarnessError("the harness child's link map is not a list of names")
        return objects

    def exit(self, code: int = 0, *, run_handlers: bool = True, timeout: float | None = None) -> Exited:
        """End the child with exit(code) (atexit handlers and static destructors run, as at the end of a C
        program) or, with ``run_handlers=False``, _exit(code). Returns how it ended; the session's files
        (``stdout()``, ``debug()``) stay readable until ``terminate()``."""
        self.request("exit" if run_handlers else "_exit", code=code)
        deadline = time.monotonic() + (self.timeout if timeout is None else check_timeout(timeout))
        while self._alive():
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                self._lost = "killed: it did not finish exiting"
                raise HarnessTimeout("exit: the harness child did not finish exiting; it was killed")
            self._wait_io(min(left, POLL_SLICE))
        rc = self._kill()  # reaps it, and ends any helper process left in its group
        self._drain_output()
        self.exited = Exited(rc, self.stdout(), self.stderr())
        return self.exited

    # -- what the child left behind ----------------------------------------------------------------

    def stdout(self) -> str:
        """What the loaded code wrote to file descriptor 1 so far (its last OUTPUT_TAIL bytes)."""
        if self._resp >= 0:
            self._drain_output()
        return self._out.text()

    def stderr(self) -> str:
        """What the loaded code (and the child's Python, on a failure) wrote to file descriptor 2 so far
        (its last OUTPUT_TAIL bytes)."""
        if self._resp >= 0:
            self._drain_output()
        return self._err.text()

    @property
    def stdout_dropped(self) -> int:
        return self._out.total - len(self._out.data())

    @property
    def stderr_dropped(self) -> int:
        return self._err.total - len(self._err.data())

    def _debug_path(self) -> str:
        return os.path.join(self._tmp, f"ld.{self.pid}")

    def debug_text(self) -> str:
        """The loader's LD_DEBUG output so far, as text, whole (it can be hundreds of MB: ``debug()`` reads it
        a line at a time)."""
        try:
            with open(self._debug_path(), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def debug(self) -> LdDebug:
        """The loader's LD_DEBUG output so far, parsed a line at a time, what is kept bounded (``notes()``
        says what was not); empty when the session runs without LD_DEBUG."""
        return parse_file(self._debug_path(), self.pid)


class _Tail:
    """The last OUTPUT_TAIL bytes of a stream (whole chunks, trimmed when read), and how many came before."""

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.size - len(self.chunks[0]) >= OUTPUT_TAIL:
            self.size -= len(self.chunks[0])
            self.dropped += len(self.chunks.popleft())

    def data(self) -> bytes:
        data = b"".join(self.chunks)
        return data[-OUTPUT_TAIL:]

    @property
    def total(self) -> int:
        return self.dropped + self.size

    def text(self) -> str:
        return self.data().decode("utf-8", "replace")

    def summary(self) -> str:
        """``: LAST LINES`` for a one-line error (at most SUMMARY_CHARS of them), saying how much there was
        when that is not all of it."""
        tail = " ".join(line.strip() for line in self.text().strip().splitlines()[-3:])
        if not tail:
            return ""
        shown = tail if len(tail) <= SUMMARY_CHARS else "..." + tail[-SUMMARY_CHARS:]
        if len(shown) < len(tail) or self.total > OUTPUT_TAIL:
            shown += f" (stderr: {_size(self.total)}, only its end shown)"
        return f": {shown}"


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux >= 5.3), or None: then death is
    polled every POLL_SLICE seconds."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def check_timeout(value: Any) -> float:
    """A timeout in seconds: a finite number above 0 and at most MAX_TIMEOUT."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (0 < seconds <= MAX_TIMEOUT):
        raise BadTimeout(f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, "
                         f"not {value!r}")
    return seconds


def run(ops: Sequence[Mapping[str, Any]], **session_args: Any) -> dict:
    """Run raw requests (``{"op": "open", "path": ..., "flags": 2}`` ...) in a fresh child; returns
    ``{"results": [answer, ...], "stdout": ..., "stderr": ..., "returncode": ..., "debug": LdDebug}``.
    A request that kills the child ends the list with ``{"ok": false, "kind": "crash", "error": ...}``."""
    results: list[dict] = []
    with Session(**session_args) as s:
        rc = None
        try:
            for op in ops:
                name = op.get("op")
                if not isinstance(name, str):
                    raise HarnessError(f"a request needs an 'op' name: {dict(op)!r}")
                if name in ("exit", "_exit"):
                    rc = s.exit(int(op.get("code", 0)), run_handlers=name == "exit").returncode
                    results.append({"ok": True})
                    break
                results.append(s.request(name, **{k: v for k, v in op.items() if k != "op"}))
        except ChildCrashed as exc:
            results.append({"ok": False, "kind": "crash", "error": exc.message})
            rc = exc.returncode
        return {"results": results, "stdout": s.stdout(), "stderr": s.stderr(), "returncode": rc,
                "debug": s.debug()}
