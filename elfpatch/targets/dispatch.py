"""Sending a PATH to its kind: a directory tree (tree.py), or one file (files.py)."""
from __future__ import annotations

import os

from elfpatch.errors import ElfPatchError, warn
from elfpatch.fs.temps import PROBABLE_TEMP, probable_temp
from elfpatch.targets import Job, Outcome, detect, error_report
from elfpatch.targets.files import process_file


def process(path: str, job: Job) -> Outcome:
    """Run ``job`` on one PATH; failures become error reports, never exceptions."""
    try:
        if os.path.isdir(path):
            from elfpatch.targets.tree import process_tree

            return process_tree(path, job)
        if job.exclude.excludes(path):
            return Outcome(skipped=1)
        if probable_temp(path):  # as a tree walk says of one in its tree
            warn(path, PROBABLE_TEMP)
        return Outcome(process_file(path, job.for_path(path), detect(path)))
    except ElfPatchError as exc:
        return Outcome([error_report(path, exc)])
