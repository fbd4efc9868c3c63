"""Ending on SIGTERM, SIGINT or SIGHUP (a CI job's timeout, ^C, a closed terminal) without leaving anything
behind: every live harness session's child process group is killed and its temporary directory removed. Then
SIGINT raises KeyboardInterrupt, which the command line reports as every command does (``interrupted``, exit
130); SIGTERM and SIGHUP kill the process with the signal itself, so that whoever waits for it sees the
conventional status (killed by SIGTERM; 143 in a shell).

The child runs in a session of its own (so that a library's helper processes can be killed as one group), so
neither a terminal's ^C nor a CI runner's kill of our process group reaches it: without this it would run on,
orphaned. ``stop_on_signals()`` is for a command's main; the API installs no handler.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_live: dict[int, Callable[[], None]] = {}  # id(session) -> how to abandon it from a signal handler
_state = {"held": 0, "pending": 0}


def track(owner: object, abandon: Callable[[], None]) -> None:
    """``abandon`` kills what ``owner`` started and removes its files; it runs in a signal handler."""
    _live[id(owner)] = abandon


def untrack(owner: object) -> None:
    _live.pop(id(owner), None)


@contextmanager
def held() -> Iterator[None]:
    """A signal that arrives inside waits until the block ends: a child being started (forked, not yet
    tracked) is never missed."""
    _state["held"] += 1
    try:
        yield
    finally:
        _state["held"] -= 1
        pending = _state["pending"]
        if pending and not _state["held"]:
            _state["pending"] = 0
            _die(pending)


def _on_signal(signum: int, frame: Any) -> None:
    if _state["held"]:
        _state["pending"] = _state["pending"] or signum
        return
    _die(signum)


def _die(signum: int) -> None:
    for abandon in list(_live.values()):
        try:
            abandon()
        except Exception:  # noqa: BLE001 - one failure must not keep the others (or the exit) from happening
            pass
    _live.clear()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # delivered before kill() returns: the process ends here
    os._exit(128 + signum)  # only if the signal was blocked


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM, SIGINT and SIGHUP end the process cleanly (see the module's notes); the
    previous handlers come back after it. A signal that is ignored (``nohup``) stays ignored."""
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
