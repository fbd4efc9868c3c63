"""A test-only stop point: ``ELFPATCH_TEST_STOP=PHASE`` (or ``PHASE@N``, the N-th time) makes the process stop
itself (SIGSTOP) when it reaches that named phase, so that a test can act at exactly that moment (swap a
directory, replace or truncate the file, start a second run), then continue it (SIGCONT) or kill it.

The phases, in the order a default-mode run meets them: ``locked`` (input open and locked), ``mapped`` (its
map made, nothing parsed yet; read-only modes too), ``temp`` (temp
file created), ``copying`` (part of the copy written), ``written`` (temp complete: edits and metadata),
``verified`` (just before the check that the name still names the file read), ``linked`` (the temp has a name,
just before the rename), ``renamed`` (the new file is in place); ``inplace`` (--inplace, after the first byte
written); ``walked`` (a tree read, nothing opened yet); ``relinking`` (a tree's first name renamed, its temp closed,
before its other names are re-pointed); ``relink-temp`` (a hard link's temp name made beside the name it
is to replace, before that rename); ``relinked`` (a tree's hard link re-pointed, once per name).
"""
from __future__ import annotations

import os
import signal

ENV = "ELFPATCH_TEST_STOP"
_hits: dict[str, int] = {}


def stop(phase: str) -> None:
    want = os.environ.get(ENV)
    if not want:
        return
    name, _, nth = want.partition("@")
    if name != phase:
        return
    _hits[phase] = _hits.get(phase, 0) + 1
    if _hits[phase] == (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGSTOP)
