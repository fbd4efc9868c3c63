"""Build a generated program in one variant of the matrix, and run it under the `__cxa_atexit` shim."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from siof.truth import A64_SYSROOT

from truth.emit import emit
from truth.generator import Program

ROOT = Path(__file__).resolve().parents[2]
SHIM_SOURCE = ROOT / "native_tests" / "siof" / "shim.c"
COMPILERS = {"gcc": ("gcc", "g++"), "clang": ("clang", "clang++")}


@dataclass(frozen=True)
class Target:
    """A machine the programs are built for and run on: its compilers (argv prefixes), strip, the
    `-fcf-protection` analog, how a program runs (qemu-user for another machine: the guest's own ld.so and
    libraries under ``sysroot``) and where ``--deps`` finds that machine's libraries (LD_LIBRARY_PATH)."""
    compilers: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    strip: str
    cf: str
    runner: tuple[str, ...] = ()
    sysroot: str | None = None


TARGETS = {
    "x86_64": Target({c: ((cc,), (cxx,)) for c, (cc, cxx) in COMPILERS.items()}, "strip", "-fcf-protection=full"),
    "aarch64": Target({"gcc": (("aarch64-linux-gnu-gcc",), ("aarch64-linux-gnu-g++",)),
                       "clang": (("clang", "--target=aarch64-linux-gnu"), ("clang++", "--target=aarch64-linux-gnu"))},
                      "aarch64-linux-gnu-strip", "-mbranch-protection=standard",
                      ("qemu-aarch64", "-L", A64_SYSROOT), A64_SYSROOT),
}
ARCH_TAGS = {"aarch64": "a64"}  # a variant name's prefix for a machine other than x86-64
OPTS = ("O0", "O1", "O2", "O3")
LINKS = ("pie", "nopie", "shared")
ORDERS = 3  # link orders per build shape


@dataclass(frozen=True)
class Variant:
    compiler: str  # gcc | clang
    opt: str  # O0..O3
    link: str  # pie | nopie | shared (the main module: a program, or a library behind a tiny main)
    lto: bool  # -flto on the main module
    cf: bool  # -fcf-protection=full
    strip: bool  # the analysed files are `strip`ped copies
    order: int  # which link order (units and libraries shuffled by it)
    arch: str = "x86_64"  # a key of TARGETS

    @property
    def name(self) -> str:
        flags = [f for f, on in (("lto", self.lto), ("cf", self.cf), ("strip", self.strip)) if on]
        tag = [ARCH_TAGS[self.arch]] if self.arch in ARCH_TAGS else []
        return "-".join([*tag, self.compiler, self.opt, self.link, *flags, f"o{self.order}"])

    @property
    def target(self) -> Target:
        return TARGETS[self.arch]

    @classmethod
    def parse(cls, name: str) -> Variant:
        parts = name.split("-")
        arch = next((a for a, tag in ARCH_TAGS.items() if tag == parts[0]), "x86_64")
        if arch != "x86_64":
            parts = parts[1:]
        return cls(parts[0], parts[1], parts[2], "lto" in parts, "cf" in parts, "strip" in parts,
                   int(parts[-1][1:]), arch)


def matrix(compilers: tuple[str, ...] = ("gcc", "clang"), arch: str = "x86_64") -> list[Variant]:
    return [Variant(c, o, ln, lto, cf, st, order, arch) for c in compilers for o in OPTS for ln in LINKS
            for lto in (False, True) for cf in (False, True) for st in (False, True) for order in range(ORDERS)]


def variants_for(seed: int, count: int, compilers: tuple[str, ...] = ("gcc", "clang"),
                 arch: str = "x86_64") -> list[Variant]:
    """A deterministic subset of the matrix for one seed (so a seed always names the same builds); the
    compilers alternate so that each appears even in a small subset."""
    rng = random.Random(f"variants-{seed}")
    per = {c: rng.sample(matrix((c,), arch), count) for c in compilers}
    return [per[compilers[i % len(compilers)]][i // len(compilers)] for i in range(count)]


def tools(compiler: str, arch: str = "x86_64") -> tuple[str, ...]:
    """The programs a build of ``compiler`` for ``arch`` runs: its drivers, strip and (another machine) qemu."""
    t = TARGETS[arch]
    return (t.compilers[compiler][0][0], t.compilers[compiler][1][0], t.strip, *t.runner[:1])


def installed(compiler: str, arch: str = "x86_64") -> bool:
    """Whether every program of tools() is here."""
    return all(shutil.which(tool) for tool in tools(compiler, arch))


@dataclass
class Built:
    variant: Variant
    directory: Path
    program: Path
    modules: dict[str, Path]  # module -> the file as linked (with .symtab)
    analysed: dict[str, Path]  # module -> the file the analysis reads (stripped copy or the same)


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"build failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")


def write_sources(prog: Program, directory: Path) -> Path:
    src = directory / "src"
    src.mkdir(parents=True, exist_ok=True)
    for name, text in emit(prog).items():
        (src / name).write_text(text)
    return src


def shim(directory: Path, arch: str = "x86_64") -> Path:
    """native_tests/siof/shim.c, built once per campaign directory and machine."""
    out = directory / ("shim.so" if arch == "x86_64" else f"shim-{arch}.so")
    if not out.exists():
        cc = TARGETS[arch].compilers["gcc"][0]
        _run([*cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(SHIM_SOURCE), "-ldl"], directory)
    return out


def _compile(v: Variant, src: Path, out: Path, units: list[str], pic: str, lto: bool) -> list[str]:
    cxx = v.target.compilers[v.compiler][1]
    flags = ["-std=c++17", f"-{v.opt}", "-w", pic, *([v.target.cf] if v.cf else []), *(["-flto"] if lto else [])]
    objs = []
    for unit in units:
        obj = out / f"{unit}.o"
        _run([*cxx, *flags, "-I", str(src), "-c", "-o", str(obj), str(src / f"{unit}.cpp")], out)
        objs.append(str(obj))
    return objs


def _link_flags(v: Variant, lto: bool) -> list[str]:
    return [f"-{v.opt}", *(["-flto"] if lto else []), *([v.target.cf] if v.cf else []),
            "-L.", "-Wl,--no-as-needed", "-Wl,-rpath,$ORIGIN"]


def build(prog: Program, v: Variant, directory: Path, src: Path) -> Built:
    """Compile and link ``prog`` as variant ``v`` in ``directory``/<variant name>."""
    out = directory / v.name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cc, cxx = v.target.compilers[v.compiler]
    rng = random.Random(f"order-{prog.seed}-{v.order}")
    _run([*cc, "-shared", "-fPIC", "-O1", "-o", "libtruthrt.so", str(src / "truthrt.c")], out)
    modules: dict[str, Path] = {}
    for lib in ("libA", "libB"):
        if lib in prog.modules:
            objs = _compile(v, src, out, prog.modules[lib], "-fPIC", False)
            needs = ["-lA"] if lib == "libB" and prog.b_needs_a and "libA" in prog.modules else []
            _run([*cxx, "-shared", "-o", f"{lib}.so", *objs, *_link_flags(v, False), *needs, "-ltruthrt"], out)
            modules[lib] = out / f"{lib}.so"
    libs = [f"-l{lib[3:]}" for lib in modules]
    rng.shuffle(libs)
    units = list(prog.modules["main"])
    rng.shuffle(units)
    pic = {"pie": "-fPIE", "nopie": "-fno-pie", "shared": "-fPIC"}[v.link]
    objs = _compile(v, src, out, units, pic, v.lto)
    main_obj = _compile(v, src, out, ["main"], "-fPIE" if v.link != "nopie" else "-fno-pie", False)
    exe = ["-no-pie"] if v.link == "nopie" else ["-pie"]
    if v.link == "shared":
        _run([*cxx, "-shared", "-o", "libprog.so", *objs, *_link_flags(v, v.lto), *libs, "-ltruthrt"], out)
        _run([*cxx, *exe, "-o", "prog", *main_obj, *_link_flags(v, False), "-lprog", *libs, "-ltruthrt"], out)
        modules["main"] = out / "libprog.so"
    else:
        _run([*cxx, *exe, "-o", "prog", *objs, *main_obj, *_link_flags(v, v.lto), *libs, "-ltruthrt"], out)
        modules["main"] = out / "prog"
    analysed = dict(modules)
    if v.strip:
        (out / "stripped").mkdir()
        for m, path in modules.items():
            analysed[m] = out / "stripped" / path.name
            _run([v.target.strip, "-o", str(analysed[m]), str(path)], out)
        # the rest of the load the stripped files are judged in (--deps), the driver its root when the main
        # module is a library
        for name in ["libtruthrt.so"] + (["prog"] if v.link == "shared" else []):
            _run([v.target.strip, "-o", str(out / "stripped" / name), str(out / name)], out)
    return Built(v, out, out / "prog", modules, analysed)


def run(built: Built, shim_so: Path) -> tuple[str, dict[str, list[tuple[str, ...]]]]:
    """The program's stdout (what its initializers observed) and, per module, the (kind, dtor, object) of every
    registration the shim logged for that module (one run per module: the shim logs one target)."""
    stdout = ""
    logs: dict[str, list[tuple[str, ...]]] = {}
    for module, path in built.modules.items():
        log = built.directory / f"shim-{module}.log"
        log.unlink(missing_ok=True)
        guest = {"LD_PRELOAD": str(shim_so), "SHIM_LOG": str(log), "SHIM_TARGET": path.name}
        runner = built.variant.target.runner
        # under qemu-user the guest's variables go with -E (LD_PRELOAD in qemu's own environment is the host's)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **({} if runner else guest)}
        extra = [a for k, v in guest.items() for a in ("-E", f"{k}={v}")] if runner else []
        proc = subprocess.run([*runner, *extra, str(built.program)], env=env, capture_output=True, text=True,
                              timeout=300 if runner else 60)
        if proc.returncode != 0:
            raise RuntimeError(f"{built.program} exited {proc.returncode}: {proc.stderr[-2000:]}")
        stdout = stdout or proc.stdout
        lines = log.read_text().splitlines() if log.exists() else []
        logs[module] = [tuple(line.split(" ")) for line in lines]
    return stdout, logs
