"""Every seconds or count option of every command: one type, one error style for a bad value."""
from __future__ import annotations

import pytest

from elfpatch.cli import main

BAD = [
    ("unique", "--lock-timeout", "soon", "expected seconds 0 or more, not 'soon'"),
    ("unique", "--lock-timeout", "-1", "expected seconds 0 or more, not '-1'"),
    ("unique", "--lock-timeout", "inf", "expected seconds 0 or more, not 'inf'"),
    ("dlcheck", "--timeout", "0", "expected seconds above 0 and at most 86400, not '0'"),
    ("dlcheck", "--timeout", "nan", "expected seconds above 0 and at most 86400, not 'nan'"),
    ("inits", "--max", "-1", "expected a whole number 0 or more, not '-1'"),
    ("inits", "--max-dtors", "x", "expected a whole number 0 or more, not 'x'"),
    ("inits", "--depth", "65", "expected a whole number 0 or more and at most 64, not '65'"),
]


@pytest.mark.parametrize(("command", "option", "value", "reason"), BAD)
def test_a_bad_number_is_one_error_line(command: str, option: str, value: str, reason: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Guarantee: a bad seconds or count value is the one ``elfpatch: error: --option: ...`` line, exit 2, for
    every command alike (--lock-timeout got argparse's usage block while --timeout got this line)."""
    assert main([command, f"{option}={value}", "no-such-file"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"elfpatch: error: {option}: {reason}"]


@pytest.mark.parametrize(("command", "option", "value"), [("unique", "--lock-timeout", "0"),
                                                           ("unique", "--lock-timeout", "0.5e1"),
                                                           ("inits", "--depth", "64"), ("inits", "--max", "0")])
def test_a_number_in_range_is_taken(command: str, option: str, value: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The value is parsed (the missing file is the only error left)."""
    assert main([command, option, value, "no-such-file"]) == 2
    assert "no-such-file" in capsys.readouterr().err


def test_verbose_has_one_meaning(capsys: pytest.CaptureFixture[str]) -> None:
    """Guarantee: -v/--verbose means the same in every command that has it, "also list what has no finding"
    (it was "every file of a tree" in unique and "names within one package" in audit, worded unrelated)."""
    from elfpatch.cli import build_parser
    from elfpatch.commands.options import VERBOSE

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    having = {}
    for name, parser in commands.items():
        for action in parser._actions:
            if "-v" in action.option_strings:
                assert action.option_strings == ["-v", "--verbose"] and action.nargs == 0
                having[name] = action.help
    assert set(having) == {"unique", "audit"}
    assert all(text.startswith(VERBOSE) for text in having.values()), having
