"""The cyclic garbage collector held off while a run builds many objects that form no cycles.

The analysis allocates millions of small tuples (instructions, plans, events) that live until the file is done;
a tree's check builds ten thousand reports that live to the end of the run. At the collector's default first
threshold (700 allocations) it traversed them again and again: a tenth of libtorch_cpu.so's analysis, 50 ms of a
one-process check of /usr/lib/x86_64-linux-gnu. Reference counting still frees everything as before; a real
cycle waits at most COLLECT_AFTER allocations. Forked pool workers inherit the setting.
"""
from __future__ import annotations

import functools
import gc
from typing import Any, Callable, TypeVar

COLLECT_AFTER = 50_000
_F = TypeVar("_F", bound=Callable[..., Any])


def few_collections(func: _F) -> _F:
    """``func`` run with the collector's first threshold at COLLECT_AFTER, the caller's restored after (an
    error too)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        old = gc.get_threshold()
        gc.set_threshold(COLLECT_AFTER, *old[1:])
        try:
            return func(*args, **kwargs)
        finally:
            gc.set_threshold(*old)
    return wrapper  # type: ignore[return-value]


def no_collections(func: _F) -> _F:
    """``func`` run with the collector off, its state restored after (an error too): for one file's analysis,
    whose objects live until the file is done (its few cycles, the walker's, wait until then), so that no
    collection traverses its millions of tuples at all (a twentieth of libtorch_cpu.so's analysis at
    COLLECT_AFTER)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return wrapper  # type: ignore[return-value]
