"""The tiers are declared, and the two declarations a tier cannot do without are checked (tests/conftest.py):
a hypothesis campaign left unmarked, or a test of the cross fixtures left unmarked, is an error before it
runs in `make test-fast`."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

# The project's conftest loaded under another name (the test directory's own conftest is `conftest`), its
# tier check in force, and a stand-in for the cross fixtures (building them is not what is tested).
CONFTEST = f"""
import importlib.util, sys

import pytest

sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("project_conftest", {str(TESTS / "conftest.py")!r})
project = importlib.util.module_from_spec(spec)
spec.loader.exec_module(project)
pytest_runtest_setup = project.pytest_runtest_setup


@pytest.fixture
def cross_build():
    return None
"""

TESTS_OF_TIERS = """
import pytest
from hypothesis import given, strategies as st


@given(st.integers())
def test_campaign_unmarked(x):
    pass


@pytest.mark.slow
@given(st.integers())
def test_campaign_marked(x):
    pass


def test_cross_fixtures_unmarked(cross_build):
    pass


@pytest.mark.cross
def test_cross_fixtures_marked(cross_build):
    pass
"""


def test_an_undeclared_campaign_or_cross_test_fails(pytester: pytest.Pytester) -> None:
    """Guarantee: a hypothesis test not marked `slow`, or a test using cross_build not marked `cross`, is an
    error before it runs, saying which marker it needs; marked, each runs."""
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slow: s\n    cross: c\n")
    pytester.makepyfile(TESTS_OF_TIERS)
    result = pytester.runpytest("-p", "no:cacheprovider", "--import-mode=importlib")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_campaign_unmarked*", "*mark it @pytest.mark.slow",
                                 "*ERROR at setup of test_cross_fixtures_unmarked*", "*mark it @pytest.mark.cross"])
