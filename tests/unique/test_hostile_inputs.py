"""Bounded time and memory on hostile input: inputs that are valid (or nearly) but built to make work or memory
explode. Each runs in a child process whose peak RSS (VmHWM) is measured, or whose CPU time is capped with a
limit far above what a linear run needs and far below what the old quadratic or exponential code took: the
bound is a resource limit, never a wall-clock comparison."""
from __future__ import annotations

import resource
import subprocess
import sys

# Peak RSS of the child's own process image, printed last on stderr (ru_maxrss would count the forking parent).
_PEAK = (
    "import re, sys\n"
    "def _peak():\n"
    "    hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
    "    print(int(hwm) * 1024, file=sys.stderr)\n"
)


def run_child(code: str, *args: str, cpu_seconds: int = 60) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``code`` (which calls ``_peak()`` at its end) in a child with at most ``cpu_seconds`` of CPU time;
    its result and its peak RSS in bytes (-1 when it died before printing it)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    r = subprocess.run([sys.executable, "-c", _PEAK + code, *args], capture_output=True, text=True,
                       preexec_fn=limit)
    tail = r.stderr.split()[-1:] or ["-1"]
    return r, int(tail[0]) if tail[0].isdigit() else -1


def test_initializer_name_parsing_is_linear() -> None:
    """A 1 MB initializer name of clone-suffix look-alikes: a regex anchored with ``$`` retried its match from
    every dot (60 KB took 4-8 s, 1 MB would take hours); the suffixes are now taken off the end in one pass.
    The child gets 20 s of CPU for names totalling 4 MB."""
    code = (
        "from elfpatch.inits import parse_cdtor_name\n"
        "n = 1 << 20\n"
        "for name in ('_GLOBAL__sub_I_a' + '.part' * (n // 5) + 'x', '_GLOBAL__sub_I_a.cc' + '.part.1' * (n // 7),\n"
        "             '_GLOBAL__sub_I_' + '.cold' * (n // 5), '_GLOBAL__sub_I_00101_' + '9.' * (n // 2)):\n"
        "    print(parse_cdtor_name(name))\n"
        "_peak()\n"
    )
    r, _ = run_child(code, cpu_seconds=20)
    assert r.returncode == 0, f"killed by the CPU limit ({r.returncode}): {r.stderr[-300:]}"
    assert r.stdout.splitlines()[1:] == ["('a.cc', None)", "(None, None)", f"('{'9.' * (1 << 19)}', 101)"]
