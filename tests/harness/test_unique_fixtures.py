"""The unique/ fixtures, judged by the real loader through the harness (and the dlharness fixture), before and
after `elfpatch unique`."""
from __future__ import annotations

from pathlib import Path

import pytest

from elfpatch.harness import DlHarness

BEFORE, AFTER = "before", "after"


@pytest.fixture(params=[BEFORE, AFTER])
def libs(request: pytest.FixtureRequest, unique_build: Path, patched: Path) -> tuple[str, Path]:
    return request.param, (unique_build if request.param == BEFORE else patched)


def test_two_versions_share_one_static_until_patched(dlharness: DlHarness, libs: tuple[str, Path]) -> None:
    state, d = libs
    s = dlharness.session()
    v1, v2 = s.open(d / "libholder_v1.so"), s.open(d / "libholder_v2.so")
    assert (s.call(v1, "fixture_version"), s.call(v2, "fixture_version")) == (1, 2)
    shared = s.call(v1, "holder_address", "void *(void)") == s.call(v2, "holder_address", "void *(void)")
    counts = [s.call(v1, "counter_next"), s.call(v2, "counter_next"), s.call(v1, "counter_next")]
    if state == BEFORE:
        assert s.call(v2, "holder_value") == 1  # v2's code reads v1's Holder<int>::value
        assert shared and counts == [1, 2, 3]  # one counter()::c for both
    else:
        assert s.call(v2, "holder_value") == 2
        assert not shared and counts == [1, 1, 2]


def test_the_first_definer_stays_loaded_until_patched(dlharness: DlHarness, libs: tuple[str, Path]) -> None:
    state, d = libs
    v1, v2 = d / "libholder_v1.so", d / "libholder_v2.so"
    s = dlharness.session()
    h1, h2 = s.open(v1), s.open(v2)
    s.close(h2)
    s.close(h1)
    assert not s.resident(v2)
    assert s.resident(v1) == (state == BEFORE)
    marks = s.debug().nodelete(str(v1), "unique symbol")
    assert bool(marks) == (state == BEFORE)
    if state == BEFORE:
        assert {b["kind"] for b in s.why_resident(v1)} == {"unique-symbol"}


def test_a_plugin_reloads_as_the_old_instance_until_patched(dlharness: DlHarness,
                                                             libs: tuple[str, Path]) -> None:
    state, d = libs
    s = dlharness.session()
    counts = []
    for _ in range(3):
        h = s.open(d / "libplugin.so")
        counts.append(s.call(h, "plugin_load_count"))
        s.close(h)
    assert counts == ([1, 2, 3] if state == BEFORE else [1, 1, 1])
    assert dlharness.unloads(d / "libplugin.so", calls=["plugin_load_count"]) == (state == AFTER)


def test_nodelete_stays_either_way(dlharness: DlHarness, libs: tuple[str, Path]) -> None:
    _, d = libs
    s = dlharness.session()
    h = s.open(d / "libnodelete.so")
    assert s.call(h, "nodelete_answer") == 42
    s.close(h)
    assert s.resident(d / "libnodelete.so")
    assert [b["kind"] for b in s.why_resident(d / "libnodelete.so")] == ["nodelete-flag"]


def test_a_touched_thread_local_keeps_its_library(dlharness: DlHarness, libs: tuple[str, Path]) -> None:
    _, d = libs
    lib = d / "libtls.so"
    assert dlharness.unloads(lib)  # never touched: nothing pending
    s = dlharness.session()
    h = s.open(lib)
    assert s.call(h, "tls_touch") == 1  # the main thread now owes ~Tracker() at its exit
    s.close(h)
    assert s.resident(lib)
    assert [b["kind"] for b in s.why_resident(lib)] == ["thread-local-destructor"]


def test_a_dependency_with_unique_symbols_outlives_its_user(dlharness: DlHarness,
                                                             libs: tuple[str, Path]) -> None:
    state, d = libs
    s = dlharness.session()
    h = s.open(d / "libuser.so")
    assert s.call(h, "user_value") == 1
    assert str(d / "libholder_v1.so") in s.loaded()
    s.close(h)
    assert not s.resident(d / "libuser.so")
    assert s.resident(d / "libholder_v1.so") == (state == BEFORE)
