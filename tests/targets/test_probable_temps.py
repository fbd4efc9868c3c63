"""A file named like an elfpatch temp where the file system keeps no user extended attributes (no marker can tell
ours): it is read like any input, with one warning that it is probably a killed run's temp. Each test names the
guarantee it checks: the warning is true (never about a name the run itself removed, nor one a journal
accounts for), said once, and reaches every command's JSON (`unique`, `inits`, `audit`), for a tree and for a
PATH given by name alike. The file system is made to refuse user.* attributes in the process (as vfat, some
network file systems and tmpfs before Linux 6.6 do); a run killed at a named phase is a child process stopped
there (elfpatch.fs.teststop)."""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import NEVER_HANG, NO_USER_XATTRS, run_main
from jsonschema_check import cli_json

from elfpatch.fs.temps import TEMP_RE

WARNING = "named like an elfpatch temp"


@pytest.fixture
def no_user_xattrs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every user.* attribute call fails with EOPNOTSUPP in this process, as on a file system without them."""
    def refuse(real: Any) -> Any:
        def call(target: Any, name: Any, *args: Any, **kwargs: Any) -> Any:
            if str(name).startswith("user."):
                raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
            return real(target, name, *args, **kwargs)
        return call

    for name in ("setxattr", "getxattr", "removexattr"):
        monkeypatch.setattr(os, name, refuse(getattr(os, name)))


def killed_at(phase: str, *args: str) -> None:
    """`elfpatch ARGS` in a child without user.* attributes, killed once it stops at ``phase``."""
    env = dict(os.environ, ELFPATCH_TEST_STOP=phase, PYTHONDONTWRITEBYTECODE="1")
    child = subprocess.Popen([sys.executable, "-c", NO_USER_XATTRS, *args], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), f"the run never reached {phase}: {child.stderr.read() if child.stderr else ''}"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.communicate(timeout=NEVER_HANG)


def temps(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if TEMP_RE.match(n))


def journals(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.startswith(".elfpatch-") and n.endswith(".links"))


@pytest.fixture
def split_tree(unique_build: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A tree whose run was killed at ``relink-temp``: a.so renamed to its patched inode, the link of b.so
    to it made under a temp name beside b.so (the journal names it), b.so still the old inode; and beside
    them someone's file named like a temp, an ELF library too. Returns (the tree, that file, the leftover
    link)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(unique_build / "libholder_v1.so", tree / "a.so")
    os.link(tree / "a.so", tree / "b.so")
    killed_at("relink-temp", "unique", str(tree))
    (leftover,) = temps(tree)
    assert len(journals(tree)) == 1 and (tree / leftover).stat().st_ino == (tree / "a.so").stat().st_ino
    someones = tree / ".elfpatch-0123456789abcdef.tmp"
    shutil.copy(unique_build / "libholder_v2.so", someones)
    return tree, someones, tree / leftover


def warned(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The paths the probable-temp warning names on stderr, one per time it is said."""
    return [line.split(": ")[2] for line in proc.stderr.splitlines() if WARNING in line]


def json_warned(doc: dict[str, Any]) -> list[str]:
    """The paths the probable-temp warning names in a JSON document: its files' warnings, then the document's
    own (``warnings`` or audit's ``run_warnings``) as "path: message"."""
    out = [f["path"] for f in doc["files"] for w in f["warnings"] if WARNING in w]
    for w in doc.get("run_warnings", doc["warnings"]):
        if isinstance(w, str) and WARNING in w:
            out.append(w.split(": ")[0])
    return out


@pytest.mark.usefixtures("no_user_xattrs")
def test_the_repairing_run_warns_once_and_never_of_the_link_it_removed(split_tree: tuple[Path, Path, Path]) -> None:
    """Guarantee: a warning is true and said once. The run over a tree a kill left at ``relink-temp`` first
    completes the re-pointing (removing the leftover link, which its journal names), then walks the tree
    again: the leftover, gone, is never named in a warning (not on stderr, not in the JSON), and someone's
    temp-named file is warned of once, on stderr and in its own entry's warnings."""
    tree, someones, leftover = split_tree
    proc = run_main("unique", "--json", str(tree))
    assert proc.returncode == 0, proc.stderr
    assert not leftover.exists() and journals(tree) == [] and temps(tree) == [someones.name]
    assert (tree / "a.so").stat().st_ino == (tree / "b.so").stat().st_ino
    assert warned(proc) == [str(someones)], proc.stderr
    assert json_warned(cli_json(proc.stdout)) == [str(someones)]


@pytest.mark.usefixtures("no_user_xattrs")
@pytest.mark.parametrize("command", [["unique", "--check"], ["inits"], ["audit"]])
def test_a_read_only_run_warns_only_of_what_no_journal_names(command: list[str],
                                                              split_tree: tuple[Path, Path, Path]) -> None:
    """Guarantee: a warning is true, and the JSON tells all. A read-only run repairs nothing: the leftover link
    stays an input, but its journal accounts for it, so it is not called a stranger's probable temp; someone's
    temp-named file is, once, on stderr and in its own entry's ``warnings`` (`inits` and `audit` walk the
    tree outside any one file's listing: the warning still reaches the file's entry)."""
    tree, someones, leftover = split_tree
    proc = run_main(*command, "--json", str(tree))
    assert proc.returncode in (0, 1), proc.stderr
    doc = cli_json(proc.stdout)
    assert str(leftover) in [f["path"] for f in doc["files"]]  # an input like any file
    assert warned(proc) == [str(someones)], proc.stderr
    assert json_warned(doc) == [str(someones)], doc
    assert leftover.exists() and len(journals(tree)) == 1


@pytest.mark.usefixtures("no_user_xattrs")
@pytest.mark.parametrize("command", [["unique", "--check"], ["inits"], ["audit"]])
def test_a_temp_named_path_gets_the_warning_in_every_command(command: list[str], unique_build: Path,
                                                             tmp_path: Path) -> None:
    """Guarantee: a file is never taken silently for a library because of how it was named to us. Someone's
    file named like a temp, given as a PATH: every command reads it and warns once that it is probably a killed
    run's temp, on stderr and in its entry's ``warnings``; a library named otherwise gets no such warning."""
    temp = tmp_path / ".elfpatch-0123456789abcdef.tmp"
    plain = tmp_path / "libholder.so"
    shutil.copy(unique_build / "libholder_v1.so", temp)
    shutil.copy(unique_build / "libholder_v1.so", plain)
    proc = run_main(*command, "--json", str(temp), str(plain))
    assert proc.returncode in (0, 1), proc.stderr
    assert warned(proc) == [str(temp)], proc.stderr
    assert json_warned(cli_json(proc.stdout)) == [str(temp)]
