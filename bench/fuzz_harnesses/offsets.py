"""The ``__consumer_offsets`` harnesses: ``offsets_segment`` and ``offsets_segment_latest`` (a segment in
history and latest mode) and ``offsets_records`` (keys and values a Kafka client fetched).
"""

from __future__ import annotations

import json

import pyarrow as pa

from audit.formats.segments import RAW_SCHEMA, decode_offsets_rows, decode_offsets_segment

from bench.fuzz_harnesses.common import KV_SCHEMA, SEGMENT_PATH, SHARED_DATA, check, check_raw, make_harness
from bench.fuzz_harnesses.encoding import join_kv_records, split_kv_records
from bench.fuzz_harnesses.mutators import (
    OFFSETS_MUTATOR,
    ByteMutate,
    kv_records_mutate,
    offsets_kv_mutator,
    simple_byte_mutate,
)
from bench.fuzz_harnesses.seeds import dedup, legacy_sets, offsets_segments, real_records


def offsets_segment(data: bytes) -> None:
    """A ``__consumer_offsets`` segment through ``decode_offsets_segment`` (``--mode history``): batches,
    records, keys and values of every record type and version, group metadata, control records.
    Documented exceptions: none."""
    check_raw(decode_offsets_segment(data, SEGMENT_PATH, 0), data, SEGMENT_PATH)


def offsets_segment_latest(data: bytes) -> None:
    """The same with ``reduce_latest=True``: the ``--mode latest`` reducer of ``latest.py``
    (``summarise_latest``, ``group_equal_bytes``) on the decoded records.  Every record the reducer
    folds away must still be counted: records read equal history mode's.  Documented exceptions: none."""

    def records_read(t: pa.Table) -> int:
        rows = t.filter(pa.compute.not_equal(t.column("kind"), "issue"))
        return int(pa.compute.sum(rows.column("record_count")).as_py() or 0)

    a = records_read(check_raw(decode_offsets_segment(data, SEGMENT_PATH, 0, reduce_latest=True), data, SEGMENT_PATH))
    b = records_read(pa.Table.from_batches(decode_offsets_segment(data, SEGMENT_PATH, 0), schema=RAW_SCHEMA))
    check(a == b, f"latest mode counts {a} records read, history mode {b}")


def offsets_records(data: bytes) -> None:
    """``__consumer_offsets`` keys and values (every record type, OffsetCommitValue v0-v4, group
    metadata v0-v4, tombstones) through ``decode_offsets_rows``, the decoder of the records a Kafka
    client fetched (and, inside it, ``decode_offsets_kv`` and the group-metadata decode); input laid
    out as :func:`split_kv_records` says.  Documented exceptions: none."""
    recs = split_kv_records(data)
    n = len(recs)
    rb = pa.RecordBatch.from_pydict(
        {
            "source_partition": [0] * n,
            "source_offset": list(range(n)),
            "timestamp": [0] * n,
            "key": [k for k, _ in recs],
            "value": [v for _, v in recs],
        },
        schema=KV_SCHEMA,
    )
    out = decode_offsets_rows(rb)
    check(out.schema.equals(RAW_SCHEMA) and out.num_rows == n, "decode_offsets_rows lost rows")


def kv_records_mutator(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate) -> bytes:
    """Custom mutator of ``offsets_records`` inputs (:func:`split_kv_records`): one record's key or value
    edited structurally, a record duplicated or dropped, or a value's bytes mutated."""
    return kv_records_mutate(offsets_kv_mutator, data, max_size, seed, byte_mutate)


def _kv_seeds() -> list[tuple[str, bytes]]:
    out = []
    vec = SHARED_DATA / "vectors/offset_commit_vectors.json"
    pairs = []
    if vec.exists():
        for v in json.loads(vec.read_text())["vectors"]:
            k = bytes.fromhex(v["key_hex"]) if v.get("key_hex") else None
            val = bytes.fromhex(v["value_hex"]) if v.get("value_hex") else None
            pairs.append((k, val))
    for i in range(0, len(pairs), 8):
        out.append((f"vectors-{i}", join_kv_records(pairs[i : i + 8])))
    real = [(k, v) for k, v, _a in real_records("offsets", 400)]
    for i in range(0, len(real), 16):
        out.append((f"real-{i}", join_kv_records(real[i : i + 16])))
    return dedup(out)


OFFSETS_SEGMENT = make_harness(
    "offsets_segment", offsets_segment, lambda: offsets_segments(48 << 10) + legacy_sets(), OFFSETS_MUTATOR
)
OFFSETS_SEGMENT_LATEST = make_harness(
    "offsets_segment_latest",
    offsets_segment_latest,
    lambda: offsets_segments(48 << 10) + legacy_sets()[:8],
    OFFSETS_MUTATOR,
)
OFFSETS_RECORDS = make_harness("offsets_records", offsets_records, _kv_seeds, kv_records_mutator)
