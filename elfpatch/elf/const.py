"""ELF constants, named as the gABI, the GNU extensions and glibc's <elf.h> name them: the one home of each
number elfpatch reads from a file, and of the st_info split. Every other module imports them from here."""
from __future__ import annotations

ELFMAG = b"\x7fELF"
EI_NIDENT = 16
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2
ELFOSABI_SYSV, ELFOSABI_GNU = 0, 3

# e_type
ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4

# e_machine (those whose rules, multiarch directory or $PLATFORM differ somewhere in elfpatch)
EM_386, EM_MIPS, EM_PPC, EM_PPC64, EM_S390 = 3, 8, 20, 21, 22
EM_ARM, EM_SPARCV9, EM_X86_64, EM_AARCH64, EM_RISCV, EM_LOONGARCH = 40, 43, 62, 183, 243, 258
# R_*_IRELATIVE per machine: the word is what the resolver at the addend returns, not the addend (an ifunc).
R_IRELATIVE = {EM_X86_64: 37, EM_386: 42, EM_AARCH64: 1032, EM_PPC64: 248, EM_S390: 61, EM_ARM: 160,
               EM_RISCV: 58, EM_LOONGARCH: 12}

# Extended numbering: e_phnum == PN_XNUM puts the real count in section header 0's sh_info.
PN_XNUM = 0xFFFF

# sh_type
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 0, 1, 2, 3
SHT_RELA, SHT_HASH, SHT_DYNAMIC, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 4, 5, 6, 8, 9, 11
SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY = 14, 15, 16
SHT_RELR = 19

# Special section indexes; SHN_XINDEX in e_shstrndx puts the real index in section header 0's sh_link.
SHN_UNDEF, SHN_LORESERVE, SHN_XINDEX = 0, 0xFF00, 0xFFFF

# sh_flags
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
SHF_TLS = 0x400

# p_type
PT_NULL, PT_LOAD, PT_DYNAMIC, PT_INTERP = 0, 1, 2, 3
PT_GNU_EH_FRAME, PT_GNU_RELRO = 0x6474E550, 0x6474E552

# p_flags
PF_X, PF_W, PF_R = 1, 2, 4

# d_tag
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB = 0, 1, 4, 5, 6
DT_RELA, DT_RELASZ, DT_RELAENT = 7, 8, 9
# Copy relocations: the program holds a copy of a library's object, filled at load (psABIs).
R_X86_64_COPY, R_AARCH64_COPY = 5, 1024
DT_STRSZ, DT_SYMENT = 10, 11
DT_PLTGOT = 3
DT_INIT, DT_FINI, DT_SONAME, DT_RPATH, DT_SYMBOLIC = 12, 13, 14, 15, 16
DT_REL, DT_RELSZ, DT_RELENT = 17, 18, 19
DT_PLTRELSZ, DT_PLTREL, DT_JMPREL = 2, 20, 23
DT_INIT_ARRAY, DT_FINI_ARRAY, DT_INIT_ARRAYSZ, DT_FINI_ARRAYSZ = 25, 26, 27, 28
DT_RUNPATH, DT_FLAGS = 29, 30
DF_SYMBOLIC = 0x2  # DT_FLAGS: the object's own definitions first in its lookups (-Bsymbolic)
DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ = 32, 33
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
DT_FLAGS_1 = 0x6FFFFFFB

# DT_FLAGS_1 bits
DF_1_NODELETE, DF_1_INITFIRST, DF_1_NODEFLIB, DF_1_PIE = 0x8, 0x20, 0x800, 0x08000000

# st_info: binding (high nibble) and type (low nibble)
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_FILE, STT_TLS, STT_GNU_IFUNC = 0, 1, 2, 4, 6, 10
STV_DEFAULT = 0  # st_other's low two bits: the visibility another object's definition can interpose


def st_bind(st_info: int) -> int:
    """The binding (STB_*) of a symbol's st_info: its high nibble (gABI ELF64_ST_BIND)."""
    return st_info >> 4


def st_type(st_info: int) -> int:
    """The type (STT_*) of a symbol's st_info: its low nibble (gABI ELF64_ST_TYPE)."""
    return st_info & 0xF


def st_info_of(bind: int, typ: int) -> int:
    """The st_info byte of a binding and a type (gABI ELF64_ST_INFO)."""
    return (bind << 4) | (typ & 0xF)


# Symbol-table entry sizes, and where st_info sits inside one (by ELF class in bits).
SYM_ENTSIZE = {32: 16, 64: 24}
ST_INFO_OFFSET = {32: 12, 64: 4}
ST_SHNDX_OFFSET = {32: 14, 64: 6}  # the 2-byte st_shndx (SHN_UNDEF, 0, reads the same in both byte orders)
