"""DlHarness: what the ``dlharness`` pytest fixture hands a test."""
from __future__ import annotations

import os
from typing import Any, Sequence, Union

from elfpatch.harness.dlcheck import dlcheck
from elfpatch.harness.session import Session

PathLike = Union[str, "os.PathLike[str]"]


class DlHarness:
    """Child-process sessions that are killed at the end of the test, and the usual questions as one call
    each. Nothing is ever loaded into the test process itself."""

    def __init__(self) -> None:
        self._sessions: list[Session] = []

    def session(self, **kwargs: Any) -> Session:
        """A new child process (``Session`` keyword arguments: env, ld_debug, timeout, cwd)."""
        s = Session(**kwargs)
        self._sessions.append(s)
        return s

    def unloads(self, path: PathLike, calls: Sequence[str] = (), **kwargs: Any) -> bool:
        """Open ``path`` (RTLD_NOW|RTLD_LOCAL), call each ``int(void)`` function named in ``calls``, close
        it: True when an RTLD_NOLOAD probe no longer finds it."""
        with self.session(**kwargs) as s:
            h = s.open(path)
            for name in calls:
                s.call(h, name)
            s.close(h)
            return not s.resident(path)

    def cross_bindings(self, *paths: PathLike, **kwargs: Any) -> list[dict]:
        """References from one of ``paths`` (or their dependencies) bound to another's STB_GNU_UNIQUE
        definition outside their own lookup scope, all loaded RTLD_LOCAL into one process: an empty list means
        the loader made them share no static."""
        return self.dlcheck(*paths, **kwargs)["cross_bindings"]

    def dlcheck(self, *paths: PathLike, **kwargs: Any) -> dict:
        """The ``elfpatch dlcheck --json`` document for ``paths``."""
        return dlcheck([os.fspath(p) for p in paths], **kwargs)

    def close(self) -> None:
        for s in self._sessions:
            s.terminate()
        self._sessions.clear()
