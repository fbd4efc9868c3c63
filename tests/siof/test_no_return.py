"""A call of a function that never returns ends its block: clang -O2 -flto lays a std::map's landing pad (its
cleanup loads the map's root to erase it) right after a `std::__throw_length_error` call of the std::string
built before it, so the fall-through made the pad's load look like the map read before its inlined constructor
stored into it -- a false finding on a program that reads nothing early. With the call ending its block, the
pad is reached only after the map's build (or not at all)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from helpers import run_main

NAMES = """#include <map>
#include <string>
#include <vector>
std::string g_name = std::string("a-long-service-name-") + "that-needs-heap";
std::vector<int> g_ports = {80, 443, 8080};
std::map<int, int> g_limits = {{1, 2}, {3, 4}};
int main() {}
"""


@pytest.mark.cross
def test_a_landing_pad_after_a_throw_is_no_read_before_construction(tmp_path: Path) -> None:
    require_tool("clang++", "ld.lld", packages="clang, lld")
    (tmp_path / "names.cpp").write_text(NAMES)
    exe = tmp_path / "prog"
    subprocess.run(["clang++", "-O2", "-flto", "-fuse-ld=lld", "-o", str(exe), str(tmp_path / "names.cpp")],
                   check=True, capture_output=True)
    subprocess.run([str(exe)], check=True)
    f = json.loads(run_main("inits", "--dtors", "--siof", "--json", str(exe), check=True).stdout)["files"][0]
    assert f["findings"] == []
    assert len(f["exit_time_destructors"]) == 3  # the string's, the vector's and the map's: all still seen
