"""Seed inputs built from the real Kafka bytes under :data:`~bench.fuzz_harnesses.common.SHARED_DATA` and the
repository's recorded lab data: segments cut to their leading whole batches, distinct real records, legacy
message sets, and the helpers that name and de-duplicate seeds.
"""

from __future__ import annotations

import struct
from pathlib import Path

from audit.formats.record_batch import BATCH_HEADER_SIZE, extract_records, scan_batches

from bench.fuzz_harnesses.common import REPO, SHARED_DATA
from bench.fuzz_harnesses.encoding import legacy_message, split_chain


def data_files(pattern: str) -> list[Path]:
    roots = [SHARED_DATA, REPO / "tests/data"]
    out = []
    for root in roots:
        out.extend(sorted(p for p in root.glob(pattern) if p.is_file()))
    return out


def trim(buf: bytes, limit: int) -> bytes:
    """The leading whole batches of a segment, at most ``limit`` bytes (at least one batch)."""
    entries, _ = split_chain(buf)
    out = bytearray()
    for e in entries:
        if out and len(out) + len(e) > limit:
            break
        out += e
    return bytes(out) if out else buf[:limit]


def dedup(seeds: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    seen, out = set(), []
    for name, b in seeds:
        if b not in seen:
            seen.add(b)
            out.append((name, b))
    return out


def seed_name(p: Path) -> str:
    for root in (SHARED_DATA, REPO):
        try:
            return str(p.relative_to(root)).replace("/", "__")
        except ValueError:
            pass
    return p.name


def offsets_segments(limit: int) -> list[tuple[str, bytes]]:
    return dedup(
        [
            (seed_name(p), trim(p.read_bytes(), limit))
            for p in data_files("**/__consumer_offsets-*/*.log")
            if p.stat().st_size
        ]
    )


def metadata_segments(limit: int) -> list[tuple[str, bytes]]:
    return dedup(
        [
            (seed_name(p), trim(p.read_bytes(), limit))
            for p in data_files("**/__cluster_metadata-*/*.log")
            if p.stat().st_size
        ]
    )


def user_segments(limit: int) -> list[tuple[str, bytes]]:
    return dedup(
        [
            (seed_name(p), trim(p.read_bytes(), limit))
            for p in data_files("**/*-[0-9]*/*.log")
            if p.stat().st_size and "__" not in p.parent.name
        ]
    )


def real_records(
    kind: str = "offsets", limit: int = 400, per_kind: int = 40
) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, batch attributes) of distinct real records, at most ``per_kind`` per (key type,
    value version) so rare record types are not crowded out."""
    segs = offsets_segments(1 << 30) if kind == "offsets" else metadata_segments(1 << 30)
    out, seen, kinds = [], set(), {}
    for _name, buf in segs:
        scan = scan_batches(buf)
        recs = extract_records(buf, scan)
        d = recs.data
        for j in range(len(recs)):
            ks, kl, vs, vl = (
                int(recs.key_start[j]),
                int(recs.key_len[j]),
                int(recs.value_start[j]),
                int(recs.value_len[j]),
            )
            k = None if kl < 0 else d[ks : ks + kl].tobytes()
            v = None if vl < 0 else d[vs : vs + vl].tobytes()
            sig = (k[:2] if k else None, v[:3] if v else None)
            if (k, v) in seen or kinds.get(sig, 0) >= per_kind:
                continue
            seen.add((k, v))
            kinds[sig] = kinds.get(sig, 0) + 1
            out.append((k, v, int(scan.attributes[recs.batch[j]])))
            if len(out) >= limit:
                return out
    return out


def v2_payloads(limit: int = 24) -> list[tuple[bytes, int]]:
    """(uncompressed records block, record count) of real __consumer_offsets batches."""
    out = []
    for _name, buf in offsets_segments(1 << 30):
        for e in split_chain(buf)[0][:4]:
            if e[16] == 2 and len(e) > BATCH_HEADER_SIZE and not e[22] & 0x27:  # uncompressed, not control
                out.append((bytes(e[BATCH_HEADER_SIZE:]), struct.unpack_from(">i", e, 57)[0]))
            if len(out) >= limit:
                return out
    return out


def legacy_sets() -> list[tuple[str, bytes]]:
    """Legacy message sets (magic 0 and 1, uncompressed and gzip/snappy/lz4 wrappers) holding real
    ``__consumer_offsets`` keys and values, with the offsets a broker assigns."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    recs = [(k, v) for k, v, _a in real_records("offsets", 60) if k is not None][:40]
    out = []
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            for start in (0, 20):
                chunk = recs[start : start + 6]
                if not chunk:
                    continue
                base = 100 + start
                if codec == 0:
                    seg = b"".join(legacy_message(magic, 0, base + i, k, v) for i, (k, v) in enumerate(chunk))
                else:
                    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
                    for i, (k, v) in enumerate(chunk):
                        b.append(i if magic == 1 else base + i, timestamp=1_600_000_000_000 + i, key=k, value=v)
                    raw = bytearray(b.build())
                    raw[0:8] = struct.pack(">q", base + len(chunk) - 1)
                    seg = bytes(raw)
                out.append((f"legacy-magic{magic}-codec{codec}-{start}", seg))
    return out
