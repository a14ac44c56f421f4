"""The ``record_batches_v2`` and ``record_batches_legacy`` harnesses: v2 and legacy record batches
through ``scan_batches``, ``extract_records`` and ``control_types``.
"""

from __future__ import annotations


from audit.formats.record_batch import BatchScan, RecordTable, control_types, extract_records, scan_batches

from bench.fuzz_harnesses.common import check, check_scan, make_harness
from bench.fuzz_harnesses.mutators import OFFSETS_MUTATOR
from bench.fuzz_harnesses.seeds import legacy_sets, metadata_segments, offsets_segments, user_segments


def _check_records(recs: RecordTable, scan: BatchScan, n: int) -> None:
    m = len(recs.batch)
    for name in ("offset", "timestamp", "key_start", "key_len", "value_start", "value_len"):
        check(len(getattr(recs, name)) == m, f"RecordTable.{name} length differs")
    if m:
        check(int(recs.batch.min()) >= 0 and int(recs.batch.max()) < len(scan.position), "record of no batch")
        d = len(recs.data)
        ks, kl, vs, vl = recs.key_start, recs.key_len, recs.value_start, recs.value_len
        check(bool(((kl < 0) | ((ks >= 0) & (ks + kl <= d))).all()), "a key outside the data buffer")
        check(bool(((vl < 0) | ((vs >= 0) & (vs + vl <= d))).all()), "a value outside the data buffer")
    for iss in recs.issues:
        check(0 <= iss.position <= n, f"record issue {iss.reason} at byte {iss.position}, outside 0..{n}")


def record_batches(data: bytes) -> None:
    """Record batches, v2 and legacy magic 0/1: ``scan_batches`` (CRC checked, as the audit reads
    ``__consumer_offsets`` and ``__cluster_metadata`` segments), ``extract_records`` (decompression,
    record framing, legacy message sets through kafka-python), ``control_types`` and ``end_offset``.
    Documented exceptions: none."""
    scan = scan_batches(data)
    check_scan(scan, data)
    recs = extract_records(data, scan)
    _check_records(recs, scan, len(data))
    control_types(recs)


RECORD_BATCHES_V2 = make_harness(
    "record_batches_v2",
    record_batches,
    lambda: offsets_segments(48 << 10) + metadata_segments(48 << 10) + user_segments(16 << 10),
    OFFSETS_MUTATOR,
)
RECORD_BATCHES_LEGACY = make_harness("record_batches_legacy", record_batches, legacy_sets, OFFSETS_MUTATOR)
