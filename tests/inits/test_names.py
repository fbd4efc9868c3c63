"""Source files and priorities from compiler-generated initializer names."""
from __future__ import annotations

import pytest

from elfpatch.inits.order import parse_cdtor_name


@pytest.mark.parametrize(("name", "expected"), [
    ("_GLOBAL__sub_I_foo.cpp", ("foo.cpp", None)),
    ("_GLOBAL__sub_I.00101_foo.cpp", ("foo.cpp", 101)),  # GCC >= 11 (JOINER '.')
    ("_GLOBAL__sub_I_00101_foo.cpp", ("foo.cpp", 101)),  # the form
    ("_GLOBAL__sub_I_65535_0_foo.cc", ("foo.cc", 65535)),  # older GCC, with a counter
    ("_GLOBAL__sub_D_bar.cxx", ("bar.cxx", None)),  # -fno-use-cxa-atexit destructors
    ("_GLOBAL__sub_I_my_file.cpp.lto_priv.0", ("my_file.cpp", None)),
    ("_GLOBAL__sub_I_12345.cpp", ("12345.cpp", None)),  # five digits but no "_" after them: a file
    ("_GLOBAL__sub_I_99999_x.cpp", ("99999_x.cpp", None)),  # above 65535: not a priority
    ("_GLOBAL__sub_I_g_config", (None, None)),  # non-PIC: keyed to the first global symbol
    ("_GLOBAL__sub_I.00200_g_config", (None, 200)),
    ("_GLOBAL__I_000101", (None, 101)),  # clang's init_priority function
    ("frame_dummy", (None, None)),
    ("_Z3foov", (None, None)),
    (None, (None, None)),
])
def test_parse(name: str | None, expected: tuple[str | None, int | None]) -> None:
    assert parse_cdtor_name(name) == expected
