"""The parent side of the harness: one child process per Session, requests as data, answers as data.

Nothing here calls the loader: a library that crashes, hangs or never unloads does so in the child, and the
caller gets a HarnessError (ChildCrashed, HarnessTimeout) or a plain answer instead.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from elfpatch.errors import ElfPatchError
from elfpatch.harness.lddebug import LdDebug, parse

CHILD = str(Path(__file__).with_name("child.py"))
DEFAULT_LD_DEBUG = "bindings,scopes,files"
DEFAULT_TIMEOUT = 60.0

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
    ``stdout()`` and ``stderr()`` return what the libraries printed so far; ``debug()`` the parsed
    ``LD_DEBUG`` output (see ``elfpatch.harness.lddebug``).
    """

    def __init__(self, *, env: Mapping[str, str] | None = None, ld_debug: str | None = DEFAULT_LD_DEBUG,
                 timeout: float = DEFAULT_TIMEOUT, cwd: str | None = None) -> None:
        self.timeout = timeout
        self.exited: Exited | None = None
        self._tmp = tempfile.mkdtemp(prefix="elfpatch-harness-")
        self._buf = b""
        self._paths: dict[int, str] = {}
        self._lost: str | None = None  # why the child is gone, once it crashed or was killed
        child_env = dict(os.environ if env is None else env)
        for var in ("LD_DEBUG", "LD_DEBUG_OUTPUT"):
            child_env.pop(var, None)
        if ld_debug:
            child_env["LD_DEBUG"] = ld_debug
            child_env["LD_DEBUG_OUTPUT"] = os.path.join(self._tmp, "ld")
        self._out_path = os.path.join(self._tmp, "stdout")
        self._err_path = os.path.join(self._tmp, "stderr")
        resp_r, resp_w = os.pipe()
        try:
            with open(self._out_path, "wb") as out, open(self._err_path, "wb") as err:
                self._proc = subprocess.Popen([sys.executable, CHILD, str(resp_w)], stdin=subprocess.PIPE,
                                              stdout=out, stderr=err, pass_fds=(resp_w,), env=child_env,
                                              cwd=cwd)
        except OSError as exc:
            os.close(resp_r)
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise HarnessError(f"cannot start the harness child: {exc}") from None
        finally:
            os.close(resp_w)
        self._resp = resp_r
        try:
            self.pid: int = self._receive("start-up", self.timeout)["pid"]
            self.preloaded: list[str] = self.loaded()  # the child's own objects (Python, libc, cffi ...)
        except HarnessError:
            self._cleanup()
            raise

    # -- plumbing ----------------------------------------------------------------------------------

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

    def request(self, op: str, timeout: float | None = None, what: str | None = None, **fields: Any) -> dict:
        """Send one request and return the child's answer (a dict with ``ok``); raises ChildCrashed or
        HarnessTimeout when the child dies or hangs. ``what`` names the step in those errors."""
        if what is None:
            subject = fields.get("name") or fields.get("path")
            what = f"{op} {subject}" if subject else op
        if self.exited is not None or self._lost is not None or self._resp < 0:
            why = self._lost or "it ended"
            raise HarnessError(f"the harness child has already exited ({why}); cannot {what}")
        if self._proc.poll() is not None:
            self._died(what)  # it died between requests (a library's own thread crashed it)
        try:
            self._proc.stdin.write(json.dumps({"op": op, **fields}).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child is gone; _receive reports how
        return self._receive(what, self.timeout if timeout is None else timeout)

    def _receive(self, what: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            ready = select.select([self._resp], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self._kill()
                self._lost = f"killed after a timeout during {what}"
                raise HarnessTimeout(f"{what}: no answer within {timeout:g} s; the harness child was killed")
            chunk = os.read(self._resp, 65536)
            if not chunk:
                self._died(what)
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def _died(self, what: str) -> None:
        try:
            rc = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            rc = self._proc.returncode
        err = self.stderr()
        how = f"was killed by {signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"
        tail = " ".join(err.strip().splitlines()[-3:])
        self._lost = f"{how} during {what}"
        raise ChildCrashed(f"the harness child {how} during {what}" + (f": {tail}" if tail else ""), rc,
                           err)

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()

    def _cleanup(self) -> None:
        self._kill()
        if self._proc.stdin:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        if self._resp >= 0:
            os.close(self._resp)
            self._resp = -1
        shutil.rmtree(self._tmp, ignore_errors=True)

    def terminate(self) -> None:
        """Kill the child (no exit handlers run; use ``exit()`` for those) and remove its files."""
        if self._resp >= 0:
            self._cleanup()

    @staticmethod
    def _check(answer: dict, what: str) -> dict:
        if answer.get("ok"):
            return answer
        if answer.get("kind") == "dlerror":
            raise DlError(answer["error"])  # dlerror's text already names the object
        raise HarnessError(answer.get("error", "request failed"), what)

    # -- the operations ----------------------------------------------------------------------------

    def open(self, path: PathLike | None, flags: Flags = "RTLD_NOW|RTLD_LOCAL") -> int:
        """dlopen ``path`` (None: the main program); returns a handle number, raises DlError."""
        target = None if path is None else _loader_path(path)
        answer = self.request("open", what=f"dlopen {target}", path=target, flags=parse_flags(flags))
        handle = self._check(answer, target or "dlopen(NULL)")["handle"]
        self._paths[handle] = target or ""
        return handle

    def close(self, handle: int) -> None:
        """dlclose; raises DlError when dlclose fails."""
        what = f"dlclose {self._paths.get(handle, f'handle {handle}')}"
        self._check(self.request("close", what=what, handle=handle), what)
        self._paths.pop(handle, None)

    def sym(self, handle: int, name: str) -> int:
        """dlsym: the symbol's address as an int; raises DlError when it is not found."""
        return self._check(self.request("sym", handle=handle, name=name), name)["address"]

    def call(self, handle: int, name: str, signature: str = "int(void)", *args: Any,
             timeout: float | None = None) -> Any:
        """Look ``name`` up with dlsym and call it as ``signature`` (C syntax, e.g. ``int(int, char *)``).
        Ints, floats, str/bytes (for ``char *``) and None (NULL) go in; numbers, str (``char *`` results),
        addresses (other pointers) or None come back."""
        wire = [{"bytes": a.hex()} if isinstance(a, (bytes, bytearray)) else a for a in args]
        answer = self.request("call", timeout=timeout, what=f"call {name}", handle=handle, name=name,
                              signature=signature, args=wire)
        return self._check(answer, name)["value"]

    def resident(self, path: PathLike) -> bool:
        """Whether ``path`` is loaded in the child: dlopen with RTLD_NOLOAD (the reference it takes is
        given back at once)."""
        target = _loader_path(path)
        answer = self.request("noload", what=f"RTLD_NOLOAD probe of {target}", path=target)
        return self._check(answer, os.fspath(path))["resident"]

    def open_handles(self, path: PathLike) -> int:
        """How many handles this session opened for ``path`` and has not closed."""
        target = _loader_path(path)
        return sum(1 for p in self._paths.values() if p == target)

    def why_resident(self, path: PathLike) -> list[dict]:
        """Why ``path`` is still loaded: dlcheck's blockers (unique-symbol, nodelete-flag, still-referenced,
        open-handle, ...), or [] when it is not loaded."""
        from elfpatch.harness.dlcheck import explain_resident

        return explain_resident(self, os.fspath(path))

    def loaded(self) -> list[str]:
        """The names of every object in the child's link map, in load order ('' is the main program)."""
        return self._check(self.request("loaded"), "link map")["objects"]

    def exit(self, code: int = 0, *, run_handlers: bool = True, timeout: float | None = None) -> Exited:
        """End the child with exit(code) (atexit handlers and static destructors run, as at the end of a C
        program) or, with ``run_handlers=False``, _exit(code). Returns how it ended; the session's files
        (``stdout()``, ``debug()``) stay readable until ``terminate()``."""
        self.request("exit" if run_handlers else "_exit", code=code)
        try:
            rc = self._proc.wait(timeout=self.timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise HarnessTimeout("exit: the harness child did not finish exiting; it was killed") from None
        self.exited = Exited(rc, self.stdout(), self.stderr())
        return self.exited

    # -- what the child left behind ----------------------------------------------------------------

    def _read(self, path: str) -> str:
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stdout(self) -> str:
        """What the loaded code wrote to file descriptor 1 so far."""
        return self._read(self._out_path)

    def stderr(self) -> str:
        """What the loaded code (and the child's Python, on a failure) wrote to file descriptor 2."""
        return self._read(self._err_path)

    def debug_text(self) -> str:
        return self._read(os.path.join(self._tmp, f"ld.{self._proc.pid}"))

    def debug(self) -> LdDebug:
        """The loader's LD_DEBUG output so far, parsed (empty when the session runs without LD_DEBUG)."""
        return parse(self.debug_text(), self._proc.pid)


def run(ops: Sequence[Mapping[str, Any]], **session_args: Any) -> dict:
    """Run raw requests (``{"op": "open", "path": ..., "flags": 2}`` ...) in a fresh child; returns
    ``{"results": [answer, ...], "stdout": ..., "stderr": ..., "returncode": ..., "debug": LdDebug}``.
    A request that kills the child ends the list with ``{"ok": false, "kind": "crash", "error": ...}``."""
    results: list[dict] = []
    with Session(**session_args) as s:
        rc = None
        try:
            for op in ops:
                fields = {k: v for k, v in op.items() if k != "op"}
                results.append(s.request(op["op"], **fields))
                if op["op"] in ("exit", "_exit"):
                    rc = s._proc.wait(timeout=s.timeout)
                    break
        except ChildCrashed as exc:
            results.append({"ok": False, "kind": "crash", "error": exc.message})
            rc = exc.returncode
        return {"results": results, "stdout": s.stdout(), "stderr": s.stderr(), "returncode": rc,
                "debug": s.debug()}
