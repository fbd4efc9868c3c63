"""The partial re-deflate of edited zip members, against zlib itself: streams from every level and strategy
(stored, fixed and dynamic blocks), edits anywhere, copied stretches at aligned and unaligned boundaries."""
from __future__ import annotations

import os
import random
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from elfpatch.errors import ParseError, VerifyError
from elfpatch.formats import zipfmt, zsplice
from elfpatch.formats.spans import Span

pytestmark = pytest.mark.skipif(zsplice.libz() is None, reason="needs the system libz.so.1 for inflate(Z_BLOCK)")


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(2) as p:
        yield p


def sample(rng: random.Random, size: int) -> bytes:
    """Text-like, repetitive and incompressible stretches (the last make zlib emit stored blocks)."""
    parts, n = [], 0
    while n < size:
        m = rng.randint(500, 120_000)
        kind = rng.random()
        if kind < 0.25:
            part = rng.randbytes(m)
        elif kind < 0.6:
            part = bytes(rng.choice(b"abcdefgh") for _ in range(m // 16)) * 16
        else:
            part = b"".join(rng.choice([b"foo", b"barbaz", b"\0\0\0\0", b"qux\n", b"\x7fELF"]) for _ in range(m // 4))
        parts.append(part)
        n += len(part)
    return b"".join(parts)[:size]


def as_span(data: bytes) -> Span:
    """``data`` as a span of an anonymous in-memory file (the wheel code gives spans of the input)."""
    fd = os.memfd_create("raw")
    os.write(fd, data)
    return Span(fd, 0, len(data))


def joined(pieces: list) -> bytes:
    return b"".join(p.read(0, len(p)) if isinstance(p, Span) else bytes(p) for p in pieces)


def inflate(raw: Span, size: int) -> tuple[bytearray, list[zsplice.Boundary]]:
    out = bytearray()
    boundaries = zsplice.inflate_indexed(raw, size, out.extend, "m", "w.whl")
    assert boundaries is not None
    return out, boundaries


def splice(raw: bytes, blob: bytearray, edits: list[int], pool, min_copy: int, chunk: int):
    span = as_span(raw)
    original, boundaries = inflate(span, len(blob))
    for e in edits:
        original[e] ^= 0xA5
    assert original == blob
    segs = zsplice.segments(boundaries, span, len(blob), edits, min_copy=min_copy)
    return segs, zsplice.resolve(zsplice.assemble(span, blob, segs, pool.submit, chunk=chunk))


@pytest.mark.slow  # 24 seeds of large streams
@pytest.mark.parametrize("seed", range(24))
def test_spliced_stream_inflates_to_the_edited_bytes(seed: int, pool, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(zipfmt, "OUT_STEP", rng.choice([1, 4096, 1 << 20, 4 << 20]))  # output handed on in steps
    data = sample(rng, rng.choice([0, 1, 5000, 400_000, 1_500_000]))
    level = [0, 1, 6, 9][seed % 4]
    strategy = [zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY, zlib.Z_FIXED][(seed // 4) % 4]
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)
    raw = c.compress(data) + c.flush()
    edits = sorted(rng.sample(range(len(data)), min(len(data), rng.randint(0, 5))))
    blob = bytearray(data)
    for e in edits:
        blob[e] ^= 0xA5
    segs, pieces = splice(raw, blob, edits, pool, rng.choice([1, 4096, 65536]), rng.choice([4096, 1 << 20]))
    assert zlib.decompress(joined(pieces), -15) == bytes(blob)
    zsplice.check_stream(pieces, len(blob), zlib.crc32(blob), "m", "w.whl")
    covered = [(s.start, s.end) for s in segs]
    assert covered[0][0] == 0 and covered[-1][1] == len(blob)
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:])), "the stretches tile the member"
    for s in segs:
        if isinstance(s, zsplice.Copy):
            assert not any(s.start - zsplice.WINDOW <= e < s.end for e in edits), "no edit in a copy's reach"


def test_unaligned_copies_happen_and_are_exact(pool) -> None:
    """Over a few streams, copied stretches start at unaligned boundaries too (shifted into place)."""
    unaligned = 0
    for seed in range(6):
        rng = random.Random(100 + seed)
        data = sample(rng, 800_000)
        raw = zlib.compress(data, 6)[2:-4]  # the raw deflate stream inside the zlib wrapper
        edits = [300_000, 600_000]
        blob = bytearray(data)
        for e in edits:
            blob[e] ^= 0xA5
        segs, pieces = splice(raw, blob, edits, pool, 1, 1 << 20)
        unaligned += sum(isinstance(s, zsplice.Copy) and s.bit % 8 != 0 for s in segs)
        assert zlib.decompress(joined(pieces), -15) == bytes(blob)
    assert unaligned > 0


def test_a_wrong_splice_is_caught(pool) -> None:
    data = sample(random.Random(7), 600_000)
    raw = zlib.compress(data, 6)[2:-4]
    blob = bytearray(data)
    blob[1000] ^= 0xA5
    segs, pieces = splice(raw, blob, [1000], pool, 1, 1 << 20)
    assert any(isinstance(s, zsplice.Copy) for s in segs)
    with pytest.raises(VerifyError):
        zsplice.check_stream(pieces, len(blob), zlib.crc32(data), "m", "w.whl")  # the unpatched CRC
    broken = list(pieces)
    broken[-1] = joined(broken[-1:])[:-3]
    with pytest.raises(VerifyError):
        zsplice.check_stream(broken, len(blob), zlib.crc32(blob), "m", "w.whl")


@pytest.mark.parametrize("case", ["truncated", "garbage", "longer", "shorter"])
def test_inflate_indexed_refuses_bad_streams(case: str) -> None:
    data = os.urandom(50_000) + b"x" * 200_000
    raw = zlib.compress(data, 6)[2:-4]
    size = len(data)
    if case == "truncated":
        raw = raw[: len(raw) // 2]
    elif case == "garbage":
        raw = b"\xff" * 64 + raw
    elif case == "longer":
        size -= 1  # the stream holds one byte more than claimed
    else:
        size += 1
    with pytest.raises(ParseError):
        inflate(as_span(raw), size)


@pytest.mark.parametrize("out_step", [1, 7, 4096, 4 << 20])
@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_every_inflate_loop_drains_output_at_a_step_boundary(out_step: int, extra: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A member whose size is a whole number of output steps, or one byte off: zlib may hold output back when
    a step fills up with all input consumed. All three loops (the reader's, the block index and the check of
    the re-deflated stream) must drain it: 4 MiB + 1 zero bytes once failed the check."""
    monkeypatch.setattr(zipfmt, "OUT_STEP", out_step)
    size = (4 << 20 if out_step == 4 << 20 else out_step * 64) + extra
    data = bytes(size)
    raw = zlib.compress(data, 6)[2:-4]
    entry = zipfmt.Entry("m", b"m", 20, 20, 0, zipfmt.DEFLATED, 0, 0, zlib.crc32(data), len(raw), size, b"", b"",
                         0, 0, 0)
    pieces = list(zipfmt.inflate_chunks([raw], size, entry, "w.whl"))
    assert b"".join(pieces) == data and max(map(len, pieces)) <= out_step
    out, _ = inflate(as_span(raw), size)
    assert out == data
    zsplice.check_stream([raw], size, zlib.crc32(data), "m", "w.whl")
    with pytest.raises(VerifyError):
        zsplice.check_stream([raw], size - 1, zlib.crc32(data), "m", "w.whl")
    with pytest.raises(VerifyError):
        zsplice.check_stream([raw[:-2]], size, zlib.crc32(data), "m", "w.whl")
