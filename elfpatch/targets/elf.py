"""One ELF file on disk: plan its edits from one read-only map, then commit them atomically or in place."""
from __future__ import annotations

from elfpatch.elf.file import ElfFile
from elfpatch.errors import UnsupportedError
from elfpatch.patching.plan import ImagePlan, plan_image, verify_image
from elfpatch.report import FOUND, PATCHED, SKIPPED, UNCHANGED, WOULD_PATCH, FileReport
from elfpatch.targets import commit, open_source

TYPE_CHECKING = False  # typing is not imported on the read path
if TYPE_CHECKING:
    import mmap

    from elfpatch.fs.source import Place
    from elfpatch.targets import Job


def status_for(plan: ImagePlan, job: Job) -> str:
    """The report status of a planned image under this job's mode (before anything is written)."""
    if not plan.rows:
        return UNCHANGED
    return {"check": FOUND, "dry-run": WOULD_PATCH}.get(job.mode, PATCHED)


def process_elf(path: str, job: Job, place: Place | None = None) -> FileReport:
    with open_source(path, job, place) as src:
        elf = ElfFile(src.data, path)
        try:
            plan = plan_image(elf, job.to, job.names)
        except UnsupportedError as exc:
            if job.writes and job.output:  # -o OUT that exits 0 leaves OUT holding the result: the input
                commit(src, [], lambda buf: None, job)
            return FileReport(path, SKIPPED, reason=exc.message, warnings=list(elf.warnings))
        report = FileReport(path, status_for(plan, job), plan.rows, plan.kept, warnings=plan.warnings)
        if job.inspect is not None:
            report.facts = job.inspect(elf, False)
        if not job.writes or not (plan.edits or job.output):
            return report  # nothing to write: the file is not even opened for writing

        def verify(buf: bytes | mmap.mmap) -> None:
            verify_image(ElfFile(buf, path), plan)

        commit(src, plan.edits, verify, job)
        return report
