"""pytest plugin (entry point ``pytest11: elfpatch``): the ``dlharness`` fixture.

Imported by every pytest run in an environment where elfpatch is installed, so it imports nothing heavy:
the harness itself is imported when a test first asks for the fixture.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from elfpatch.harness import DlHarness


@pytest.fixture
def dlharness() -> Iterator[DlHarness]:
    """Loads shared objects in child processes; see ``elfpatch.harness.DlHarness``."""
    from elfpatch.harness import DlHarness

    harness = DlHarness()
    try:
        yield harness
    finally:
        harness.close()
