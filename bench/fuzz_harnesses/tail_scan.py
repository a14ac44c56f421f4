"""The log-end-offset tail scan harnesses: ``tail_scan`` (no ``.index``), ``tail_scan_index`` (a fuzzed
``.index`` and segment together) and ``index_file`` (a fuzzed ``.index`` beside a real segment), with the
index-aware mutators and their seeds.
"""

from __future__ import annotations

import random
import struct

import pyarrow as pa

from audit.formats.record_batch import index_start, scan_tail

from bench.fuzz_harnesses.common import (
    INDEX_SEGMENT,
    SEGMENT_PATH,
    SHARED_DATA,
    check,
    check_scan,
    make_harness,
    small_files,
)
from bench.fuzz_harnesses.encoding import split_chain, wrap
from bench.fuzz_harnesses.mutators import (
    OFFSETS_MUTATOR,
    ByteMutate,
    extreme,
    mutate_chain,
    offsets_kv_mutator,
    seeded_rng,
    simple_byte_mutate,
)
from bench.fuzz_harnesses.seeds import data_files, dedup, legacy_sets, offsets_segments, seed_name, user_segments


def tail_scan(data: bytes) -> None:
    """The log-end-offset tail scan without an ``.index`` (``scan_tail(buf)``, which scans the whole
    segment) and ``read_small_files`` on the segment (its ``tail`` row carries the same end offset).
    Documented exceptions: none."""
    scan = scan_tail(data)
    check_scan(scan, data)
    table = small_files(SEGMENT_PATH, data)
    tails = table.filter(pa.compute.equal(table.column("file_kind"), "tail")).column("value").to_pylist()
    check(bool(tails) and set(tails) == {scan.end_offset}, f"tail rows say {set(tails)}, scan_tail {scan.end_offset}")
    for row in table.to_pylist():
        if row["issue_reason"] is not None:
            check(
                row["issue_position"] is not None and 0 <= row["issue_position"] <= len(data),
                "a tail issue row without a byte position inside the file",
            )


def split_index_container(data: bytes) -> tuple[bytes, int, bytes]:
    """``tail_scan_index`` input layout: uint32 index length, uint64 segment base offset (as a segment
    file name gives it, up to 20 digits), the ``.index`` bytes, then the ``.log`` bytes."""
    if len(data) < 12:
        return b"", 0, data
    ilen, base = struct.unpack_from(">IQ", data, 0)
    ilen = min(ilen, len(data) - 12)
    return data[12 : 12 + ilen], base, data[12 + ilen :]


def join_index_container(index: bytes, base: int, segment: bytes) -> bytes:
    """Inverse of :func:`split_index_container`."""
    return struct.pack(">IQ", len(index), base & ((1 << 64) - 1)) + index + segment


def tail_scan_index(data: bytes) -> None:
    """The tail scan with an ``.index``: ``index_start`` (binary search of the index, checks of the
    entry against the segment) and ``scan_tail(log, index, segment_base)``; input laid out as
    :func:`split_index_container` says.  Documented exceptions: none."""
    index, base, seg = split_index_container(data)
    start = index_start(seg, index or None, base)
    check(0 <= start <= len(seg), f"index_start {start} outside the segment")
    scan = scan_tail(seg, index or None, base)
    check_scan(scan, seg)


_INDEX_SEG: tuple[bytes, int] | None = None


def index_segment() -> tuple[bytes, int]:
    """(bytes, base offset) of the real segment :data:`INDEX_SEGMENT` the ``index_file`` harness uses."""
    global _INDEX_SEG
    if _INDEX_SEG is None:
        path = SHARED_DATA / (INDEX_SEGMENT + ".log")
        _INDEX_SEG = (path.read_bytes(), int(path.name[:20]))
    return _INDEX_SEG


def index_file(data: bytes) -> None:
    """A fuzzed ``.index`` file next to a real segment (:data:`INDEX_SEGMENT`): ``index_start`` and
    ``scan_tail``.  Documented exceptions: none."""
    seg, base = index_segment()
    start = index_start(seg, data or None, base)
    check(0 <= start <= len(seg), f"index_start {start} outside the segment")
    check_scan(scan_tail(seg, data or None, base), seg)


def index_container_mutator(
    data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate
) -> bytes:
    """Custom mutator of ``tail_scan_index`` inputs: the index (:func:`mutate_index`), the segment base
    offset or the segment (:func:`mutate_chain`), keeping :func:`split_index_container`'s layout."""
    rng = seeded_rng(seed)
    index, base, seg = split_index_container(data)
    r = rng.random()
    if r < 0.45:
        index = mutate_index(rng, index, seg, byte_mutate)
    elif r < 0.55:
        base = rng.choice((0, 1, base + 1, base - 1, (1 << 63) - 1, (1 << 64) - 1, 10**19, extreme(rng, 64)))
    elif r < 0.95:
        seg = mutate_chain(rng, seg, offsets_kv_mutator, byte_mutate, max(max_size - len(index) - 12, 0))
    else:
        return byte_mutate(data, max_size)
    return join_index_container(index, base, seg)[:max_size]


def mutate_index(rng: random.Random, index: bytes, seg: bytes, byte_mutate: ByteMutate) -> bytes:
    """An offset index (8-byte entries: int32 relative offset, int32 position) with one edit: an entry
    pointing at a real batch or anywhere, relative offsets at extremes, preallocated zeros, a torn entry."""
    n = len(index) // 8
    b = bytearray(index)
    op = rng.randrange(8)
    if op <= 1:  # an entry pointing at a real batch (or just beside it) of the segment
        entries, _ = split_chain(seg)
        pos, positions = 0, []
        for e in entries:
            positions.append((pos, struct.unpack_from(">q", e, 0)[0]))
            pos += len(e)
        if positions:
            p, off = rng.choice(positions)
            p += rng.choice((0, 0, 0, 1, -1, 12, 61))
            rel = off + rng.choice((0, 0, 1, -1, 1000))
            entry = struct.pack(">ii", wrap(rel, 32), wrap(p, 32))
            if n and rng.random() < 0.5:
                k = rng.randrange(n)
                b[8 * k : 8 * k + 8] = entry
            else:
                b += entry
    elif op == 2 and n:
        k = rng.randrange(n)
        b[8 * k : 8 * k + 4] = struct.pack(">i", extreme(rng, 32))
    elif op == 3 and n:
        k = rng.randrange(n)
        b[8 * k + 4 : 8 * k + 8] = struct.pack(">i", extreme(rng, 32))
    elif op == 4:  # preallocated zero tail, or a lot of entries
        b += bytes(8 * rng.choice((1, 16, 1024, 100000)))
    elif op == 5:  # a torn last entry
        b += bytes(rng.randrange(1, 8))
    elif op == 6 and n > 1:
        k, j = rng.randrange(n), rng.randrange(n)
        b[8 * k : 8 * k + 8], b[8 * j : 8 * j + 8] = b[8 * j : 8 * j + 8], b[8 * k : 8 * k + 8]
    else:
        return byte_mutate(bytes(b), len(b) + 32)
    return bytes(b)


def index_mutator(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate) -> bytes:
    """Custom mutator of ``index_file`` inputs: :func:`mutate_index` against :func:`index_segment`."""
    rng = seeded_rng(seed)
    if rng.random() < 0.15:
        return byte_mutate(data, max_size)
    return mutate_index(rng, data, index_segment()[0], byte_mutate)[:max_size]


def _index_pairs() -> list[tuple[str, bytes]]:
    out = []
    for idx in data_files("**/*.index"):
        log = idx.with_suffix(".log")
        if idx.stat().st_size and log.exists() and log.stat().st_size <= 200_000:
            out.append((seed_name(idx), join_index_container(idx.read_bytes(), int(idx.name[:20]), log.read_bytes())))
    return dedup(out)


def _index_seeds() -> list[tuple[str, bytes]]:
    idx = SHARED_DATA / (INDEX_SEGMENT + ".index")
    out = [("real", idx.read_bytes()), ("empty-entry", b"")]
    seg, base = index_segment()
    entries, _ = split_chain(seg)
    pos, synth = 0, bytearray()
    for e in entries:
        synth += struct.pack(">ii", struct.unpack_from(">q", e, 0)[0] + struct.unpack_from(">i", e, 23)[0] - base, pos)
        pos += len(e)
    out.append(("every-batch", bytes(synth[8:])))
    out.append(("preallocated", bytes(out[0][1]) + bytes(4096)))
    return [(n, b) for n, b in out if b]


TAIL_SCAN = make_harness(
    "tail_scan",
    tail_scan,
    lambda: offsets_segments(48 << 10) + user_segments(16 << 10) + legacy_sets()[:8],
    OFFSETS_MUTATOR,
)
TAIL_SCAN_INDEX = make_harness("tail_scan_index", tail_scan_index, _index_pairs, index_container_mutator)
INDEX_FILE = make_harness("index_file", index_file, _index_seeds, index_mutator)
