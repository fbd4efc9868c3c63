"""The ar archive format (static libraries): member headers, GNU and BSD long names, thin archives.

Read-only and bounds-checked: a one-byte edit inside a member changes no size, so the layout, the member
names and the symbol index (``/``, ``/SYM64/``, ``__.SYMDEF``) all stay valid and are never rewritten.
"""
from __future__ import annotations

from elfpatch.elf.records import Record
from elfpatch.errors import ParseError

TYPE_CHECKING = False  # for the checker only: nothing more is imported at run time
if TYPE_CHECKING:
    import mmap

AR_MAGIC = b"!<arch>\n"
THIN_MAGIC = b"!<thin>\n"
HEADER_SIZE = 60
FMAG = b"`\n"
INDEX_NAMES = ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED", "__.SYMDEF_64", "__.SYMDEF_64 SORTED")
# The symbol indexes and the long name table: stored even in a thin archive, and never a "/N" long name.
_SPECIAL_NAMES = ("/", "//", "/SYM64/")


class Member(Record):
    name: str
    header_offset: int
    data_offset: int  # for a thin archive's file members: where the data would be (there is none)
    size: int

    @property
    def is_index(self) -> bool:
        return self.name in INDEX_NAMES or self.name == "//"


def is_archive(head: bytes) -> bool:
    return head[:8] in (AR_MAGIC, THIN_MAGIC)


def _decimal(field: bytes, what: str, path: str) -> int:
    text = field.decode("ascii", "replace").strip()
    if not text.isdigit():
        raise ParseError(f"ar member header: bad {what} {text!r}", path)
    return int(text)


def _long_name_end(table: bytes, offset: int) -> int:
    """Where the long name at ``offset`` of a ``//`` table ends: GNU ends names with "/\n", the MS/COFF
    lib format (lib.exe; GNU ar and llvm-ar read it too) with NUL. -1 when it does not end."""
    ends = [e for e in (table.find(b"/\n", offset), table.find(b"\0", offset)) if e >= 0]
    return min(ends, default=-1)


def parse(data: bytes | mmap.mmap, path: str) -> tuple[bool, list[Member]]:
    """(thin, members) of the archive in ``data``, in archive order, including the index members."""
    magic = bytes(data[:8])
    if magic not in (AR_MAGIC, THIN_MAGIC):
        raise ParseError("not an ar archive", path)
    thin = magic == THIN_MAGIC
    size = len(data)
    members: list[Member] = []
    longnames = b""
    pos = 8
    while pos < size:
        header = _member_header(data, pos, path)
        raw_name = header[:16].decode("utf-8", "surrogateescape").rstrip(" ")
        special = raw_name in _SPECIAL_NAMES
        name, data_off, msize = _member_name(data, header, raw_name, pos, longnames, path)
        # A thin archive stores only its index and name table; other members live in outside files.
        stored = not thin or special
        if stored and (msize > size or data_off + msize > size):
            raise ParseError(f"ar member {name!r} at {pos:#x} runs past the end of the file", path)
        if raw_name == "//":
            longnames = bytes(data[data_off : data_off + msize])
        members.append(Member(name, pos, data_off, msize))
        pos = data_off + (msize if stored else 0)
        pos += pos & 1  # members are 2-byte aligned
    return thin, members


def _member_header(data: bytes | mmap.mmap, pos: int, path: str) -> bytes:
    if pos + HEADER_SIZE > len(data):
        raise ParseError(f"ar member header at {pos:#x} runs past the end of the file", path)
    header = bytes(data[pos : pos + HEADER_SIZE])
    if header[58:60] != FMAG:
        raise ParseError(f"ar member header at {pos:#x}: bad magic", path)
    return header


def _member_name(data: bytes | mmap.mmap, header: bytes, raw_name: str, pos: int, longnames: bytes,
                 path: str) -> tuple[str, int, int]:
    """(name, data offset, data size) of the member whose header is at ``pos``: a BSD long name is stored
    at the start of the data and counted in its size, so it moves both."""
    msize = _decimal(header[48:58], "size", path)
    data_off = pos + HEADER_SIZE
    special = raw_name in _SPECIAL_NAMES
    if raw_name.startswith("#1/"):  # BSD: the name follows the header and is counted in the size
        n = _decimal(header[3:16], "BSD name length", path)
        if n > msize or data_off + n > len(data):
            raise ParseError(f"ar member at {pos:#x}: BSD name longer than the member", path)
        name = bytes(data[data_off : data_off + n]).rstrip(b"\0").decode("utf-8", "surrogateescape")
        return name, data_off + n, msize - n
    if raw_name.startswith("/") and not special:  # GNU: "/N" is an offset into the "//" table
        off = _decimal(header[1:16], "long name offset", path)
        end = _long_name_end(longnames, off)
        if off >= len(longnames) or end < 0:
            raise ParseError(f"ar member at {pos:#x}: long name offset {off} outside the name table", path)
        return longnames[off:end].decode("utf-8", "surrogateescape"), data_off, msize
    if raw_name.endswith("/") and not special:
        return raw_name[:-1], data_off, msize
    return raw_name, data_off, msize
