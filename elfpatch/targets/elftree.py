"""The ELF files a PATH names, for the commands that read ELF files only (`inits`): the file itself, or for
a directory the ELF files the loader runs (executables and shared objects) of its tree, found by the same
walk as `unique` and `audit` (symlinks and special files passed over, one name per inode, sorted) and told by
their first bytes (object files and core dumps in a build tree are passed over, not errors). A file read that
is named like an elfpatch temp where no marker can tell ours gets the warning `unique` gives it."""
from __future__ import annotations

import os

from elfpatch.elf.const import ELFDATA2MSB, ELFMAG, ET_DYN, ET_EXEC
from elfpatch.errors import ElfPatchError, warn
from elfpatch.fs.temps import PROBABLE_TEMP, probable_temp
from elfpatch.targets import Exclude, read_head

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Iterator


def elf_paths(paths: Iterable[str], exclude: Exclude | None = None) -> Iterator[tuple[str, ElfPatchError | None]]:
    """(path, None) for each file to read, in order; (PATH, error) for a tree that cannot be walked. A file
    named as a PATH is always read (it is the caller's to say it is ELF), unless ``exclude`` matches it;
    in a tree, only an ELF executable or shared object is read, unless ``exclude`` matches its path relative
    to the root."""
    exclude = exclude if exclude is not None else Exclude()
    for path in paths:
        if not os.path.isdir(path):
            if not exclude.excludes(path):
                if probable_temp(path):  # as `unique` says of one given as a PATH
                    warn(path, PROBABLE_TEMP)
                yield path, None
            continue
        try:
            found = _tree(path, exclude)
        except ElfPatchError as exc:
            yield path, exc
            continue
        yield from ((p, None) for p in found)


def _tree(root: str, exclude: Exclude) -> list[str]:
    from elfpatch.targets.tree import walk, warn_probable

    walked = walk(root, exclude)
    found = [g.names[0].path for g in walked.groups if _loadable(g.names[0].path)]
    read = set(found)
    warn_probable(p for p in walked.probable if p in read)  # only of the files read
    return found


def _loadable(path: str) -> bool:
    """Whether the ELF header's e_type (the 2 bytes at 16, in the file's byte order) is ET_EXEC or ET_DYN."""
    try:
        head = read_head(path, size=18)
    except OSError:
        return True  # unreadable: reading it says why, as for a PATH
    if len(head) < 18 or head[:4] != ELFMAG:
        return False
    e_type = int.from_bytes(head[16:18], "big" if head[5] == ELFDATA2MSB else "little")
    return e_type in (ET_EXEC, ET_DYN)
