"""The progress bar a tree walk's run draws on a terminal: the library only reports events (begin, step,
end) to what the command passes in ``Job(progress=...)``; drawing is the command line's business."""
from __future__ import annotations

import sys
import time


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most ten times a second, erased at the end of each tree."""

    WIDTH = 30

    def __init__(self) -> None:
        self.begin(0)

    def begin(self, total: int) -> None:
        """A tree of ``total`` inodes is about to be processed."""
        self.total = total
        self.done = 0
        self.files = 0
        self.last = 0.0

    def step(self, processed: bool) -> None:
        """One more inode done (``processed``: it was an ELF file, archive or wheel)."""
        self.done += 1
        self.files += processed
        now = time.monotonic()
        if now - self.last < 0.1 and self.done < self.total:
            return
        self.last = now
        filled = self.WIDTH * self.done // max(self.total, 1)
        sys.stderr.write(f"\relfpatch: [{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} "
                         f"files ({self.files} ELF, archives or wheels)")
        sys.stderr.flush()

    def end(self) -> None:
        """The tree is done (or failed): the bar is erased."""
        if self.last:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.last = 0.0


def progress_bar() -> ProgressBar | None:
    """A bar when stderr is a terminal, else nothing to draw."""
    return ProgressBar() if sys.stderr.isatty() else None
