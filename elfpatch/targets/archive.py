"""A static archive (.a): every ELF member patched within the archive's own bytes.

The edits are one byte each at ``member data offset + image offset``, so the archive is committed like any
other file (atomically or in place) and its size, layout, names, order and symbol index stay as they are.
A thin archive holds no member data: the files it names (relative to the archive) are patched instead.
"""
from __future__ import annotations

import os

from elfpatch.elf.const import ELFMAG
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfPatchError, UnsupportedError
from elfpatch.formats import arfmt
from elfpatch.fs.regular import open_at
from elfpatch.fs.source import Place, Source
from elfpatch.patching.plan import ImagePlan, plan_image, verify_image
from elfpatch.report import SKIPPED, UNCHANGED, FileReport
from elfpatch.targets import DRY_RUN, Job, commit, open_source
from elfpatch.targets.elf import process_elf, status_for

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    import mmap


def _member_view(data: bytes | mmap.mmap, m: arfmt.Member) -> memoryview:
    """The member's bytes, read in place in the archive's map: a 1 GiB member is never copied. Use it in a
    ``with`` statement: the view is released on exit, so that the map can be closed. (A memoryview of its
    own, not a generator context manager: that cost a tenth of a small member's whole check.)"""
    return memoryview(data)[m.data_offset : m.data_offset + m.size]


def _member_image(view: memoryview, m: arfmt.Member, path: str) -> ElfFile:
    return ElfFile(view, f"{path}[{m.name}]")


def process_archive(path: str, job: Job, root: str | None = None, place: Place | None = None) -> list[FileReport]:
    """Every ELF member of the archive at ``path`` (``root``: the tree being walked, if any)."""
    with open_source(path, job, place) as src:
        thin, members = arfmt.parse(src.data, path)
        if thin:
            return _process_thin(path, members, job, root)
        reports: list[FileReport] = []
        plans: list[tuple[arfmt.Member, ImagePlan]] = []
        for m in members:
            if not _is_patched_member(src.data, m, job):
                continue
            plan = _plan_member(src.data, m, path, job, reports)
            if plan is not None:
                plans.append((m, plan))
        if not reports:
            reports.append(FileReport(path, UNCHANGED))  # an archive without ELF members
        _commit_members(src, plans, path, job)
        return reports


def _is_patched_member(data: bytes | mmap.mmap, m: arfmt.Member, job: Job) -> bool:
    """An ELF member the job has not excluded: the symbol index and non-ELF members are copied as they are."""
    if m.is_index or bytes(data[m.data_offset : m.data_offset + 4]) != ELFMAG:
        return False
    return not job.exclude.excludes(m.name)


def _plan_member(data: bytes | mmap.mmap, m: arfmt.Member, path: str, job: Job,
                 reports: list[FileReport]) -> ImagePlan | None:
    """Plan and report one ELF member, its edits offset to where it lies in the archive; None when it is
    skipped (an unsupported image is reported, not fatal: the other members are still patched)."""
    with _member_view(data, m) as view:
        try:
            image = _member_image(view, m, path)
            plan = plan_image(image, job.to, job.names, base=m.data_offset)
        except UnsupportedError as exc:
            reports.append(FileReport(path, SKIPPED, reason=exc.message, member=m.name))
            return None
        except ElfPatchError as exc:
            raise exc.within(f"member {m.name}", path) from exc
        reports.append(FileReport(path, status_for(plan, job), plan.rows, plan.kept,
                                  warnings=plan.warnings, member=m.name))
        if job.inspect is not None:
            reports[-1].facts = job.inspect(image, True)
    return plan


def _commit_members(src: Source, plans: list[tuple[arfmt.Member, ImagePlan]], path: str, job: Job) -> None:
    """Apply every member's edits to the archive in one commit (with -o, an unchanged archive is still
    copied), verified by re-reading each member from the new bytes."""
    edits = [e for _, plan in plans for e in plan.edits]
    if not (job.writes and (edits or job.output)):
        return

    def verify(buf: bytes | mmap.mmap) -> None:
        for m, plan in plans:
            with _member_view(buf, m) as view:
                verify_image(_member_image(view, m, path), plan)

    commit(src, edits, verify, job)


def _is_elf_file(path: str) -> bool:
    """Whether a thin member names an ELF file. Never blocks (open_at): a FIFO (or a device), as anything not a
    regular file, is handed to process_elf, which reports it."""
    try:
        fd, _ = open_at(path, follow=True)
    except OSError:  # NotRegular too
        return True  # let process_elf report why it cannot be read
    try:
        return os.pread(fd, 4, 0) == ELFMAG
    except OSError:
        return True
    finally:
        os.close(fd)


def _process_thin(path: str, members: list[arfmt.Member], job: Job, root: str | None) -> list[FileReport]:
    """A thin archive stores only its index and the names of outside files (relative to the archive).

    Named as a PATH, its ELF member files are patched where they are (each atomically, or in place). Met in a
    tree walk (``root``), members inside the tree are left to the walk, which visits them as files of their
    own, and members outside it are reported as skipped: the walk does not reach out of its tree."""
    if job.output:
        raise ElfPatchError("-o is not supported for a thin archive (its members are outside files)", path)
    base = os.path.dirname(path)
    targets = [(m.name, os.path.join(base, m.name)) for m in members if not m.is_index]
    if root is not None:
        return _thin_in_tree(path, targets, root)
    targets = [(name, target) for name, target in targets if _is_elf_file(target)]
    if job.writes:  # read every member first, so that one broken member leaves all of them untouched
        probe = Job(DRY_RUN, job.to, job.names)
        for name, target in targets:
            _process_thin_member(path, name, target, probe)
    reports = [_process_thin_member(path, name, target, job) for name, target in targets]
    if not reports:
        reports.append(FileReport(path, UNCHANGED))  # no ELF member files
    return reports


def _thin_in_tree(path: str, targets: list[tuple[str, str]], root: str) -> list[FileReport]:
    """A thin archive met in a tree walk: nothing is patched through it (see _process_thin)."""
    top = os.path.realpath(root)
    reports: list[FileReport] = []
    for name, target in targets:
        if os.path.commonpath([top, os.path.realpath(target)]) != top:
            reports.append(FileReport(path, SKIPPED, member=name,
                                      reason="thin archive member outside the tree: not followed (name the "
                                             "archive itself to patch it)"))
    if not reports:
        reports.append(FileReport(path, SKIPPED, reason="thin archive: its members are files of the tree, "
                                                        "processed on their own"))
    return reports


def _process_thin_member(path: str, name: str, target: str, job: Job) -> FileReport:
    """One member file of a thin archive, processed as an ELF file and reported as the archive's member."""
    try:
        report = process_elf(target, job)
    except ElfPatchError as exc:
        raise exc.within(f"thin member {name}", path) from exc
    report.path, report.member = path, name
    return report
