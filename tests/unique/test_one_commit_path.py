"""One commit path (issue 24): every rename, link, temp and journal of a run goes through the file-system
layer (elfpatch/fs and the atomic commit in elfpatch/fs/commit.py); the tree walk keeps only the walk and the
decisions; every name is opened one way; fresh temp names are made by one helper; only the command line
draws on a terminal. Each test names the guarantee it checks, by reading the code (as test_architecture
does) or by running the helper."""
from __future__ import annotations

import ast
import errno
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "elfpatch"
# What the rename-and-temp protocol is made of: only the file-system layer calls these.
PROTOCOL = {"os.link", "os.replace", "os.rename", "os.unlink", "os.urandom", "os.pwrite", "os.setxattr",
            "os.removexattr", "fcntl.flock"}


def called(path: Path) -> set[str]:
    """Every ``module.function`` attribute the module at ``path`` calls or names (``os.link``, ...)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found.add(f"{node.value.id}.{node.attr}")
    return found


def test_the_tree_walk_has_no_commit_protocol_of_its_own() -> None:
    """Guarantee: one commit path. The tree's relink and journal live beside the atomic write (elfpatch/fs):
    targets/tree.py links, renames, unlinks, locks, writes and marks nothing itself."""
    assert called(PACKAGE / "targets" / "tree.py") & PROTOCOL == set()


ONE_OPENER = PACKAGE / "fs" / "regular.py"


def test_every_name_is_opened_one_way() -> None:
    """Guarantee: every name a run opens (an input, temp, journal, a thin archive's member, a candidate on the
    loader's search path, a file an audit digests) is opened by one helper (elfpatch.fs.regular.open_at:
    without blocking, regular files only), not by a copy of it that could drift. No module but that one spells
    the non-blocking open's flags."""
    copies = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                    if p != ONE_OPENER and {"os.O_NONBLOCK", "os.O_NOCTTY"} & called(p))
    assert copies == []
    assert {"os.O_NONBLOCK", "os.O_NOCTTY"} <= called(ONE_OPENER)  # the scan reads what it means to


def test_fresh_names_are_made_by_one_helper() -> None:
    """Guarantee: one exclusive-name helper. Only elfpatch.fs.temps draws random names; a name taken is
    never overwritten but another is tried, and a run gives up with a WriteError after NAME_TRIES."""
    from elfpatch.errors import WriteError
    from elfpatch.fs.temps import NAME_TRIES, TEMP_RE, exclusive

    drawing = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "os.urandom" in called(p))
    assert drawing == ["fs/temps.py"]
    tried: list[str] = []

    def taken_but_last(name: str) -> str:
        tried.append(name)
        if len(tried) < NAME_TRIES:
            raise FileExistsError(errno.EEXIST, "taken")
        return "made"

    assert exclusive(taken_but_last, "temp file", "x") == ("made", tried[-1])
    assert len(set(tried)) == NAME_TRIES and all(TEMP_RE.match(n) for n in tried)

    def always_taken(name: str) -> str:
        raise FileExistsError(errno.EEXIST, "taken")

    with pytest.raises(WriteError, match="cannot create a unique temp file name"):
        exclusive(always_taken, "temp file", "x")


def test_only_the_command_line_draws() -> None:
    """Guarantee: the API draws nothing. No module outside elfpatch/commands asks whether stderr is a
    terminal (the progress bar's test; the library only tells a listener, see test_tree)."""
    drawing = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if p.parent.name != "commands" and "isatty" in p.read_text())
    assert drawing == []
