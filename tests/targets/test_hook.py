"""The pre-commit hook: what .pre-commit-hooks.yaml declares, and its entry run on a mix of staged files."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

import elfpatch
from elfpatch.targets import Job
from elfpatch.targets.tree import PARALLEL_MIN_FILES, Group, _parallel, workers


def hook(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "elfpatch.commands.hook", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_hook_declaration() -> None:
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    entries = dict(line.strip().lstrip("- ").split(": ", 1) for line in text.splitlines()
                   if line.strip() and not line.lstrip().startswith("#"))
    assert entries["id"] == "elfpatch-unique-check"
    assert entries["entry"] == "python -m elfpatch.commands.hook" and entries["language"] == "python"
    assert entries["types"] == "[binary]"


def test_hook_checks_targets_and_passes_over_the_rest(unique_build: Path, objs: dict[str, Path],
                                                      tmp_path: Path) -> None:
    shutil.copy(unique_build / "libholder_v1.so", tmp_path / "libholder.so")
    shutil.copy(unique_build / "unique_exe", tmp_path / "tool")
    shutil.copy(objs["v1"], tmp_path / "holder.o")
    (tmp_path / "libc.so").write_text("/* GNU ld script */\nGROUP ( libc.so.6 )\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    names = ["libholder.so", "tool", "holder.o", "libc.so", "logo.png"]
    proc = hook(*names, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.splitlines()[-1] == "3 files, 10 unique, 0 patched, 0 errors"
    proc = hook("--symbol", "Holder<*>::*", "--json", *names, cwd=tmp_path)
    assert proc.returncode == 1 and '"kept": 1' in proc.stdout
    assert hook("libc.so", "logo.png", cwd=tmp_path).returncode == 0
    run_cli("unique", str(tmp_path), check=True)
    proc = hook(*names, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout


def test_pool_only_where_it_pays(tmp_path: Path) -> None:
    few = [Group([f"f{i}"], 1000) for i in range(3)]
    many = [Group([f"f{i}"], 1000) for i in range(PARALLEL_MIN_FILES)]
    big = [Group(["a"], 40 << 20), Group(["b"], 40 << 20)]
    assert _parallel(few, Job()) == 1
    cores = workers()
    assert _parallel(many, Job()) == min(cores, 8) if cores > 1 else 1
    assert _parallel(big, Job()) == min(cores, 2) if cores > 1 else 1


def test_pool_warnings_reach_the_callers_handler(unique_build: Path, tmp_path: Path) -> None:
    """A warning raised in a pool worker is handed to the handlers of the process that called the API."""
    tree_dir, outside = tmp_path / "tree", tmp_path / "outside"
    tree_dir.mkdir()
    outside.mkdir()
    n = PARALLEL_MIN_FILES
    for i in range(n):
        lib = tree_dir / f"lib{i:02d}.so"
        shutil.copyfile(unique_build / "libholder_v1.so", lib)
        os.link(lib, outside / lib.name)  # a name the tree cannot re-point: the run warns about it
    assert _parallel([Group([str(p)], 1) for p in sorted(tree_dir.iterdir())], Job()) == min(workers(), 8)
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    log = logging.getLogger("elfpatch")
    keep = Keep()
    log.addHandler(keep)
    try:
        reports = elfpatch.patch(tree_dir)
    finally:
        log.removeHandler(keep)
    assert sum(r.status == "patched" for r in reports) == n
    assert len(seen) == n and all("other name(s) keep the unpatched file" in m for m in seen), seen


def test_hook_option_value_is_never_taken_for_a_file(unique_build: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The splitter reads `unique`'s own parser: ``--exclude libfoo.so`` keeps its value even when a file of
    that name is staged (it was taken as a PATH, leaving a bare --exclude to swallow the next file)."""
    from elfpatch.commands.hook import split

    shutil.copy(unique_build / "libholder_v1.so", tmp_path / "libfoo.so")
    shutil.copy(unique_build / "libholder_v1.so", tmp_path / "libbar.so")
    monkeypatch.chdir(tmp_path)
    assert split(["--exclude", "libfoo.so", "libbar.so"]) == (["--exclude", "libfoo.so"], ["libbar.so"])
    assert split(["--excl", "libfoo.so", "--to=weak", "libbar.so"]) == (["--excl", "libfoo.so", "--to=weak"],
                                                                        ["libbar.so"])
    assert split(["--json", "libfoo.so"]) == (["--json"], ["libfoo.so"])
    proc = hook("--exclude", "libfoo.so", "libfoo.so", "libbar.so", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert "libfoo.so" not in proc.stdout and "libbar.so" in proc.stdout


def test_hook_builds_uniques_parser_once(unique_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Guarantee: one parser per hook run. The splitter that tells options from files and the run that parses
    them read the same `elfpatch unique` parser, built once (it was built twice, and two builds could drift)."""
    from elfpatch.commands import hook as hook_module
    from elfpatch.commands import run, unique

    shutil.copy(unique_build / "libholder_v1.so", tmp_path / "libfoo.so")
    monkeypatch.chdir(tmp_path)
    built: list[object] = []
    real = unique.register

    def counting(sub: object) -> None:
        built.append(sub)
        real(sub)  # type: ignore[arg-type]

    monkeypatch.setattr(unique, "register", counting)
    monkeypatch.setattr(run, "on_logger", lambda hook: None)  # the CLI's warning lines stay out of this process
    assert hook_module.main(["--json", "libfoo.so"]) == 1
    assert '"libfoo.so"' in capsys.readouterr().out
    assert len(built) == 1


def test_the_hooks_old_entry_says_what_to_use(tmp_path: Path) -> None:
    """Guarantee (issue 24): where an interface changes, the old form fails with a message that says what to use.
    A pre-commit config still naming the hook's old entry, `python -m elfpatch.targets.hook`, gets one error
    line naming the new entry, and exit status 2 (never Python's bare "No module named"), whatever its
    arguments."""
    for args in ([], ["--symbol", "Holder*", "libholder.so"]):
        proc = subprocess.run([sys.executable, "-m", "elfpatch.targets.hook", *args], capture_output=True,
                              text=True, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == ("elfpatch: error: the pre-commit hook is now 'python -m elfpatch.commands.hook' (or "
                               "'elfpatch unique --check'); update your hook's entry\n"), proc.stderr


def test_the_hooks_usage_is_the_clis(unique_build: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Guarantee: the hook is `elfpatch unique --check`: a usage error reads the same from either, the root's
    usage line (with its --version, which says the version as the CLI's does) included."""
    from elfpatch.commands.hook import _parser

    with pytest.raises(SystemExit) as exc:
        _parser()[0].parse_args(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"elfpatch {elfpatch.__version__}\n"
    shutil.copy(unique_build / "libholder_v1.so", tmp_path / "libholder.so")
    proc = hook("--no-such-option", "libholder.so", cwd=tmp_path)
    cli = run_cli("unique", "--check", "--no-such-option", "libholder.so", cwd=tmp_path)
    assert proc.returncode == cli.returncode == 2
    assert proc.stderr == cli.stderr and "[--version]" in proc.stderr, (proc.stderr, cli.stderr)
