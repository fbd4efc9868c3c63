"""Property-based fuzzing of the reader and the writers over mutated fixtures: only elfpatch's own errors leave
the API, a failed run leaves its input byte-identical, a successful one changes only binding nibbles of
st_info bytes. ELFPATCH_FUZZ_EXAMPLES sets the number of cases (`make fuzz` runs 20,000)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import CROSS_ARCHES, require_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_own_error

import elfpatch
from unique.helpers import info_offsets
from unique.lies import EXTENDED, LOADER_LIES

EXAMPLES = int(os.environ.get("ELFPATCH_FUZZ_EXAMPLES", "300"))
FIXTURES = ("libholder_v1.so", "holder_v1.o", "i686/libholder_v1.so", "powerpc64/libholder_v1.so")
# libholder_v1.so with headers that lie (lies.py): the loader's view and the section view part ways.
LIED = ("decoy-dynsym", "dynamic-offset", "grow-dynsym", "pn-xnum", "shdrs-past-eof", "shrink-dynsym",
        "single-null-shdr")

mutations = st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=8)


@pytest.mark.slow  # a hypothesis campaign
@pytest.mark.cross  # needs the cross fixtures
@pytest.mark.parametrize("name", FIXTURES + tuple(f"lie:{lie}" for lie in LIED))
def test_fuzz_mutated_fixture(cross_build: Path, tmp_path_factory: pytest.TempPathFactory, name: str) -> None:
    if name.startswith("lie:"):
        lie = {**LOADER_LIES, **EXTENDED}[name[4:]]
        original = lie((cross_build / "libholder_v1.so").read_bytes())
    else:
        src = cross_build / name
        if not src.exists():  # the cross compiler is absent (under CI, a failure)
            require_tool(f"{CROSS_ARCHES[name.split('/')[0]][0]}-g++")
        original = src.read_bytes()

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutations, st.one_of(st.none(), st.integers(min_value=0)), st.booleans())
    def run(pokes: list[tuple[int, int]], cut: int | None, inplace: bool) -> None:
        data = bytearray(original)
        for pos, value in pokes:
            data[pos % len(data)] = value
        if cut is not None:
            del data[cut % len(data) :]
        path = tmp_path_factory.mktemp("fuzz") / "lib.so"
        path.write_bytes(bytes(data))
        try:
            reports = elfpatch.patch(path, inplace=inplace)
        except elfpatch.ElfPatchError as exc:
            assert_own_error(exc)
            assert path.read_bytes() == bytes(data), "a failed run leaves its input byte-identical"
            return
        after = path.read_bytes()
        changed = [i for i, (a, b) in enumerate(zip(data, after)) if a != b]
        assert len(after) == len(data)
        assert len(changed) == sum(len(r.symbols) for r in reports if r.status == "patched")
        assert set(changed) <= info_offsets(bytes(data))
        for i in changed:
            assert data[i] >> 4 == 10 and after[i] >> 4 == 1 and data[i] & 0xF == after[i] & 0xF
        assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]

    run()
