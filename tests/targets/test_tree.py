"""Directory trees: sorted walk, symlinks never followed, hard links kept, non-targets counted (skipped, other),
the process pool, the progress bar, and the loader's verdict on the patched libraries."""
from __future__ import annotations

import os
import pty
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli, run_main
from jsonschema_check import cli_json
from unique.helpers import run_driver

import elfpatch
from targets.helpers import build_wheel, nm_unique, readelf_unique, tree_state, wheel_files


@pytest.fixture
def stage(unique_build: Path, objs: dict[str, Path], tmp_path: Path) -> Path:
    """A staging tree as a build pipeline leaves it, with something of every kind in it."""
    root = tmp_path / "stage"
    for d in ("lib/plugins/deep", "bin", "share/doc", "obj"):
        (root / d).mkdir(parents=True)
    shutil.copy(unique_build / "libholder_v1.so", root / "lib" / "libholder_v1.so")
    shutil.copy(unique_build / "libholder_v2.so", root / "lib" / "plugins" / "deep" / "libholder_v2.so")
    shutil.copy(unique_build / "unique_exe", root / "bin" / "unique_exe")
    shutil.copy(objs["v1"], root / "obj" / "holder.o")
    shutil.copy(objs["plain"], root / "obj" / "plain.o")
    subprocess.run(["ar", "rcs", "libholder.a", "holder.o"], check=True, cwd=root / "obj")
    build_wheel(root / "share", wheel_files(unique_build / "libholder_v1.so"))
    # Not targets: passed over silently and counted (a FIFO as skipped, regular files as other).
    (root / "lib" / "libc_script.so").write_text("/* GNU ld script */\nGROUP ( libc.so.6 )\n")
    (root / "lib" / "empty.so").write_bytes(b"")
    (root / "bin" / "run.sh").write_text("#!/bin/sh\nexec true\n")
    (root / "share" / "doc" / "README").write_text("docs\n")
    (root / "share" / "not_a_wheel.whl").write_text("text\n")
    os.mkfifo(root / "share" / "fifo")
    # Symlinks in the tree and out of it, to files and to directories: never followed, left as links.
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(unique_build / "libholder_v1.so", outside / "libout.so")
    (root / "lib" / "libholder.so").symlink_to("libholder_v1.so")
    (root / "lib" / "link_out.so").symlink_to(outside / "libout.so")
    (root / "lib" / "dir_out").symlink_to(outside)
    (root / "lib" / "dir_in").symlink_to("plugins")
    (root / "lib" / "dangling.so").symlink_to("nowhere.so")
    return root


TARGETS = ["bin/unique_exe", "lib/libholder_v1.so", "lib/plugins/deep/libholder_v2.so", "obj/holder.o",
           "obj/libholder.a", "obj/plain.o", "share/holderpkg-1.0-py3-none-linux_x86_64.whl"]
# the fifo and the five symlinks: passed over for a reason
SKIPPED = 6
# libc_script.so, empty.so, run.sh, README, not_a_wheel.whl: regular files that are no target kind
OTHER = 5


def test_check_then_patch_a_staging_tree(stage: Path, unique_build: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "libout.so"
    outside_before = outside.read_bytes()
    state = tree_state(stage)

    check = run_main("unique", "--check", "--json", str(stage))
    assert check.returncode == 1 and check.stderr == ""
    doc = cli_json(check.stdout)
    paths = [f["path"] for f in doc["files"]]
    assert paths == sorted(paths), "sorted order"
    assert sorted({os.path.relpath(p, stage) for p in paths}) == TARGETS
    assert [f["member"] for f in doc["files"] if f["path"].endswith(".whl")] == ["holderpkg/libholder.so"]
    assert [f["member"] for f in doc["files"] if f["path"].endswith(".a")] == ["holder.o"]
    assert doc["summary"]["skipped"] == SKIPPED and doc["summary"]["files"] == len(TARGETS)
    assert doc["summary"]["other"] == OTHER
    assert tree_state(stage) == state, "--check writes nothing"

    proc = run_main("unique", "--json", str(stage), check=True)
    doc = cli_json(proc.stdout)
    assert {os.path.relpath(f["path"], stage) for f in doc["files"] if f["status"] == "patched"} == \
        set(TARGETS) - {"obj/plain.o"}
    assert run_main("unique", "--check", str(stage)).returncode == 0

    after = tree_state(stage)
    for name, (kind, what, _) in state.items():
        if kind == "link":
            assert after[name][:2] == ("link", what), f"{name} is still the same symlink"
    assert outside.read_bytes() == outside_before, "a link out of the tree is not followed"
    assert nm_unique(stage / "obj" / "libholder.a") == [] and readelf_unique(stage / "bin" / "unique_exe") == 0
    r = run_driver(unique_build / "unique_driver", stage / "lib" / "libholder.so",
                   stage / "lib" / "plugins" / "deep" / "libholder_v2.so")
    assert (r["shared"], r["a.resident"], r["b.resident"]) == ("no", "no", "no")


@pytest.mark.slow  # many runs at once
@pytest.mark.parametrize("mode", [[], ["--inplace"]], ids=["default", "inplace"])
def test_concurrent_runs_on_one_tree_patch_each_file_once(stage: Path, tmp_path: Path, mode: list[str]) -> None:
    """Three runs over the same tree at once (each taking every file's lock in turn): all succeed, every target
    ends exactly as one run on its own makes it, links stay links, and no temp file is left anywhere."""
    targets = [t for t in TARGETS if not (mode and t.endswith(".whl"))]  # --inplace refuses wheels
    if mode:
        (stage / "share" / "holderpkg-1.0-py3-none-linux_x86_64.whl").unlink()
    expected = {}
    for i, target in enumerate(targets):
        out = tmp_path / f"expected{i}"
        run_main("unique", "-o", str(out), str(stage / target), check=True)
        expected[target] = out.read_bytes()
    links = {k: v for k, v in tree_state(stage).items() if v[0] == "link"}
    procs = [subprocess.Popen([sys.executable, "-m", "elfpatch", "unique", *mode, str(stage)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "Traceback" not in err, err
    for target in targets:
        assert (stage / target).read_bytes() == expected[target], target
    after = tree_state(stage)
    assert {k: v for k, v in after.items() if v[0] == "link"} == links
    assert not [k for k in after if k.endswith(".tmp")]
    assert "0 patched" in run_main("unique", str(stage), check=True).stdout.splitlines()[-1]


def test_dry_run_and_text_report_on_a_tree(stage: Path) -> None:
    state = tree_state(stage)
    proc = run_main("unique", "-n", str(stage))
    assert proc.returncode == 0 and tree_state(stage) == state
    last = proc.stdout.splitlines()[-1]
    assert last.startswith(f"{len(TARGETS)} files,") and last.endswith(f"{SKIPPED} skipped, {OTHER} other")


def test_hard_links_survive(unique_build: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    first = root / "a" / "libholder.so"
    shutil.copy(unique_build / "libholder_v1.so", first)
    os.link(first, root / "b" / "alias.so")
    os.link(first, root / "z_alias.so")
    outside = tmp_path / "outside.so"
    os.link(first, outside)
    original = first.read_bytes()

    proc = run_main("unique", "--json", str(root), check=True)
    doc = cli_json(proc.stdout)
    assert [f["path"] for f in doc["files"]] == [str(first)], "one inode, processed once, under its first name"
    assert "1 other name(s) keep the unpatched file" in proc.stderr, "the name outside the tree is warned about"
    names = [first, root / "b" / "alias.so", root / "z_alias.so"]
    inodes = {p.stat().st_ino for p in names}
    assert len(inodes) == 1 and first.stat().st_nlink == 3, "the tree's names are still one file"
    assert all(readelf_unique(p) == 0 for p in names)
    assert outside.read_bytes() == original and outside.stat().st_nlink == 1
    assert [p.name for p in root.rglob("*.tmp")] == []


def test_hard_links_with_inplace_keep_the_inode(unique_build: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    first = root / "lib.so"
    shutil.copy(unique_build / "libholder_v1.so", first)
    os.link(first, root / "lib2.so")
    outside = tmp_path / "outside.so"
    os.link(first, outside)
    ino = first.stat().st_ino
    proc = run_main("unique", "--inplace", str(root), check=True)
    assert "hard links" not in proc.stderr
    assert first.stat().st_ino == ino and first.stat().st_nlink == 3 and readelf_unique(outside) == 0


def test_large_tree_uses_the_pool_keeps_order_and_reports_errors(unique_build: Path, tmp_path: Path) -> None:
    root = tmp_path / "many"
    for i in range(40):
        d = root / f"d{i % 4}" / f"e{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(unique_build / "libholder_v1.so", d / f"lib{i:02}.so")
    broken = root / "d1" / "broken.so"
    data = bytearray((unique_build / "libholder_v1.so").read_bytes())
    data[4] = 3  # no ELF class: no view of it is usable (section headers past EOF would not do: the loader's
    # view of such a file is complete, so it is processed from that)
    broken.write_bytes(bytes(data))
    proc = run_cli("unique", "--json", str(root))  # a child: what the pool's processes write reaches its stderr
    assert proc.returncode == 2
    assert [line.split(":")[0] for line in proc.stderr.splitlines()] == ["elfpatch"]
    assert f"elfpatch: error: {broken}: " in proc.stderr
    doc = cli_json(proc.stdout)
    paths = [f["path"] for f in doc["files"]]
    assert len(paths) == 41 and paths == sorted(paths)
    assert doc["summary"]["patched"] == 160 and doc["summary"]["errors"] == 1
    assert broken.read_bytes() == bytes(data)
    assert run_cli("unique", "--check", str(root / "d0")).returncode == 0


def test_pool_workers_send_each_warning_back_once(unique_build: Path, tmp_path: Path) -> None:
    """A pool process keeps one log handler for all its tasks: each task's warnings go back with that task's
    reports, every one of them, and only once (none left over for the next task)."""
    root, outside = tmp_path / "many", tmp_path / "outside"
    outside.mkdir()
    linked = []
    for i in range(40):
        d = root / f"d{i % 4}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(unique_build / "libholder_v1.so", d / f"lib{i:02}.so")
        if i % 5 == 0:  # a name outside the tree keeps the unpatched file: warned about, once per file
            os.link(d / f"lib{i:02}.so", outside / f"lib{i:02}.so")
            linked.append(str(d / f"lib{i:02}.so"))
    proc = run_cli("unique", str(root), check=True)
    warned = [line.split(": ")[2] for line in proc.stderr.splitlines() if "hard links" in line]
    assert sorted(warned) == sorted(linked), proc.stderr


def test_thin_archive_in_a_tree(objs: dict[str, Path], tmp_path: Path) -> None:
    """Members inside the tree are the walk's own files; a member outside is not reached through the tree."""
    root = tmp_path / "tree"
    (root / "obj").mkdir(parents=True)
    shutil.copy(objs["v1"], root / "obj" / "in.o")
    shutil.copy(objs["v2"], tmp_path / "out.o")
    subprocess.run(["ar", "rcsT", "tree/libthin.a", "tree/obj/in.o", "out.o"], check=True, cwd=tmp_path)
    out_before = (tmp_path / "out.o").read_bytes()
    doc = cli_json(run_main("unique", "--json", str(root), check=True).stdout)
    rows = [(os.path.basename(f["path"]), f.get("member"), f["status"]) for f in doc["files"]]
    assert rows == [("libthin.a", "../out.o", "skipped"), ("in.o", None, "patched")]
    assert "outside the tree" in doc["files"][0]["reason"]
    assert (tmp_path / "out.o").read_bytes() == out_before and nm_unique(root / "obj" / "in.o") == []


def test_progress_bar_only_on_a_tty(unique_build: Path, tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    for i in range(3):
        shutil.copy(unique_build / "libholder_v1.so", root / f"l{i}.so")
    quiet = run_main("unique", "--check", str(root))
    assert quiet.stderr == ""
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "elfpatch", "unique", "--check", str(root)],
                              stdout=subprocess.PIPE, stderr=slave, timeout=60)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert proc.returncode == 1
    assert b"elfpatch: [" in seen and b"3/3 files" in seen and seen.endswith(b"\r\x1b[K")


class _Told:
    """A progress listener that records what it is told (holding a lock, it cannot be pickled for a worker)."""

    def __init__(self) -> None:
        import threading

        self.events: list[tuple[str, object]] = []
        self.lock = threading.Lock()

    def begin(self, total: int) -> None:
        self.events.append(("begin", total))

    def step(self, processed: bool) -> None:
        self.events.append(("step", processed))

    def end(self) -> None:
        self.events.append(("end", None))


@pytest.mark.parametrize("files", [3, 20])
def test_the_library_tells_progress_and_draws_nothing(unique_build: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, files: int) -> None:
    """Guarantee: progress is drawn by the command line only. A tree run tells the listener the job was given
    (begin, one step per inode, end), serially or with a pool (the listener stays in this process: the job
    still reaches the workers), and writes nothing to a terminal stderr itself, even when given the old
    ``progress=True``."""
    import io

    from elfpatch.targets import CHECK, Job, tree
    from elfpatch.targets.tree import process_tree, workers

    root = tmp_path / "t"
    root.mkdir()
    for i in range(files):
        shutil.copy(unique_build / "libholder_v1.so", root / f"l{i:02}.so")
    (root / "notes.txt").write_text("not a target")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    told = _Told()
    job = Job(mode=CHECK, progress=told)
    real, pools = tree._parallel, []
    monkeypatch.setattr(tree, "_parallel", lambda groups, job: pools.append(real(groups, job)) or pools[-1])
    process_tree(str(root), job)
    assert pools == [min(workers(), 8) if files > tree.PARALLEL_MIN_FILES and workers() > 1 else 1]
    assert told.events == [("begin", files + 1), *[("step", True)] * files, ("step", False), ("end", None)]
    process_tree(str(root), Job(mode=CHECK, progress=True))
    assert err.getvalue() == ""


def test_tree_refuses_output_and_reports_a_missing_path(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    proc = run_main("unique", "-o", str(tmp_path / "x"), str(tmp_path / "d"))
    assert proc.returncode == 2 and "takes a file, not a directory" in proc.stderr
    proc = run_main("unique", str(tmp_path / "missing"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("pool", [False, True], ids=["serial", "pool"])
def test_fsync_makes_re_pointed_names_durable_once_per_directory(pool: bool, unique_build: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Guarantee: --fsync covers a tree's hard links. Each directory where the relink re-pointed a name is
    fsynced, as the commit fsyncs the directory of its rename (they were not: a power loss could leave a
    re-pointed name at the old file), and once per run however many of its names were re-pointed, also
    when pool workers re-pointed them (the run fsyncs what they report, at its end)."""
    from elfpatch.targets import Job, tree

    if pool:
        monkeypatch.setattr(tree, "PARALLEL_MIN_FILES", 0)
        monkeypatch.setattr(tree, "workers", lambda: 2)
    root = tmp_path / "tree"
    for d in "abc":
        (root / d).mkdir(parents=True)
    for lib in ("libholder_v1.so", "libholder_v2.so"):
        shutil.copy(unique_build / lib, root / "a" / lib)
        for d in "bc":
            os.link(root / "a" / lib, root / d / lib)
    assert (tree._parallel(tree.walk(str(root))[0], Job(fsync=True)) > 1) == pool
    synced: list[tuple[int, int]] = []
    real = os.fsync

    def spy(fd: int) -> None:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            synced.append((st.st_dev, st.st_ino))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    reports = elfpatch.patch([root], fsync=True)
    assert sorted(r.status for r in reports) == ["patched", "patched"]
    for lib in ("libholder_v1.so", "libholder_v2.so"):  # the names are one (patched) file again
        assert len({(root / d / lib).stat().st_ino for d in "abc"}) == 1 and (root / "b" / lib).stat().st_nlink == 3
    ident = {d: ((root / d).stat().st_dev, (root / d).stat().st_ino) for d in "abc"}
    assert synced.count(ident["b"]) == 1 and synced.count(ident["c"]) == 1, synced
    assert pool or ident["a"] in synced  # the commit's own, for the renames there (in a worker, unseen here)


def test_the_walk_tries_the_temp_patterns_only_on_names_with_their_prefix() -> None:
    """The walk tells a run's temps and journals apart from inputs only for names beginning ".elfpatch-" (a
    string test, not two regular expressions, on every file): both patterns must begin with it."""
    from elfpatch.fs.temps import JOURNAL_RE, TEMP_RE, temp_name

    for rx in (TEMP_RE, JOURNAL_RE):
        assert rx.pattern.startswith(r"^\.elfpatch-"), rx.pattern
    assert temp_name().startswith(".elfpatch-")


@pytest.mark.parametrize("spelling", ["{root}", "{root}/", "{root}//", ".", "./"])
def test_the_walk_names_each_file_as_os_path_join_would(tmp_path: Path, spelling: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk builds each path from its directory's once (not one os.path.join per entry): the paths
    reports carry are still what joining the root as given with each name gives, at every depth."""
    from elfpatch.targets.tree import walk

    root = tmp_path / "t"
    for rel in ("a.so", "d/b.so", "d/e/c.so", "d/e/f/g.so"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    monkeypatch.chdir(root)
    given = spelling.format(root=root)
    groups = walk(given).groups
    want = []
    for rel in ("a.so", "d/b.so", "d/e/c.so", "d/e/f/g.so"):
        path = given
        for part in rel.split("/"):
            path = os.path.join(path, part)
        want.append(path)
    assert sorted(n.path for g in groups for n in g.names) == sorted(want)


def test_a_killed_runs_relinking_is_repaired_whatever_the_paths_spelling(unique_build: Path, tmp_path: Path) -> None:
    """Guarantee: the next run repairs a switch a kill interrupted, for a tree PATH spelled any way (here
    ``tree/.``). Killed just after the first name's rename, the two names are split across two inodes with a
    journal beside them; the next run over the same PATH finds every name the journal records (it found the
    first name, then missed the others, whose paths it normalized: they were patched apart, the hard link lost,
    and the journal left for good)."""
    import signal

    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(unique_build / "libholder_v1.so", tree / "a.so")
    os.link(tree / "a.so", tree / "b.so")
    spelled = f"{tree}/."
    env = dict(os.environ, ELFPATCH_TEST_STOP="renamed")
    child = subprocess.Popen([sys.executable, "-m", "elfpatch", "unique", spelled], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status = os.waitpid(child.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), "the run never reached its rename"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    assert (tree / "a.so").stat().st_ino != (tree / "b.so").stat().st_ino
    run_main("unique", spelled, check=True)
    assert (tree / "a.so").stat().st_ino == (tree / "b.so").stat().st_ino and (tree / "a.so").stat().st_nlink == 2
    assert not [n for n in os.listdir(tree) if n.startswith(".elfpatch-")]
