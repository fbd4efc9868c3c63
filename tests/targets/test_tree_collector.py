"""A tree is walked and processed with the cyclic collector started rarely (its reports form no cycles), and
the caller's threshold is back afterwards, after a failure too."""
from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

from elfpatch.collector import COLLECT_AFTER
from elfpatch.errors import WriteError
from elfpatch.targets import CHECK, Job, tree


def test_groups_run_with_few_collections_and_the_threshold_comes_back(
        unique_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(unique_build / "libholder_v1.so", tmp_path / "libholder_v1.so")
    seen: list[int] = []
    real = tree.process_group

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.get_threshold()[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(tree, "process_group", spy)
    before = gc.get_threshold()
    outcome = tree.process_tree(str(tmp_path), Job(mode=CHECK))
    assert [r.status for r in outcome.reports] == ["found"]
    assert seen == [COLLECT_AFTER] and COLLECT_AFTER > before[0]
    assert gc.get_threshold() == before


def test_the_threshold_comes_back_after_a_refused_tree(tmp_path: Path) -> None:
    before = gc.get_threshold()
    with pytest.raises(WriteError):
        tree.process_tree(str(tmp_path), Job(output=str(tmp_path / "out")))
    assert gc.get_threshold() == before
