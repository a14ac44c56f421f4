"""Fuzz harnesses for every byte-level decoder of kafka-offset-audit.

Each harness is a function ``harness(data: bytes) -> None`` that feeds ``data`` to the project's real
decoder the way the audit feeds it, and checks the decoder's documented contract.  A harness raises
only when the decoder breaks that contract: an exception other than the one the entry point documents
(``CheckpointError`` for the checkpoint parsers, ``MetadataDecodeError`` for a metadata record value,
``ValueError`` for a group-metadata value), or a result the contract rules out
(:class:`HarnessViolation`: an issue row without its file or byte position, a value that does not fit
the Arrow column the audit writes it to, ...).  The decoders that report bad input as issue rows
(segments, tails, ``read_small_files``) document no exception at all.

:data:`HARNESSES` maps each harness name to a :class:`Harness`: the function, how its input is laid
out, the seeds built from real Kafka bytes (:func:`build_seeds`), and a structure-aware mutator
(``mutate(data, max_size, seed, byte_mutate)``; ``byte_mutate`` is libFuzzer's own mutator under
atheris, see :mod:`bench.fuzz`).  The mutators keep corruption *inside* the framing the decoders
check first: after editing a v2 batch they recompute its CRC-32C (and a legacy message's CRC-32),
they decompress a compressed records block, edit the records and compress it again, and they push
length and count fields to extremes (0, -1, 2^31-1, 2^63-1, 5- and 10-byte varints).

Nothing here needs atheris: the regression test (``tests/test_fuzz_regressions.py``) replays saved
inputs through these functions directly.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

from audit.formats.checkpoints import (
    CheckpointError,
    broker_id_of,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
)
from audit.formats.metadata_log import METADATA_ROW_FIELDS, MetadataDecodeError, decode_metadata_value
from audit.formats.offsets import (
    AssignmentLimitError,
    decode_consumer_assignment,
    decode_consumer_group_assignment_value,
    decode_consumer_group_member_value,
    decode_group_metadata_value,
    decode_member_key,
    decode_share_group_assignment_value,
    decode_share_group_member_value,
    decode_streams_group_assignment_value,
    decode_streams_group_member_value,
    decode_streams_group_topology_value,
)
from audit.formats.record_batch import (
    BATCH_HEADER_SIZE,
    INT64_MAX,
    LOG_OVERHEAD,
    BatchScan,
    RecordTable,
    control_types,
    decompress,
    extract_records,
    index_start,
    scan_batches,
    scan_tail,
)
from audit.formats.segments import (
    MAX_OWNER_ENTRIES,
    OWNERS_TYPE,
    RAW_SCHEMA,
    decode_offsets_rows,
    decode_offsets_segment,
)
from audit.formats.share_state import (
    KV_FIELDS,
    SHARE_RAW_SCHEMA,
    STATE_BATCHES,
    decode_share_state_key,
    decode_share_state_kv,
    decode_share_state_rows,
    decode_share_state_segment,
    decode_share_state_value,
)

REPO = Path(__file__).resolve().parents[1]
#: The read-only sample Kafka bytes (``KOA_SHARED_DIR`` overrides the ``../shared`` beside the checkout).
SHARED_DATA = Path(os.environ.get("KOA_SHARED_DIR", REPO.parent / "shared")) / "data"
#: Committed seeds (small) and regression inputs, one directory per harness.
SEED_DIR = REPO / "tests/data/fuzz-seeds"
REGRESSION_DIR = REPO / "tests/data/fuzz-regressions"

#: The path the offsets harnesses report their input under (issue rows must carry it).
SEGMENT_PATH = "/fuzz/broker-1/__consumer_offsets-0/00000000000000000000.log"
METADATA_PATH = "/fuzz/broker-1/__cluster_metadata-0/00000000000000000000.log"
#: The real segment (and its ``.index``) the ``index_file`` harness reads with a fuzzed index.
INDEX_SEGMENT = "real/kraft-4.x/kafka-logs/__consumer_offsets-15/00000000000000000000"

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_V2_FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)
_V2_FMT = "qiibIhiqqqhii"


class HarnessViolation(AssertionError):
    """A decoder returned normally but broke its documented contract (the message says how)."""


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise HarnessViolation(what)


# =========================================================================== harnesses


def _check_scan(scan: BatchScan, data: bytes, start: int = 0) -> None:
    n = len(data)
    k = len(scan.position)
    for name in (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "record_count",
        "crc_ok",
        "magic",
    ):
        _check(len(getattr(scan, name)) == k, f"BatchScan.{name} has {len(getattr(scan, name))} rows, not {k}")
    pos = scan.position.tolist()
    _check(all(start <= p < n for p in pos), "a batch position outside the bytes read")
    _check(all(a < b for a, b in zip(pos, pos[1:])), "batch positions not increasing")
    _check(0 <= scan.bytes_read <= n, f"bytes_read {scan.bytes_read} outside 0..{n}")
    for iss in scan.issues:
        _check(isinstance(iss.reason, str) and iss.reason, "an issue without a reason")
        _check(0 <= iss.position <= n, f"issue {iss.reason} at byte {iss.position}, outside 0..{n}")
    e = scan.end_offset
    _check(-INT64_MAX - 1 <= e <= INT64_MAX, f"end offset {e} does not fit an int64")


def _check_records(recs: RecordTable, scan: BatchScan, n: int) -> None:
    m = len(recs.batch)
    for name in ("offset", "timestamp", "key_start", "key_len", "value_start", "value_len"):
        _check(len(getattr(recs, name)) == m, f"RecordTable.{name} length differs")
    if m:
        _check(int(recs.batch.min()) >= 0 and int(recs.batch.max()) < len(scan.position), "record of no batch")
        d = len(recs.data)
        ks, kl, vs, vl = recs.key_start, recs.key_len, recs.value_start, recs.value_len
        _check(bool(((kl < 0) | ((ks >= 0) & (ks + kl <= d))).all()), "a key outside the data buffer")
        _check(bool(((vl < 0) | ((vs >= 0) & (vs + vl <= d))).all()), "a value outside the data buffer")
    for iss in recs.issues:
        _check(0 <= iss.position <= n, f"record issue {iss.reason} at byte {iss.position}, outside 0..{n}")


def record_batches(data: bytes) -> None:
    """Record batches, v2 and legacy magic 0/1: ``scan_batches`` (CRC checked, as the audit reads
    ``__consumer_offsets`` and ``__cluster_metadata`` segments), ``extract_records`` (decompression,
    record framing, legacy message sets through kafka-python), ``control_types`` and ``end_offset``.
    Documented exceptions: none."""
    scan = scan_batches(data)
    _check_scan(scan, data)
    recs = extract_records(data, scan)
    _check_records(recs, scan, len(data))
    control_types(recs)


def _small_files(path: str, data: bytes) -> pa.Table:
    """``audit.sources.logdirs.read_small_files`` on one file, fed as Spark's ``binaryFile`` feeds it."""
    from audit.sources.logdirs import SMALL_SCHEMA, read_small_files

    rb = pa.RecordBatch.from_pydict(
        {"path": [path], "content": [data]}, schema=pa.schema([("path", pa.string()), ("content", pa.binary())])
    )
    out = list(read_small_files(iter([rb])))
    table = pa.Table.from_batches(out, schema=SMALL_SCHEMA)
    issues = table.filter(pa.compute.is_valid(table.column("issue_reason"))).to_pylist()
    for row in issues:
        _check(row["path"] == path, "a small-file issue row without its file")
    return table


def tail_scan(data: bytes) -> None:
    """The log-end-offset tail scan without an ``.index`` (``scan_tail(buf)``, which scans the whole
    segment) and ``read_small_files`` on the segment (its ``tail`` row carries the same end offset).
    Documented exceptions: none."""
    scan = scan_tail(data)
    _check_scan(scan, data)
    table = _small_files(SEGMENT_PATH, data)
    tails = table.filter(pa.compute.equal(table.column("file_kind"), "tail")).column("value").to_pylist()
    _check(bool(tails) and set(tails) == {scan.end_offset}, f"tail rows say {set(tails)}, scan_tail {scan.end_offset}")
    for row in table.to_pylist():
        if row["issue_reason"] is not None:
            _check(
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
    _check(0 <= start <= len(seg), f"index_start {start} outside the segment")
    scan = scan_tail(seg, index or None, base)
    _check_scan(scan, seg)


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
    _check(0 <= start <= len(seg), f"index_start {start} outside the segment")
    _check_scan(scan_tail(seg, data or None, base), seg)


def _check_raw(batches: list, data: bytes, path: str) -> pa.Table:
    for b in batches:
        _check(b.schema.equals(RAW_SCHEMA), "a decoded batch not in RAW_SCHEMA")
    table = pa.Table.from_batches(batches, schema=RAW_SCHEMA)
    issues = table.filter(pa.compute.equal(table.column("kind"), "issue"))
    for row in issues.select(["source_file", "position", "decode_error"]).to_pylist():
        _check(row["source_file"] == path, "an issue row without its file")
        _check(
            row["position"] is not None and 0 <= row["position"] <= len(data),
            f"issue {row['decode_error']} without a byte position inside the file: {row['position']}",
        )
        _check(bool(row["decode_error"]), "an issue row without a reason")
    return table


def offsets_segment(data: bytes) -> None:
    """A ``__consumer_offsets`` segment through ``decode_offsets_segment`` (``--mode history``): batches,
    records, keys and values of every record type and version, group metadata, control records.
    Documented exceptions: none."""
    _check_raw(decode_offsets_segment(data, SEGMENT_PATH, 0), data, SEGMENT_PATH)


def offsets_segment_latest(data: bytes) -> None:
    """The same with ``reduce_latest=True``: the ``--mode latest`` reducer of ``latest.py``
    (``summarise_latest``, ``group_equal_bytes``) on the decoded records.  Every record the reducer
    folds away must still be counted: records read equal history mode's.  Documented exceptions: none."""

    def records_read(t: pa.Table) -> int:
        rows = t.filter(pa.compute.not_equal(t.column("kind"), "issue"))
        return int(pa.compute.sum(rows.column("record_count")).as_py() or 0)

    a = records_read(_check_raw(decode_offsets_segment(data, SEGMENT_PATH, 0, reduce_latest=True), data, SEGMENT_PATH))
    b = records_read(pa.Table.from_batches(decode_offsets_segment(data, SEGMENT_PATH, 0), schema=RAW_SCHEMA))
    _check(a == b, f"latest mode counts {a} records read, history mode {b}")


def split_codec_container(data: bytes) -> tuple[int, int, bytes]:
    """Codec harness input layout: byte 0 picks the container (``% 3``: 0 a v2 batch, 1 a magic-1
    wrapper message, 2 a magic-0 one), bytes 1-4 the int32 record count (v2) , then the compressed
    records block."""
    if len(data) < 5:
        return 0, 0, data
    return data[0] % 3, struct.unpack_from(">i", data, 1)[0], data[5:]


def join_codec_container(container: int, count: int, payload: bytes) -> bytes:
    """Inverse of :func:`split_codec_container`."""
    return bytes([container]) + struct.pack(">i", _wrap(count, 32)) + payload


def v2_batch(
    payload: bytes,
    count: int,
    codec: int,
    base_offset: int = 0,
    last_delta: int | None = None,
    attributes: int | None = None,
    epoch: int = 0,
) -> bytes:
    """One CRC-valid v2 batch around ``payload`` (its records block as stored)."""
    if last_delta is None:
        last_delta = max(min(count, 1 << 31) - 1, 0)
    attrs = codec if attributes is None else attributes
    body = (
        struct.pack(
            ">hiqqqhii",
            _wrap(attrs, 16),
            _wrap(last_delta, 32),
            1_700_000_000_000,
            1_700_000_000_000,
            -1,
            -1,
            -1,
            _wrap(count, 32),
        )
        + payload
    )
    head = struct.pack(">qiib", _wrap(base_offset, 64), len(body) + 9, _wrap(epoch, 32), 2)
    return head + struct.pack(">I", crc32c(body)) + body


def legacy_message(
    magic: int, attrs: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int = 1_600_000_000_000
) -> bytes:
    """One CRC-valid legacy message (``LegacyRecord``), with its offset and size prefix."""
    body = bytes([magic, attrs & 0xFF]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for b in (key, value):
        body += struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", _wrap(offset, 64), len(msg)) + msg


def codec_segment(codec: int, data: bytes) -> bytes:
    """The segment a codec harness decodes: the input's compressed block in a v2 batch or a legacy
    wrapper message with the codec's attribute bits and a valid CRC (see :func:`split_codec_container`)."""
    container, count, payload = split_codec_container(data)
    if container == 0:
        return v2_batch(payload, count, codec)
    magic = 2 - container
    return legacy_message(magic, codec, max(count - 1, 0), None, payload)


def _codec(codec: int) -> Callable[[bytes], None]:
    def harness(data: bytes) -> None:
        seg = codec_segment(codec, data)
        _check_raw(decode_offsets_segment(seg, SEGMENT_PATH, 0), seg, SEGMENT_PATH)

    harness.__name__ = f"codec_{_CODEC_NAMES[codec]}"
    harness.__doc__ = (
        f"A {_CODEC_NAMES[codec]} records block (v2 batch or legacy wrapper, "
        f":func:`split_codec_container`) decoded in full by ``decode_offsets_segment``: "
        f"bounded decompression, then record framing and key/value decoding.  "
        f"Documented exceptions: none."
    )
    return harness


_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def split_kv_records(data: bytes) -> list[tuple[bytes | None, bytes | None]]:
    """``offsets_records`` input layout: repeated ``int32 key length, key, int32 value length, value``
    (length -1 = null; a length past the end takes what is left)."""
    out = []
    pos, n = 0, len(data)
    while pos < n and len(out) < 4096:
        parts = []
        for _ in range(2):
            if pos + 4 > n:
                ln, pos = -1, n
            else:
                ln = struct.unpack_from(">i", data, pos)[0]
                pos += 4
            if ln < 0:
                parts.append(None)
            else:
                parts.append(data[pos : pos + ln])
                pos += ln
        out.append((parts[0], parts[1]))
    return out


def join_kv_records(records: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """Inverse of :func:`split_kv_records`."""
    out = bytearray()
    for k, v in records:
        for b in (k, v):
            out += struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    return bytes(out)


_KV_SCHEMA = pa.schema(
    [
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
    ]
)


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
        schema=_KV_SCHEMA,
    )
    out = decode_offsets_rows(rb)
    _check(out.schema.equals(RAW_SCHEMA) and out.num_rows == n, "decode_offsets_rows lost rows")


def group_metadata_value(data: bytes) -> None:
    """One GroupMetadataValue through ``decode_group_metadata_value`` (members and their consumer protocol
    assignments, which must fit the ``group_owners`` Arrow column), and the same bytes through
    ``decode_consumer_assignment`` and the KIP-848 member decoders (``decode_member_key``,
    ``decode_consumer_group_member_value``, ``decode_consumer_group_assignment_value``).  Documented exception:
    ``ValueError`` (truncated bytes, unknown version)."""
    for fn in (decode_consumer_assignment, decode_consumer_group_member_value, decode_consumer_group_assignment_value):
        try:
            fn(data)
        except ValueError:
            pass
    member = decode_member_key(data)
    _check(member is None or isinstance(member, str), "a member id that is not a string")
    try:
        g = decode_group_metadata_value(data)
    except ValueError:
        return
    _check(-(1 << 31) <= g["generation"] < 1 << 31, "generation outside int32")
    _check(g["members"] >= 0, "negative member count")
    _check(g["members"] == len(g["member_list"]), "member count differs from the members decoded")
    owners = [
        {
            "member_id": m["member_id"],
            "group_instance_id": m["group_instance_id"],
            "client_id": m["client_id"],
            "client_host": m["client_host"],
            "topic": t,
            "partitions": p.tolist(),
        }
        for m in g["member_list"]
        for t, p in (m["assignment"] or ())
    ]
    _check(all(len(o["partitions"]) > 0 for o in owners), "an owner entry without partitions")
    try:
        pa.array([owners], OWNERS_TYPE)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise HarnessViolation(f"owners do not fit group_owners: {exc}") from exc


_META_SCHEMA = pa.schema(METADATA_ROW_FIELDS)


def metadata_value(data: bytes) -> None:
    """One KRaft metadata record value through ``decode_metadata_value``; a decoded row must fit the
    Arrow columns the audit puts it in (``METADATA_ROW_FIELDS``).  Documented exception:
    ``MetadataDecodeError``."""
    try:
        row = decode_metadata_value(data)
    except MetadataDecodeError:
        return
    _check(set(row) == set(_META_SCHEMA.names), "a metadata row with other keys than METADATA_ROW_FIELDS")
    try:
        pa.RecordBatch.from_pylist([row], schema=_META_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise HarnessViolation(f"decoded metadata row does not fit its Arrow columns: {exc}") from None


def metadata_segment(data: bytes) -> None:
    """A ``__cluster_metadata`` segment through ``audit.sources.logdirs.decode_metadata_files`` as
    Spark feeds it (``binaryFile`` content): batches, records and every metadata record value.
    Documented exceptions: none."""
    from audit.sources.logdirs import decode_metadata_files, metadata_schema

    rb = pa.RecordBatch.from_pydict(
        {"path": [METADATA_PATH], "content": [data]},
        schema=pa.schema([("path", pa.string()), ("content", pa.binary())]),
    )
    table = pa.Table.from_batches(list(decode_metadata_files(iter([rb]))), schema=metadata_schema())
    for row in (
        table.filter(pa.compute.is_valid(table.column("issue_reason")))
        .select(["source_file", "issue_position"])
        .to_pylist()
    ):
        _check(row["source_file"] == METADATA_PATH, "a metadata issue row without its file")
        _check(
            row["issue_position"] is not None and 0 <= row["issue_position"] <= len(data),
            "a metadata issue row without a byte position inside the file",
        )


def leader_epoch_checkpoint(data: bytes) -> None:
    """A ``leader-epoch-checkpoint`` file: ``parse_leader_epoch_checkpoint`` (documented exception:
    ``CheckpointError``) and ``read_small_files`` on the file (documented exceptions: none)."""
    text = data.decode("utf-8", "replace")
    try:
        entries = parse_leader_epoch_checkpoint(text)
    except CheckpointError:
        entries = None
    if entries is not None:
        for e, s in entries:
            _check(-(1 << 31) <= e < 1 << 31 and -(1 << 63) <= s < 1 << 63, "entry outside its Java type")
    _small_files("/fuzz/broker-1/__consumer_offsets-0/leader-epoch-checkpoint", data)


def offset_checkpoint(data: bytes) -> None:
    """A root offset checkpoint (``replication-offset-checkpoint``, ``log-start-offset-checkpoint``,
    ...): ``parse_offset_checkpoint`` (documented exception: ``CheckpointError``) and
    ``read_small_files`` on the file (documented exceptions: none)."""
    text = data.decode("utf-8", "replace")
    try:
        entries = parse_offset_checkpoint(text)
    except CheckpointError:
        entries = None
    if entries is not None:
        for (_t, p), o in entries.items():
            _check(-(1 << 31) <= p < 1 << 31 and -(1 << 63) <= o < 1 << 63, "entry outside its Java type")
    _small_files("/fuzz/broker-1/replication-offset-checkpoint", data)


def meta_properties(data: bytes) -> None:
    """``meta.properties`` as discovery reads it (bytes decoded as UTF-8 with replacement):
    ``parse_meta_properties`` and ``broker_id_of``, whose broker id the audit stores in ``int``
    columns, so it must be None or fit an int32.  Documented exceptions: none."""
    props = parse_meta_properties(data.decode("utf-8", "replace"))
    bid = broker_id_of(props)
    _check(bid is None or -(1 << 31) <= bid < 1 << 31, f"broker id {bid} does not fit the int broker_id column")


# ---- share groups (KIP-932): __share_group_state

#: The path and partition the ``share_state_segment`` harness reports its input under.
SHARE_SEGMENT_PATH = "/fuzz/broker-1/__share_group_state-7/00000000000000000000.log"
SHARE_PARTITION = 7
_SHARE_KV_SCHEMA = pa.schema(list(KV_FIELDS.items()))
STATE_BATCH_NAMES = ("first_offset", "last_offset", "delivery_state", "delivery_count")
#: The columns the record-by-record decoders give a value for (the others are the key's and the record's).
_SHARE_DECODED = (
    "snapshot_epoch",
    "state_epoch",
    "leader_epoch",
    "start_offset",
    "delivery_complete_count",
    "create_timestamp",
    "write_timestamp",
    "state_batches",
)
#: The columns :func:`_share_reference` gives, typed as in ``SHARE_RAW_SCHEMA``.
_SHARE_REF_SCHEMA = pa.schema(
    [
        SHARE_RAW_SCHEMA.field(name)
        for name in (
            "record_type",
            "decode_error",
            "group_id",
            "topic_id",
            "partition",
            "is_tombstone",
            "value_version",
            *_SHARE_DECODED,
        )
    ]
)


def _share_reference(key: bytes | None, value: bytes | None, single: dict | None | ValueError = None) -> dict:
    """What one ``__share_group_state`` record must decode to, per the record-by-record decoders
    (``decode_share_state_key``, ``decode_share_state_value``) and the error codes the module documents:
    the row's key columns, ``is_tombstone``, ``value_version``, ``decode_error`` and, when the value decodes,
    :data:`_SHARE_DECODED` (timestamps -1 read as null, as the vectorised path reports them).  ``single``:
    the value's decode when the caller already has it (a ``ValueError`` when it raised)."""
    rtype = struct.unpack_from(">h", key)[0] if key is not None and len(key) >= 2 else None
    ref: dict = {"record_type": rtype, "decode_error": None, "group_id": None, "topic_id": None, "partition": None}
    ref.update({"is_tombstone": None, "value_version": None, **dict.fromkeys(_SHARE_DECODED)})
    if key is None:
        return dict(ref, decode_error="null_key")
    try:
        _rt, ref["group_id"], ref["topic_id"], ref["partition"] = decode_share_state_key(key)
    except ValueError:
        err = "unknown_record_type" if rtype is not None and rtype not in (0, 1) else "malformed_key"
        return dict(ref, decode_error=err, group_id=None, topic_id=None, partition=None)
    ref["is_tombstone"] = value is None
    if value is None:
        return ref
    if len(value) < 2:
        return dict(ref, decode_error="malformed_value")
    ref["value_version"] = struct.unpack_from(">h", value)[0]
    if ref["value_version"] != 0:
        return dict(ref, decode_error="unknown_value_version")
    if single is None:
        try:
            single = decode_share_state_value(value, rtype)
        except ValueError as exc:
            single = exc
    if isinstance(single, ValueError):
        return dict(ref, decode_error="malformed_value")
    for name in _SHARE_DECODED:
        v = single[name]
        if name == "state_batches":
            v = [dict(zip(STATE_BATCH_NAMES, b)) for b in v]
        elif name.endswith("_timestamp") and v == -1:
            v = None
        ref[name] = v
    return ref


def _require(table: pa.Table, mask, what: str) -> None:
    """``mask`` (one boolean per row of ``table``; null counts as false) must hold on every row: else raise for
    the first row where it does not."""
    m = pc.fill_null(mask, False)
    if len(m) and not pc.all(m).as_py():
        i = int(np.flatnonzero(~np.asarray(m.to_numpy(zero_copy_only=False)))[0])
        raise HarnessViolation(f"{what}: row {i} {table.slice(i, 1).to_pylist()[0]}")


def _check_share_rows(got: pa.Table, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Each decoded row equals :func:`_share_reference` of its record: the vectorised decoder agrees with the
    record-by-record one on every record, and reports a ``decode_error`` only where that one raises.  Each
    distinct record is decoded once and the comparison is column by column (an input may hold 60,000 records)."""
    _check(got.num_rows == len(records), f"{got.num_rows} rows for {len(records)} records")
    memo: dict = {}
    refs, idx = [], []
    for kv in records:
        j = memo.get(kv)
        if j is None:
            j = memo[kv] = len(refs)
            refs.append(_share_reference(*kv))
        idx.append(j)
    want = pa.Table.from_pylist(refs, schema=_SHARE_REF_SCHEMA).take(pa.array(idx, pa.int64()))
    got = got.select(_SHARE_REF_SCHEMA.names)
    if all(got.column(c).equals(want.column(c)) for c in _SHARE_REF_SCHEMA.names):
        return
    for i in range(len(records)):
        g, w = got.slice(i, 1).to_pylist()[0], want.slice(i, 1).to_pylist()[0]
        if g != w:
            diff = {name: (g[name], w[name]) for name in w if g[name] != w[name]}
            raise HarnessViolation(f"record {i}: vectorised (left) and record-by-record (right) differ: {diff}")
    raise HarnessViolation("decoded columns differ from the record-by-record decode in their Arrow types")


def _check_share_batch(b: pa.RecordBatch) -> None:
    _check(b.schema.equals(SHARE_RAW_SCHEMA), "a decoded batch not in SHARE_RAW_SCHEMA")
    try:
        b.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise HarnessViolation(f"an invalid Arrow batch: {exc}") from None


def share_state_segment(data: bytes) -> None:
    """A ``__share_group_state`` segment through ``decode_share_state_segment``: batches, records, ShareSnapshot
    and ShareUpdate keys and values (both layouts, tagged fields, tombstones).  Issue rows carry the file and a
    byte position inside it; every data record of the batches the segment reader accepts is one row, equal to
    the record-by-record decode of its key and value.  Documented exceptions: none."""
    from audit.formats.record_batch import ATTR_CONTROL

    out = decode_share_state_segment(data, SHARE_SEGMENT_PATH, SHARE_PARTITION)
    for b in out:
        _check_share_batch(b)
    table = pa.Table.from_batches(out, schema=SHARE_RAW_SCHEMA)
    n = len(data)
    kind = table.column("kind")
    _require(table, pc.is_in(kind, pa.array(["issue", "record"])), "a row neither issue nor record")
    issues = table.filter(pc.equal(kind, "issue"))
    _require(issues, pc.equal(issues.column("source_file"), SHARE_SEGMENT_PATH), "an issue row without its file")
    _require(issues, pc.greater(pc.utf8_length(issues.column("decode_error")), 0), "an issue row without a reason")
    pos = issues.column("position")
    _require(issues, pc.and_(pc.greater_equal(pos, 0), pc.less_equal(pos, n)), "an issue without a byte position")
    rows = table.filter(pc.equal(kind, "record"))
    _require(rows, pc.equal(rows.column("source_partition"), SHARE_PARTITION), "a record row without its partition")
    has_err, src = pc.is_valid(rows.column("decode_error")), rows.column("source_file")
    _require(
        rows,
        pc.and_kleene(
            pc.equal(has_err, pc.is_valid(src)), pc.or_kleene(pc.invert(has_err), pc.equal(src, SHARE_SEGMENT_PATH))
        ),
        "source_file not set exactly on the records with a decode_error",
    )
    scan = scan_batches(data)
    recs = extract_records(data, scan)
    keep = np.flatnonzero((scan.attributes[recs.batch] & ATTR_CONTROL) == 0) if len(recs) else np.zeros(0, np.int64)
    d = recs.data
    records = [
        (None if kl < 0 else d[ks : ks + kl].tobytes(), None if vl < 0 else d[vs : vs + vl].tobytes())
        for ks, kl, vs, vl in zip(
            recs.key_start[keep].tolist(),
            recs.key_len[keep].tolist(),
            recs.value_start[keep].tolist(),
            recs.value_len[keep].tolist(),
        )
    ]
    _check_share_rows(rows, records)
    where = (scan.position[recs.batch[keep]].tolist(), recs.offset[keep].tolist()) if len(keep) else ([], [])
    _check(
        (rows.column("position").to_pylist(), rows.column("offset").to_pylist()) == where,
        "record rows not at their batch position and offset",
    )


def share_state_records(data: bytes) -> None:
    """``__share_group_state`` keys and values (ShareSnapshot, ShareUpdate, tombstones, other record types)
    through ``decode_share_state_rows``, the decoder of the records a Kafka client fetched (and, inside it,
    ``decode_share_state_kv``'s vectorised and record-by-record paths); input laid out as
    :func:`split_kv_records` says.  One row per record, in ``SHARE_RAW_SCHEMA``, each equal to the record-by-record
    decode of its key and value.  Documented exceptions: none."""
    recs = split_kv_records(data)
    n = len(recs)
    parts = [i % 50 for i in range(n)]
    offsets = [(1 << 40) + i for i in range(n)]
    rb = pa.RecordBatch.from_pydict(
        {
            "source_partition": parts,
            "source_offset": offsets,
            "timestamp": [1_700_000_000_000 + i for i in range(n)],
            "key": [k for k, _ in recs],
            "value": [v for _, v in recs],
        },
        schema=_KV_SCHEMA,
    )
    out = decode_share_state_rows(rb)
    _check(out.num_rows == n, f"decode_share_state_rows gave {out.num_rows} rows for {n} records")
    _check_share_batch(out)
    table = pa.Table.from_batches([out])
    _require(table, pc.equal(table.column("kind"), "record"), "a row that is not a record")
    _check(table.column("source_partition").to_pylist() == parts, "rows not at their records' partitions")
    _check(table.column("offset").to_pylist() == offsets, "rows not at their records' offsets")
    errors = table.column("decode_error").to_pylist()
    _check(
        table.column("source_file").to_pylist()
        == [f"__share_group_state-{p}" if e is not None else None for p, e in zip(parts, errors)],
        "source_file not __share_group_state-<p> exactly on the records with a decode_error",
    )
    _check_share_rows(table, recs)


def split_share_value(data: bytes) -> tuple[int, bytes]:
    """``share_state_value`` input layout: int16 record type (0 ShareSnapshot, 1 ShareUpdate, anything else
    unknown), then the value's bytes.  Under 2 bytes: a snapshot value of those bytes."""
    if len(data) < 2:
        return 0, data
    return struct.unpack_from(">h", data)[0], data[2:]


def join_share_value(record_type: int, value: bytes) -> bytes:
    """Inverse of :func:`split_share_value`."""
    return struct.pack(">h", _wrap(record_type, 16)) + value


#: What surrounds the value in the buffer ``share_state_value`` gives ``decode_share_state_kv``: bytes that read
#: as a tagged field carrying a DeliveryCompleteCount, so a read past the value's end shows as a wrong field.
_SHARE_PAD = b"\x01\x00\x04\x00\x00\x00\x07"


def share_state_value(data: bytes) -> None:
    """One ShareSnapshotValue or ShareUpdateValue (input laid out as :func:`split_share_value` says) through
    ``decode_share_state_value`` (documented exception: ``ValueError``), the same bytes through
    ``decode_share_state_key`` (``ValueError``), and the record through the vectorised ``decode_share_state_kv``
    (twice in one buffer: once followed by other bytes, once at the buffer's end), which must agree with the
    single-value decoder (same epochs, start offset, DeliveryCompleteCount and state batches) and report a
    ``decode_error`` only when that one raises.  Documented exceptions: ``ValueError``."""
    rtype, value = split_share_value(data)
    try:
        single: dict | ValueError = decode_share_state_value(value, rtype)
    except ValueError as exc:
        single = exc
    if isinstance(single, dict):
        _check(single["layout"] in ("4.1+", "4.0"), f"layout {single['layout']!r}")
        _check((single["state_epoch"] is None) == (rtype != 0), "a state epoch on an update, or none on a snapshot")
        for name, bits in (("snapshot_epoch", 32), ("state_epoch", 32), ("leader_epoch", 32), ("start_offset", 64)):
            x = single[name]
            _check(x is None or -(1 << (bits - 1)) <= x < 1 << (bits - 1), f"{name} {x} outside int{bits}")
        try:
            pa.array([[dict(zip(STATE_BATCH_NAMES, b)) for b in single["state_batches"]]], STATE_BATCHES)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise HarnessViolation(f"state batches do not fit the state_batches column: {exc}") from None
    try:
        _t, _g, topic, partition = decode_share_state_key(value)
        _check(len(topic) == 22 and -(1 << 31) <= partition < 1 << 31, "a key that does not fit its columns")
    except ValueError:
        pass
    key = share_key(rtype, b"share-g", SHARE_TOPIC_ID, 3)
    buf = key + value + _SHARE_PAD + key + value
    n1, n2 = len(key), 2 * len(key) + len(value) + len(_SHARE_PAD)
    kv = decode_share_state_kv(
        np.frombuffer(buf, dtype=np.uint8),
        np.array([0, n2 - len(key)], dtype=np.int64),
        np.array([len(key)] * 2, dtype=np.int64),
        np.array([n1, n2], dtype=np.int64),
        np.array([len(value)] * 2, dtype=np.int64),
    )
    _check(set(kv) == set(KV_FIELDS), "decode_share_state_kv columns differ from KV_FIELDS")
    table = pa.table({name: kv[name] for name in KV_FIELDS})
    _check(table.num_rows == 2 and table.schema.equals(_SHARE_KV_SCHEMA), "decode_share_state_kv columns not KV_FIELDS")
    rows = table.to_pylist()
    ref = _share_reference(key, value, single if rtype in (0, 1) else None)
    for i, row in enumerate(rows):
        got = {name: row[name] for name in ref}
        if got != ref:
            diff = {name: (got[name], ref[name]) for name in ref if got[name] != ref[name]}
            raise HarnessViolation(
                f"copy {i}: decode_share_state_kv (left) and decode_share_state_value differ: {diff}"
            )


# =========================================================================== value helpers


#: The ``__consumer_offsets`` member and topology record types of KIP-848 (5, 8), share (10, 14) and streams
#: groups (19, 22, 23) the ``group_record_value`` harness picks from (its input's first byte, modulo 7).
GROUP_RECORD_TYPES = (5, 8, 10, 14, 19, 22, 23)
_GROUP_KEY_GROUP, _GROUP_KEY_MEMBER = "fuzz-group", "fuzz-member"


def split_group_record(data: bytes) -> tuple[int, bytes]:
    """``group_record_value`` input layout: byte 0 picks the record type (:data:`GROUP_RECORD_TYPES`, modulo 7),
    the rest is the value.  Empty input: a type-5 value of no bytes."""
    if not data:
        return GROUP_RECORD_TYPES[0], b""
    return GROUP_RECORD_TYPES[data[0] % len(GROUP_RECORD_TYPES)], data[1:]


def join_group_record(record_type: int, value: bytes) -> bytes:
    """Inverse of :func:`split_group_record`."""
    return bytes([GROUP_RECORD_TYPES.index(record_type)]) + value


def group_record_key(record_type: int) -> bytes:
    """The key Kafka writes for ``record_type`` (``*MemberMetadataKey``/``*CurrentMemberAssignmentKey``: GroupId,
    MemberId; ``StreamsGroupTopologyKey``: GroupId), int16-length strings after the int16 type."""
    out = struct.pack(">hh", record_type, len(_GROUP_KEY_GROUP)) + _GROUP_KEY_GROUP.encode()
    if record_type != 23:
        out += struct.pack(">h", len(_GROUP_KEY_MEMBER)) + _GROUP_KEY_MEMBER.encode()
    return out


def _group_record_reference(record_type: int, value: bytes) -> tuple[dict | ValueError, list[dict], int]:
    """(what the single-value decoder gave or raised, the owner entries ``group_owners`` must hold, the
    ``group_generation``) for one value of ``record_type``, per ``_group_metadata``'s documented mapping."""
    m = _GROUP_KEY_MEMBER

    def entry(member=None, instance=None, client=None, host=None, topic=None, parts=None, process=None, sub=None):
        return {
            "member_id": member,
            "group_instance_id": instance,
            "client_id": client,
            "client_host": host,
            "topic": topic,
            "partitions": None if parts is None else parts.tolist(),
            "process_id": process,
            "subtopology": sub,
        }

    try:
        if record_type == 5:
            d = decode_consumer_group_member_value(value)
            return d, [entry(m, d["group_instance_id"], d["client_id"], d["client_host"])], -1
        if record_type == 10:
            d = decode_share_group_member_value(value)
            owners = [entry(m, None, d["client_id"], d["client_host"])]
            return d, owners + [entry(m, topic=t) for t in d["subscribed_topics"]], -1
        if record_type == 19:
            d = decode_streams_group_member_value(value)
            owners = [entry(m, d["group_instance_id"], d["client_id"], d["client_host"], process=d["process_id"])]
            return d, owners, -1
        if record_type == 22:
            d = decode_streams_group_assignment_value(value)
            return d, [entry(m, parts=p, sub=sub) for sub, p in d["active"]], d["member_epoch"]
        if record_type == 23:
            d = decode_streams_group_topology_value(value)
            return d, [entry(topic=t, sub=sub) for sub, t in d["sources"]], d["epoch"]
        fn = decode_consumer_group_assignment_value if record_type == 8 else decode_share_group_assignment_value
        d = fn(value)
        return d, [entry(m, topic=t, parts=p) for t, p in d["assigned"]], d["member_epoch"]
    except AssignmentLimitError as exc:
        raise HarnessViolation(f"AssignmentLimitError without a limit: {exc}") from None
    except ValueError as exc:
        return exc, [], -1


def group_record_value(data: bytes) -> None:
    """One KIP-848, share or streams group member metadata, current assignment or topology value (input laid out
    as :func:`split_group_record` says) through its single-value decoder (``decode_consumer_group_member_value``,
    ``decode_consumer_group_assignment_value``, ``decode_share_group_member_value``,
    ``decode_share_group_assignment_value``, ``decode_streams_group_member_value``,
    ``decode_streams_group_assignment_value``, ``decode_streams_group_topology_value``; documented exception:
    ``ValueError``), then as a record with Kafka's key through ``decode_offsets_rows``: one ``RAW_SCHEMA`` row whose
    ``group_owners``, ``member_id``, ``group_generation`` and ``decode_error`` are what the single-value decode says
    (``malformed_value``/``unknown_value_version`` exactly when it raises, ``owners_over_limit`` past
    ``MAX_OWNER_ENTRIES``).  Documented exceptions: ``ValueError`` (from the single-value decoder only)."""
    record_type, value = split_group_record(data)
    single, owners, generation = _group_record_reference(record_type, value)
    if isinstance(single, dict):
        for name in ("member_epoch", "previous_member_epoch", "epoch", "topology_epoch"):
            if name in single:
                _check(-(1 << 31) <= single[name] < 1 << 31, f"{name} outside int32")
        if "state" in single:
            _check(-128 <= single["state"] < 128, "state outside int8")
        for o in owners:
            _check(
                all(o[k] is None or isinstance(o[k], str) for k in o if k != "partitions"),
                "an owner field not a string",
            )
    rb = pa.RecordBatch.from_pydict(
        {
            "source_partition": [3],
            "source_offset": [7],
            "timestamp": [1_700_000_000_000],
            "key": [group_record_key(record_type)],
            "value": [value],
        },
        schema=_KV_SCHEMA,
    )
    out = decode_offsets_rows(rb)
    _check(out.schema.equals(RAW_SCHEMA) and out.num_rows == 1, "decode_offsets_rows lost the record")
    row = out.to_pylist()[0]
    _check(row["record_type"] == record_type, f"record type {row['record_type']} for {record_type}")
    _check(row["group_id"] == _GROUP_KEY_GROUP, f"group id {row['group_id']!r}")
    _check(row["member_id"] == (None if record_type == 23 else _GROUP_KEY_MEMBER), f"member id {row['member_id']!r}")
    if isinstance(single, ValueError):
        want = "unknown_value_version" if "version" in str(single) else "malformed_value"
        _check(row["decode_error"] == want, f"decode_error {row['decode_error']!r}, the decoder raised {single!r}")
        _check(row["group_owners"] is None, "owners on a value that does not decode")
    elif len(owners) > MAX_OWNER_ENTRIES:
        _check(row["decode_error"] == "owners_over_limit", f"decode_error {row['decode_error']!r} past the limit")
        _check(row["group_owners"] is None, "owners past the limit")
    else:
        _check(row["decode_error"] is None, f"decode_error {row['decode_error']!r} on a value that decodes")
        _check(row["group_owners"] == owners, "group_owners differ from the single-value decode")
        _check(row["group_generation"] == generation, f"group_generation {row['group_generation']} not {generation}")


def _wrap(v: int, bits: int) -> int:
    """``v`` as a signed ``bits``-bit integer (two's complement wrap)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def uvarint(v: int) -> bytes:
    """Unsigned base-128 varint of any non-negative integer (no length limit: over-long on purpose)."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(v: int, bits: int = 64) -> bytes:
    """Kafka's zigzag varint (``ByteUtils.writeVarint``/``writeVarlong``) of ``v`` wrapped to ``bits``."""
    v = _wrap(v, bits)
    return uvarint(((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1))


def read_uvarint(b: bytes, pos: int, limit: int = 10) -> tuple[int, int] | None:
    """(value, next position) of the unsigned varint at ``pos``; None when unterminated."""
    v = shift = 0
    for i in range(pos, min(pos + limit, len(b))):
        v |= (b[i] & 0x7F) << shift
        if b[i] < 0x80:
            return v, i + 1
        shift += 7
    return None


def read_zigzag(b: bytes, pos: int, limit: int = 10) -> tuple[int, int] | None:
    """(value, next position) of the zigzag varint at ``pos``; None when unterminated within ``limit``."""
    r = read_uvarint(b, pos, limit)
    if r is None:
        return None
    u, p = r
    return (u >> 1) ^ -(u & 1), p


#: Extreme integers of every width the formats use.
EXTREMES = {
    8: [0, 1, -1, 127, -128, 2, 0x7F, 0x80],
    16: [0, 1, -1, 2, 3, 4, 5, 0x7FFF, -0x8000, 0x7FFE, 255, 256],
    32: [0, 1, -1, 2, 7, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 0xFFFF, 0x10000, 1 << 20, 1 << 24, 1000000],
    64: [
        0,
        1,
        -1,
        (1 << 63) - 1,
        -(1 << 63),
        (1 << 63) - 2,
        (1 << 32),
        (1 << 31) - 1,
        (1 << 31),
        -(1 << 31) - 1,
        1 << 62,
    ],
}


def extreme(rng: random.Random, bits: int) -> int:
    """An extreme (or near-extreme, or random) signed ``bits``-bit integer."""
    r = rng.random()
    if r < 0.7:
        return _wrap(rng.choice(EXTREMES[bits]), bits)
    if r < 0.85:
        return _wrap(rng.choice(EXTREMES[bits]) + rng.choice((-2, -1, 1, 2)), bits)
    return _wrap(rng.getrandbits(bits), bits)


def extreme_varint(rng: random.Random) -> bytes:
    """A varint-shaped byte string at an extreme: huge, negative, over-long, or unterminated."""
    k = rng.randrange(9)
    if k == 0:
        return zigzag(extreme(rng, 32), 32)
    if k == 1:
        return zigzag(extreme(rng, 64), 64)
    if k == 2:
        return uvarint(rng.choice((0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 35, (1 << 64) - 1, (1 << 70) - 1)))
    if k == 3:
        return b"\xff" * rng.choice((5, 6, 10, 11))  # unterminated
    if k == 4:
        return b"\x80" * rng.choice((4, 9)) + b"\x00"  # over-long zero
    if k == 5:
        return b"\xff\xff\xff\xff\x0f"  # 5-byte maximum
    if k == 6:
        return b"\xff" * 9 + b"\x01"  # 10-byte maximum
    if k == 7:
        return b"\xfe\xff\xff\xff\x0f"  # zigzag int32 min/max neighbourhood
    return zigzag(rng.randrange(-300, 300), 32)


def poke(rng: random.Random, b: bytes, start: int = 0) -> bytes:
    """Overwrite (or insert) an extreme integer in some encoding at a random position >= ``start``."""
    if len(b) <= start:
        start = 0
    pos = rng.randrange(start, len(b) + 1)
    kind = rng.randrange(6)
    if kind < 4:
        bits = (8, 16, 32, 64)[kind]
        enc = struct.pack(">" + "bhiq"[kind], extreme(rng, bits))
    else:
        enc = extreme_varint(rng)
    if rng.random() < 0.6:
        return b[:pos] + enc + b[pos + len(enc) :]
    return b[:pos] + enc + b[pos:]


def _simple_byte_mutate(data: bytes, max_size: int) -> bytes:
    """A plain byte mutation (used when libFuzzer's own mutator is not at hand)."""
    rng = random.Random(hash(bytes(data)) ^ random.getrandbits(32))
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif op == 2 and b:
            del b[rng.randrange(len(b))]
        elif b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b[:max_size])


ByteMutate = Callable[[bytes, int], bytes]


# =========================================================================== segment model


def split_chain(buf: bytes) -> tuple[list[bytearray], bytes]:
    """Split a segment into its entries (v2 batches or legacy messages, each with its 12-byte offset
    and length prefix) as far as the length fields allow, and the bytes after the last one."""
    entries: list[bytearray] = []
    pos, n = 0, len(buf)
    while n - pos >= LOG_OVERHEAD + 5 and len(entries) < 20000:
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        if length < 5 or pos + LOG_OVERHEAD + length > n:
            break
        entries.append(bytearray(buf[pos : pos + LOG_OVERHEAD + length]))
        pos += LOG_OVERHEAD + length
    return entries, bytes(buf[pos:])


def fix_entry(e: bytearray, length: bool = True) -> bytearray:
    """Recompute an entry's length field (when ``length``) and its CRC: CRC-32C over attributes..end
    for magic 2, CRC-32 over magic..end for legacy messages."""
    if len(e) < 17:
        return e
    if length:
        e[8:12] = struct.pack(">i", len(e) - LOG_OVERHEAD)
    magic = e[16]
    if magic == 2 and len(e) >= BATCH_HEADER_SIZE:
        e[17:21] = struct.pack(">I", crc32c(bytes(e[21:])))
    elif magic in (0, 1):
        e[12:16] = struct.pack(">I", zlib.crc32(bytes(e[16:])))
    return e


#: Decompressed sizes the mutators work with (a records block larger than this is mutated as bytes).
_MUTATE_PLAIN_CAP = 8 << 20


def _decompress_for_mutation(codec: int, payload: bytes, legacy_magic: int | None = None) -> bytes | None:
    try:
        if legacy_magic == 0 and codec == 3:
            from kafka.codec import lz4_decode_old_kafka

            return lz4_decode_old_kafka(payload) if len(payload) < (1 << 20) else None
        return decompress(codec, payload, _MUTATE_PLAIN_CAP)
    except Exception:
        return None


def compress(codec: int, plain: bytes, rng: random.Random | None = None, legacy_magic: int | None = None) -> bytes:
    """Compress a records block as a producer would: gzip, snappy (xerial-framed as the Java client
    writes it, or raw), lz4 (frame; Kafka 0.8's broken framing for magic 0), zstd."""
    from kafka import codec as kc

    if codec == 1:
        return gzip.compress(plain, compresslevel=rng.choice((1, 6, 9)) if rng else 6)
    if codec == 2:
        if rng is not None and rng.random() < 0.3:
            import snappy

            return snappy.compress(plain)
        return kc.snappy_encode(plain)
    if codec == 3:
        return kc.lz4_encode_old_kafka(plain) if legacy_magic == 0 else kc.lz4_encode(plain)
    if codec == 4:
        return kc.zstd_encode(plain)
    return plain


# ---- v2 records


def split_records(plain: bytes) -> tuple[list[bytes], bytes]:
    """The record bodies of an uncompressed v2 records block (each without its length varint) and
    whatever follows the last one that fits."""
    out, pos, n = [], 0, len(plain)
    while pos < n and len(out) < 200000:
        r = read_zigzag(plain, pos, 5)
        if r is None:
            break
        ln, p = r
        if ln < 0 or p + ln > n:
            break
        out.append(plain[p : p + ln])
        pos = p + ln
    return out, plain[pos:]


def join_records(bodies: list[bytes], tail: bytes = b"") -> bytes:
    """A v2 records block: each body after its zigzag varint length, then ``tail`` (inverse of
    :func:`split_records`)."""
    return b"".join(zigzag(len(b), 32) + b for b in bodies) + tail


def parse_record(body: bytes) -> list | None:
    """[attributes, timestamp delta, offset delta, key, value, headers block] of one record body."""
    if not body:
        return None
    pos = 1
    r1 = read_zigzag(body, pos, 10)
    if r1 is None:
        return None
    tsd, pos = r1
    r2 = read_zigzag(body, pos, 5)
    if r2 is None:
        return None
    offd, pos = r2
    fields = [body[0], tsd, offd]
    for _ in range(2):
        r = read_zigzag(body, pos, 5)
        if r is None:
            return None
        ln, pos = r
        if ln < 0:
            fields.append(None)
        else:
            if pos + ln > len(body):
                return None
            fields.append(body[pos : pos + ln])
            pos += ln
    fields.append(body[pos:])
    return fields


def build_record(f: list) -> bytes:
    """One record body from the fields :func:`parse_record` returns (key/value None = null)."""
    out = bytes([f[0] & 0xFF]) + zigzag(f[1], 64) + zigzag(f[2], 32)
    for b in (f[3], f[4]):
        out += zigzag(-1, 32) if b is None else zigzag(len(b), 32) + b
    return out + f[5]


def minimal_record(i: int = 0) -> bytes:
    """The smallest v2 record body: null key and value, no headers (6 bytes after its length)."""
    return bytes([0]) + zigzag(0, 64) + zigzag(i, 32) + b"\x01\x01\x00"


# =========================================================================== key/value mutators

_RECORD_TYPES = (0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 18, 23, 24, 99, -1, 0x7FFF, -0x8000)


def mutate_offsets_key(rng: random.Random, key: bytes | None) -> bytes | None:
    """A ``__consumer_offsets`` key with one structural edit: record type, a string length or the
    partition at an extreme, a truncated or extended tail."""
    if key is None or len(key) < 2 or rng.random() < 0.05:
        group = rng.choice((b"g", b"", b"payments-\xff", b"x" * rng.choice((1, 200, 1500))))
        return (
            struct.pack(">hh", rng.choice((0, 1, 2, 3)), len(group))
            + group
            + struct.pack(">h", 1)
            + b"t"
            + struct.pack(">i", rng.randrange(-2, 50))
        )
    op = rng.randrange(7)
    if op == 0:
        return struct.pack(">h", rng.choice(_RECORD_TYPES)) + key[2:]
    if op in (1, 2) and len(key) >= 4:
        glen = struct.unpack_from(">h", key, 2)[0]
        if op == 1 or glen < 0 or 4 + glen + 2 > len(key):
            return key[:2] + struct.pack(">h", extreme(rng, 16)) + key[4:]
        t = 4 + glen
        return key[:t] + struct.pack(">h", extreme(rng, 16)) + key[t + 2 :]
    if op == 3 and len(key) >= 4:
        return key[:-4] + struct.pack(">i", extreme(rng, 32))
    if op == 4:
        return key[: rng.randrange(len(key) + 1)]
    if op == 5:
        return key + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return poke(rng, key)


_VALUE_VERSIONS = (0, 1, 2, 3, 4, 5, -1, 0x7FFF, -0x8000)


def mutate_offsets_value(rng: random.Random, value: bytes | None) -> bytes | None:
    """An OffsetCommitValue / GroupMetadataValue with one structural edit: version, offset, epoch,
    metadata length (int16 or compact varint), timestamps, member count; or null (a tombstone)."""
    r = rng.random()
    if value is None or r < 0.04:
        if value is None or rng.random() < 0.5:
            v = rng.choice((0, 1, 3, 4))
            body = struct.pack(">q", extreme(rng, 64))
            if v >= 3:
                body += struct.pack(">i", rng.choice((-1, 0, 5, -2, 0x7FFFFFFF)))
            body += (b"\x01" if v == 4 else struct.pack(">h", 0)) + struct.pack(">q", 1_700_000_000_000)
            if v == 1:
                body += struct.pack(">q", -1)
            return struct.pack(">h", v) + body + (b"\x00" if v == 4 else b"")
        return None
    if len(value) < 2:
        return poke(rng, value)
    op = rng.randrange(8)
    if op == 0:
        return struct.pack(">h", rng.choice(_VALUE_VERSIONS)) + value[2:]
    if op == 1 and len(value) >= 10:  # committed offset (or group metadata's protocol type + generation)
        return value[:2] + struct.pack(">q", extreme(rng, 64)) + value[10:]
    if op == 2 and len(value) >= 14:  # leader epoch of v3+
        return value[:10] + struct.pack(">i", extreme(rng, 32)) + value[14:]
    if op == 3 and len(value) >= 12:  # metadata length: int16 (v0-v3) or compact varint (v4)
        version = struct.unpack_from(">h", value, 0)[0]
        at = 14 if version >= 3 else 10
        if version >= 4:
            r2 = read_uvarint(value, at, 5)
            end = r2[1] if r2 else at + 1
            return value[:at] + extreme_varint(rng) + value[end:]
        return value[:at] + struct.pack(">h", extreme(rng, 16)) + value[at + 2 :]
    if op == 4:
        return value[: rng.randrange(len(value) + 1)]
    if op == 5:
        return value + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    return poke(rng, value, 2)


_META_KEYS = (0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 17, 20, 21, 27, 28, 29, 30, 6, 13, 16, 0x7FFF, 0x8000, 1 << 28)


def mutate_metadata_value(rng: random.Random, value: bytes | None) -> bytes | None:
    """A KRaft metadata record value with one structural edit: frame version, api key or version at an
    extreme, a tagged-field count/size or array length pushed to an extreme varint."""
    if value is None:
        return bytes([1, 2, 0]) + b"\x02t" + bytes(16) + b"\x00"
    fr = read_uvarint(value, 0, 5)
    ak = read_uvarint(value, fr[1], 5) if fr else None
    ve = read_uvarint(value, ak[1], 5) if ak else None
    op = rng.randrange(6)
    if ve is not None and op == 0:
        return uvarint(rng.choice((1, 1, 1, 0, 2, 127, 128))) + value[fr[1] :]
    if ve is not None and op == 1:
        return value[: fr[1]] + uvarint(rng.choice(_META_KEYS)) + value[ak[1] :]
    if ve is not None and op == 2:
        return value[: ak[1]] + uvarint(rng.choice((0, 1, 2, 3, 4, 5, 0x7FFF, 0x8000))) + value[ve[1] :]
    if op == 3:
        start = ve[1] if ve else 0
        pos = rng.randrange(start, len(value) + 1)
        r = read_uvarint(value, pos, 5)
        end = r[1] if r else pos
        return value[:pos] + extreme_varint(rng) + value[end:]
    if op == 4:
        return value[: rng.randrange(len(value) + 1)]
    return poke(rng, value, ve[1] if ve else 0)


KVMutate = Callable[[random.Random, bytes | None, bytes | None], tuple[bytes | None, bytes | None]]


def offsets_kv_mutator(rng, key, value):
    """(key, value) of a ``__consumer_offsets`` record with one structural edit of either."""
    if rng.random() < 0.4:
        return mutate_offsets_key(rng, key), value
    return key, mutate_offsets_value(rng, value)


def metadata_kv_mutator(rng, key, value):
    """(key, value) of a ``__cluster_metadata`` record, its value (mostly) edited structurally."""
    if rng.random() < 0.05:
        return mutate_offsets_key(rng, key), value
    return key, mutate_metadata_value(rng, value)


# ---- __share_group_state (KIP-932 share groups)

#: The topic id (16 bytes) of the share seeds' records.
SHARE_TOPIC_ID = bytes.fromhex("5f3c1e0a9b8d4c2e8f7a6b5c4d3e2f10")
_SHARE_RECORD_TYPES = (0, 1, 0, 1, 2, 3, 4, -1, 0x7FFF, -0x8000, 16)
_DELIVERY_STATES = (0, 2, 4, 1, 3, -1, 127, -128)


def share_key(rtype: int, group: bytes | str, topic_id: bytes = SHARE_TOPIC_ID, partition: int = 0) -> bytes:
    """A ShareSnapshotKey / ShareUpdateKey as ``CoordinatorRecordSerde`` writes it: int16 record type, then the
    key's version 0 (not flexible): int16-length GroupId, 16-byte TopicId, int32 Partition."""
    g = group.encode() if isinstance(group, str) else group
    head = struct.pack(">hh", _wrap(rtype, 16), _wrap(len(g), 16))
    return head + g + topic_id + struct.pack(">i", _wrap(partition, 32))


def tagged_fields(fields: list[tuple[int, bytes]]) -> bytes:
    """A flexible struct's tagged-field section: uvarint count, then per field uvarint tag, uvarint size, bytes."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(b)) + b for t, b in fields)


def dcc_tag(count: int) -> tuple[int, bytes]:
    """The DeliveryCompleteCount tagged field (tag 0, int32; Kafka 4.2+ writes it when not -1)."""
    return 0, struct.pack(">i", _wrap(count, 32))


def overlong_uvarint(v: int, extra: int = 1) -> bytes:
    """``v`` as an unsigned varint padded with ``extra`` needless continuation bytes (same value)."""
    b = bytearray(uvarint(v))
    b[-1] |= 0x80
    return bytes(b) + b"\x80" * (extra - 1) + b"\x00"


@dataclass
class ShareValue:
    """A ShareSnapshotValue (``snapshot``) or ShareUpdateValue as its fields (layout in the docstring of
    ``audit.formats.share_state``); :meth:`encode` gives its bytes.  ``batches``: ``[first offset, last offset,
    delivery state, delivery count, the batch's tagged-field section]``; ``tags``: the value's tagged fields;
    ``batch_count`` / ``tag_section``: raw bytes in place of the encoded StateBatches length / the value's
    tagged-field section, when set; ``trailing``: bytes after the value."""

    snapshot: bool
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = -1
    create_timestamp: int = 1_700_000_000_000
    write_timestamp: int = 1_700_000_000_000
    batches: list = field(default_factory=list)
    tags: list = field(default_factory=list)
    layout: str = "4.1+"
    version: int = 0
    batch_count: bytes | None = None
    tag_section: bytes | None = None
    trailing: bytes = b""

    def encode(self) -> bytes:
        out = struct.pack(">h", _wrap(self.version, 16))
        if self.layout == "4.0":  # Kafka 4.0: SnapshotEpoch uint16, no timestamps
            out += struct.pack(">H", self.snapshot_epoch & 0xFFFF)
        else:
            out += struct.pack(">i", _wrap(self.snapshot_epoch, 32))
        if self.snapshot:
            out += struct.pack(">i", _wrap(self.state_epoch, 32))
        out += struct.pack(">iq", _wrap(self.leader_epoch, 32), _wrap(self.start_offset, 64))
        if self.snapshot and self.layout != "4.0":
            out += struct.pack(">qq", _wrap(self.create_timestamp, 64), _wrap(self.write_timestamp, 64))
        out += self.batch_count if self.batch_count is not None else uvarint(len(self.batches) + 1)
        out += b"".join(
            struct.pack(">qqbh", _wrap(f, 64), _wrap(la, 64), _wrap(s, 8), _wrap(c, 16)) + t
            for f, la, s, c, t in self.batches
        )
        out += self.tag_section if self.tag_section is not None else tagged_fields(self.tags)
        return out + self.trailing


def _parse_tags(b: bytes, pos: int) -> tuple[list[tuple[int, bytes]], int] | None:
    r = read_uvarint(b, pos, 5)
    if r is None:
        return None
    count, pos = r
    out = []
    for _ in range(count):
        t = read_uvarint(b, pos, 5)
        s = read_uvarint(b, t[1], 5) if t else None
        if s is None or s[1] + s[0] > len(b):
            return None
        out.append((t[0], b[s[1] : s[1] + s[0]]))
        pos = s[1] + s[0]
    return out, pos


def _parse_share_value(b: bytes, snapshot: bool, layout: str) -> ShareValue | None:
    head = ">hH" if layout == "4.0" else ">hi"
    fmt = head + ("i" if snapshot else "") + "iq" + ("qq" if snapshot and layout != "4.0" else "")
    size = struct.calcsize(fmt)
    if len(b) < size:
        return None
    f = list(struct.unpack_from(fmt, b))
    m = ShareValue(snapshot, layout=layout, version=f.pop(0), snapshot_epoch=f.pop(0))
    if snapshot:
        m.state_epoch = f.pop(0)
    m.leader_epoch, m.start_offset = f.pop(0), f.pop(0)
    if f:
        m.create_timestamp, m.write_timestamp = f
    r = read_uvarint(b, size, 5)
    if r is None or r[0] == 0 or (r[0] - 1) * 20 > len(b):
        return None
    pos = r[1]
    for _ in range(r[0] - 1):
        if pos + 19 > len(b):
            return None
        first, last, state, count = struct.unpack_from(">qqbh", b, pos)
        t = _parse_tags(b, pos + 19)
        if t is None:
            return None
        m.batches.append([first, last, state, count, b[pos + 19 : t[1]]])
        pos = t[1]
    t = _parse_tags(b, pos)
    if t is None:
        return None
    m.tags, m.trailing = t[0], b[t[1] :]
    return m


def parse_share_value(value: bytes, snapshot: bool) -> ShareValue | None:
    """The fields of a ShareSnapshotValue / ShareUpdateValue (bytes after its tagged fields in ``trailing``): the
    4.1+ layout when it reads to the end, else the 4.0 one, else whichever reads at all; None when neither does.
    Written apart from the decoder under test."""
    found = [m for m in (_parse_share_value(value, snapshot, lay) for lay in ("4.1+", "4.0")) if m is not None]
    exact = [m for m in found if not m.trailing]
    return (exact or found or [None])[0]


def share_batches(rng: random.Random, n: int, start: int = 0) -> list:
    """``n`` state batches as the share coordinator writes them: offset ranges ascending from ``start``,
    AVAILABLE / ACKNOWLEDGED / ARCHIVED, small delivery counts, no tagged fields."""
    out, first = [], max(start, 0)
    for _ in range(n):
        last = first + rng.choice((0, 0, 1, 4, 9, 99, 499))
        out.append([first, last, rng.choice((0, 2, 2, 4)), rng.choice((1, 1, 1, 2, 3, 5)), b"\x00"])
        first = last + 1 + rng.choice((0, 0, 0, 1, 10))
    return out


def random_share_value(rng: random.Random, snapshot: bool) -> ShareValue:
    """A realistic value: 0-200 state batches (around the 1- and 2-byte count boundary), the 4.0 layout at
    times, DeliveryCompleteCount at times."""
    start = rng.choice((-1, 0, 17, 1 << 40))
    v = ShareValue(
        snapshot,
        snapshot_epoch=rng.choice((0, 1, 2, 65535)),
        state_epoch=rng.choice((0, 1, 2, 5)),
        leader_epoch=rng.choice((-1, 0, 3)),
        start_offset=start,
        batches=share_batches(rng, rng.choice((0, 0, 1, 2, 3, 125, 126, 127, 128, 200)), start),
        layout="4.0" if rng.random() < 0.2 else "4.1+",
    )
    if rng.random() < 0.5:
        v.tags = [dcc_tag(rng.choice((0, 1, 10, 1 << 20, -1)))]
    return v


def _share_batch_tags(rng: random.Random) -> bytes:
    """A state batch's tagged-field section: unknown tags, an empty tag 0, counts and sizes at extremes."""
    return rng.choice(
        (
            b"\x01\x07\x01\x00",  # one unknown tag: skipped
            b"\x02\x01\x00\x05\x02\xab\xcd",
            b"\x01\x00\x00",
            b"\x01" + extreme_varint(rng) + b"\x00",
            b"\x01\x07" + extreme_varint(rng),
            extreme_varint(rng),
            b"",
            b"\x00",
        )
    )


def _share_value_tags(rng: random.Random, tags: list) -> list:
    """The value's tagged fields with one edit: DeliveryCompleteCount added, at an extreme or of a wrong size,
    an unknown tag, tag 0 twice, the tags out of order, or none."""
    op = rng.randrange(7)
    tags = list(tags)
    if op == 0:
        return [dcc_tag(extreme(rng, 32))] + [t for t in tags if t[0] != 0]
    if op == 1:
        return [(0, bytes(rng.choice((0, 1, 3, 5, 8))))] + [t for t in tags if t[0] != 0]
    if op == 2:
        tag = rng.choice((1, 2, 7, 127, 128, 0x3FFF, 0x7FFFFFFF))
        tags.insert(rng.randrange(len(tags) + 1), (tag, bytes(rng.randrange(256) for _ in range(rng.randrange(9)))))
        return tags
    if op == 3:
        return tags + [dcc_tag(rng.choice((0, 1, -1)))]
    if op == 4:
        return list(reversed(tags + [(5, b"x")]))
    if op == 5:
        return [dcc_tag(rng.choice((0, 1, 7, 1 << 30, -1)))]
    return []


def mutate_share_value(rng: random.Random, value: bytes | None, rtype: int, tombstones: bool = True) -> bytes | None:
    """A ShareSnapshotValue (``rtype`` 0) or ShareUpdateValue with one structural edit: version, an epoch, the
    start offset or a timestamp at an extreme, the other Kafka version's layout, the other record type's
    value, a state batch's field or tagged fields, many batches (the 127-batch count boundary and beyond), the
    batch count at an extreme (null, over-long, huge), the value's tagged fields (DeliveryCompleteCount, unknown
    tags, sizes), bytes after the value, a cut; or a fresh value or a tombstone (``tombstones``)."""
    snapshot = rtype == 0
    if value is None or rng.random() < 0.03:
        if value is not None and tombstones and rng.random() < 0.5:
            return None
        return random_share_value(rng, snapshot).encode()
    m = parse_share_value(value, snapshot)
    if m is None or rng.random() < 0.08:
        op = rng.randrange(4)
        if op == 0 and len(value) >= 2:
            return struct.pack(">h", rng.choice(_VALUE_VERSIONS)) + value[2:]
        if op == 1:
            return value[: rng.randrange(len(value) + 1)]
        if op == 2:
            return value + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        return poke(rng, value, 2)
    op = rng.randrange(15)
    if op == 0:
        m.version = rng.choice(_VALUE_VERSIONS)
    elif op == 1:
        name = rng.choice(
            ("snapshot_epoch", "state_epoch", "leader_epoch", "start_offset", "create_timestamp", "write_timestamp")
        )
        setattr(m, name, extreme(rng, 64 if name in ("start_offset", "create_timestamp", "write_timestamp") else 32))
        if name == "snapshot_epoch" and m.layout == "4.0" and rng.random() < 0.5:
            m.snapshot_epoch = rng.choice((0xFFFF, 0x8000, 0x7FFF))
    elif op == 2:  # the other Kafka version's layout
        m.layout = "4.0" if m.layout != "4.0" else "4.1+"
    elif op == 3:  # the other record type's value
        m.snapshot = not m.snapshot
    elif op == 4 and m.batches:
        b = rng.choice(m.batches)
        j = rng.randrange(4)
        b[j] = rng.choice(_DELIVERY_STATES) if j == 2 and rng.random() < 0.7 else extreme(rng, (64, 64, 8, 16)[j])
    elif op == 5:  # many batches: the 1-byte count ends at 126 batches (the vectorised path's limit)
        k = rng.choice((125, 126, 127, 128, 200)) if rng.random() < 0.9 else rng.choice((1000, 16383, 16384))
        k = min(k, max(len(value), 1 << 16) // 20)
        src = m.batches or share_batches(rng, 4, max(m.start_offset, 0))
        m.batches = [list(src[i % len(src)]) for i in range(k)]
    elif op == 6 and m.batches:
        if rng.random() < 0.3:
            m.batches = []
        else:
            del m.batches[rng.randrange(len(m.batches))]
    elif op == 7:  # the StateBatches length: null, off by one, over-long, at an extreme
        n1 = len(m.batches) + 1
        m.batch_count = rng.choice(
            (
                b"\x00",
                uvarint(n1 + 1),
                uvarint(max(n1 - 1, 0)),
                overlong_uvarint(n1, rng.choice((1, 2, 4))),
                extreme_varint(rng),
            )
        )
    elif op == 8 and m.batches:
        b = rng.choice(m.batches) if rng.random() < 0.7 else None
        for x in [b] if b is not None else m.batches:
            x[4] = _share_batch_tags(rng)
    elif op == 9:
        m.tags = _share_value_tags(rng, m.tags)
    elif op == 10:  # the tagged-field section's count or a size at an extreme, or missing
        m.tag_section = rng.choice(
            (
                extreme_varint(rng),
                b"\x01\x00" + extreme_varint(rng) + b"\x00\x00\x00\x01",
                b"\x01" + extreme_varint(rng) + b"\x00",
                overlong_uvarint(len(m.tags)) if not m.tags else b"\x81\x00" + tagged_fields(m.tags)[1:],
                b"",
            )
        )
    elif op == 11:
        m.trailing = rng.choice((b"\x00", b"\x00\x00", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))))
    elif op == 12:
        b = m.encode()
        return b[: rng.randrange(len(b) + 1)]
    else:
        return poke(rng, m.encode(), 2)
    return m.encode()


def mutate_share_key(rng: random.Random, key: bytes | None) -> bytes | None:
    """A ShareSnapshotKey / ShareUpdateKey with one structural edit: record type (unknown ones too), the group
    length at an extreme, another group or topic id, the partition at an extreme, a cut or extra bytes; or a
    fresh key, or null."""
    if key is None or len(key) < 2 or rng.random() < 0.05:
        if key is not None and rng.random() < 0.1:
            return None
        group = rng.choice(
            (b"share-g", b"", b"share-\xff\xfe", "gruppe-\u00fc".encode(), b"x" * rng.choice((1, 249, 5000)))
        )
        tid = rng.choice((SHARE_TOPIC_ID, bytes(16), b"\xff" * 16, bytes(rng.randrange(256) for _ in range(16))))
        return share_key(rng.choice((0, 1)), group, tid, rng.choice((0, 1, 49, -1, 0x7FFFFFFF)))
    op = rng.randrange(7)
    glen = struct.unpack_from(">h", key, 2)[0] if len(key) >= 4 else -1
    if op == 0:
        return struct.pack(">h", rng.choice(_SHARE_RECORD_TYPES)) + key[2:]
    if op == 1 and len(key) >= 4:
        return key[:2] + struct.pack(">h", extreme(rng, 16)) + key[4:]
    if op == 2 and 0 <= glen and len(key) >= 20 + glen:
        tid = rng.choice((bytes(16), b"\xff" * 16, bytes(rng.randrange(256) for _ in range(16))))
        return key[: 4 + glen] + tid + key[20 + glen :]
    if op == 3 and len(key) >= 4:
        return key[:-4] + struct.pack(">i", extreme(rng, 32))
    if op == 4:
        return key[: rng.randrange(len(key) + 1)]
    if op == 5:
        return key + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return poke(rng, key)


def share_kv_mutator(rng, key, value):
    """(key, value) of a ``__share_group_state`` record with one structural edit of either (the value read
    as its key's record type says)."""
    if rng.random() < 0.3:
        return mutate_share_key(rng, key), value
    rtype = struct.unpack_from(">h", key)[0] if key is not None and len(key) >= 2 else 0
    return key, mutate_share_value(rng, value, rtype)


# =========================================================================== segment mutator


def _bomb(codec: int, kind: str, size: int, legacy_magic: int | None = None) -> tuple[bytes, int]:
    """(compressed block, record count) of a records block of ``size`` bytes that compresses well:
    zeros, or the smallest valid record (or legacy message) repeated.  Built once per process, and
    compressed in 1 MiB pieces, so the mutator never holds the inflated bytes."""
    key = (codec, kind, size, legacy_magic)
    if key in _BOMBS:
        return _BOMBS[key]
    if kind == "zeros":
        unit = bytes(1)
    elif legacy_magic is None:
        unit = zigzag(6, 32) + minimal_record(0)
    else:
        unit = legacy_message(legacy_magic, 0, 0, None, b"")
    reps = max(size // len(unit), 1)
    count = reps if kind != "zeros" else size // 7
    piece_reps = max((1 << 20) // len(unit), 1)
    piece = unit * piece_reps

    def pieces():  # the same 1 MiB piece again and again: never the whole block in memory
        for i in range(0, reps, piece_reps):
            yield piece if reps - i >= piece_reps else unit * (reps - i)

    if codec == 1:
        z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        block = b"".join(z.compress(p) for p in pieces()) + z.flush()
    elif codec == 3 and legacy_magic != 0:
        import lz4.frame

        c = lz4.frame.LZ4FrameCompressor()
        block = c.begin() + b"".join(c.compress(p) for p in pieces()) + c.flush()
    elif codec == 4:
        import zstandard

        c = zstandard.ZstdCompressor().compressobj()
        block = b"".join(c.compress(p) for p in pieces()) + c.flush()
    else:  # snappy (bounded to a few MiB by the callers) and magic-0 lz4: whole
        block = compress(codec, b"".join(pieces()), None, legacy_magic)
    _BOMBS[key] = (block, count)
    return _BOMBS[key]


_BOMBS: dict = {}


def _mutate_records(
    rng: random.Random, plain: bytes, kv: KVMutate, byte_mutate: ByteMutate, max_size: int
) -> tuple[bytes, int | None]:
    """Edit an uncompressed v2 records block; returns it and its new record count (None: unknown)."""
    bodies, tail = split_records(plain)
    op = rng.randrange(10)
    if not bodies or op == 0:
        return byte_mutate(plain, max(len(plain) * 2, 64)), None
    i = rng.randrange(len(bodies))
    f = parse_record(bodies[i])
    if op in (1, 2, 3) and f is not None:  # key / value through the format-aware mutator
        f[3], f[4] = kv(rng, f[3], f[4])
        bodies[i] = build_record(f)
    elif op == 4 and f is not None:  # a numeric field of the record at an extreme
        j = rng.randrange(4)
        if j == 0:
            f[0] = extreme(rng, 8)
        elif j == 1:
            f[1] = extreme(rng, 64)
        elif j == 2:
            f[2] = extreme(rng, 32)
        else:
            f[5] = extreme_varint(rng) + f[5][1:]
        bodies[i] = build_record(f)
    elif op == 5:  # a length varint (record, key or value) at an extreme: framing must catch it
        raw = join_records(bodies[:i]) + extreme_varint(rng) + bodies[i] + join_records(bodies[i + 1 :], tail)
        return raw, len(bodies)
    elif op == 6 and f is not None:  # key/value length lies, bytes stay
        key_len_pos = 1 + len(zigzag(f[1], 64)) + len(zigzag(f[2], 32))
        b = bodies[i]
        bodies[i] = b[:key_len_pos] + extreme_varint(rng) + b[key_len_pos + 1 :]
    elif op == 7:  # many copies of a record (a batch of many records)
        k = rng.choice((2, 10, 100, 1000, max(1, max_size // max(len(bodies[i]) + 1, 1))))
        bodies[i : i + 1] = [bodies[i]] * k
    elif op == 8 and len(bodies) > 1:
        del bodies[i]
    else:
        bodies[i] = byte_mutate(bodies[i], len(bodies[i]) + 16)
    return join_records(bodies, tail), len(bodies)


def _mutate_v2(rng: random.Random, e: bytearray, kv: KVMutate, byte_mutate: ByteMutate, max_size: int) -> bytearray:
    if len(e) < BATCH_HEADER_SIZE:
        return fix_entry(bytearray(byte_mutate(bytes(e), len(e) + 8)))
    hdr = list(_V2_HEADER.unpack_from(e, 0))
    codec = hdr[5] & 7
    op = rng.randrange(10)
    if op <= 2:  # a header field at an extreme, CRC fixed so the field is what is checked
        j = rng.choice((0, 1, 2, 3, 5, 5, 6, 6, 7, 8, 9, 10, 11, 12, 12, 12))
        bits = {"q": 64, "i": 32, "b": 8, "h": 16, "I": 32}[_V2_FMT[j]]
        v = extreme(rng, bits)
        if j == 5 and rng.random() < 0.7:  # attributes: codec, timestamp type, transactional, control
            v = rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 0x08, 0x10, 0x20, 0x30, 0x40, 0x7FFF)) | (
                hdr[5] & ~7 if rng.random() < 0.5 else 0
            )
        if j == 3:
            v = rng.choice((0, 1, 3, 0x7F, -1, -128))
        hdr[j] = v
        e[:BATCH_HEADER_SIZE] = _pack_header(hdr)
        return fix_entry(e, length=(j != 1))
    payload = bytes(e[BATCH_HEADER_SIZE:])
    if op == 3 and codec:  # the compressed bytes themselves
        payload = byte_mutate(payload, len(payload) + 64)
        return fix_entry(bytearray(e[:BATCH_HEADER_SIZE] + payload))
    if op == 4:  # compress (or recompress) the records with another codec
        plain = payload if codec == 0 else _decompress_for_mutation(codec, payload)
        if plain is None:
            return e
        new = rng.choice((1, 2, 3, 4))
        hdr[5] = (hdr[5] & ~7) | new
        e2 = bytearray(_pack_header(hdr)) + compress(new, plain, rng)
        return fix_entry(e2)
    if op == 5 and rng.random() < 0.3:  # a block that inflates to many tiny records (or zeros)
        new = rng.choice((1, 2, 3, 4))
        size = rng.choice((1 << 20, 16 << 20, 80 << 20)) if new != 2 else rng.choice((1 << 20, 8 << 20))
        block, count = _bomb(new, rng.choice(("tiny", "tiny", "zeros")), size)
        hdr[5] = (hdr[5] & ~7) | new
        hdr[12] = count if rng.random() < 0.8 else extreme(rng, 32)
        hdr[6] = max(min(count, 1 << 31) - 1, 0)
        return fix_entry(bytearray(_pack_header(hdr)) + block)
    plain = payload if codec == 0 else _decompress_for_mutation(codec, payload)
    if plain is None:
        return fix_entry(bytearray(e[:BATCH_HEADER_SIZE] + byte_mutate(payload, len(payload) + 64)))
    plain, count = _mutate_records(rng, plain, kv, byte_mutate, max_size)
    if count is not None and rng.random() < 0.8:
        hdr[12] = _wrap(count, 32)
        hdr[6] = _wrap(max(count - 1, 0), 32)
    block = compress(codec, plain, rng) if codec in (1, 2, 3, 4) else plain
    return fix_entry(bytearray(_pack_header(hdr)) + block)


def _pack_header(hdr: list) -> bytes:
    """The 61-byte v2 header of ``hdr`` (values wrapped to their field widths)."""
    bits = {"q": 64, "i": 32, "b": 8, "h": 16}
    return _V2_HEADER.pack(*[x & 0xFFFFFFFF if c == "I" else _wrap(x, bits[c]) for x, c in zip(hdr, _V2_FMT)])


def _legacy_fields(e: bytearray):
    """(magic, attrs, timestamp, key, value, ok) of a legacy entry."""
    if len(e) < 18:
        return 0, 0, -1, None, None, False
    magic, attrs = e[16], e[17]
    pos = 18 + (8 if magic == 1 else 0)
    ts = struct.unpack_from(">q", e, 18)[0] if magic == 1 and len(e) >= 26 else -1
    out = []
    for _ in range(2):
        if pos + 4 > len(e):
            return magic, attrs, ts, None, None, False
        ln = struct.unpack_from(">i", e, pos)[0]
        pos += 4
        if ln < 0:
            out.append(None)
        else:
            if pos + ln > len(e):
                return magic, attrs, ts, None, None, False
            out.append(bytes(e[pos : pos + ln]))
            pos += ln
    return magic, attrs, ts, out[0], out[1], pos == len(e)


def _mutate_legacy(
    rng: random.Random, e: bytearray, kv: KVMutate, byte_mutate: ByteMutate, max_size: int, depth: int = 0
) -> bytearray:
    offset = struct.unpack_from(">q", e, 0)[0]
    magic, attrs, ts, key, value, ok = _legacy_fields(e)
    op = rng.randrange(8)
    if not ok or op == 0:
        return fix_entry(bytearray(e[:16]) + bytearray(byte_mutate(bytes(e[16:]), len(e) + 16)))
    codec = attrs & 7
    if op == 1:  # offset, attributes, magic or timestamp at an extreme
        j = rng.randrange(4)
        if j == 0:
            offset = extreme(rng, 64)
        elif j == 1:
            attrs = rng.choice((0, 1, 2, 3, 4, 5, 7, 8, 9, 0x10, 0x80, 0xFF))
        elif j == 2:
            magic = rng.choice((0, 1))
        else:
            ts = extreme(rng, 64)
        return bytearray(legacy_message(magic, attrs, offset, key, value, ts))
    if codec in (1, 2, 3) and value is not None and depth == 0:
        if op == 2 and rng.random() < 0.3:  # a wrapper inflating to many tiny messages
            big = codec != 2 and not (codec == 3 and magic == 0)
            block, _count = _bomb(
                codec,
                rng.choice(("tiny", "zeros")),
                rng.choice((1 << 20, 16 << 20, 80 << 20)) if big else 8 << 20,
                magic,
            )
            return bytearray(legacy_message(magic, attrs, offset, key, block, ts))
        if op in (2, 3, 4, 5):
            inner = _decompress_for_mutation(codec, value, magic)
            if inner is not None:
                inner = mutate_chain(rng, inner, kv, byte_mutate, max_size, depth + 1)
                return bytearray(legacy_message(magic, attrs, offset, key, compress(codec, inner, rng, magic), ts))
        return bytearray(legacy_message(magic, attrs, offset, key, byte_mutate(value, len(value) + 32), ts))
    if op in (2, 3, 4, 5):
        key, value = kv(rng, key, value)
    elif op == 6:  # a key or value length that lies, CRC fixed
        b = bytearray(legacy_message(magic, attrs, offset, key, value, ts))
        at = 18 + (8 if magic == 1 else 0)
        if rng.random() < 0.5 and key is not None:
            at += 4 + len(key)
        b[at : at + 4] = struct.pack(">i", extreme(rng, 32))
        return fix_entry(b)
    else:
        value = byte_mutate(value or b"", len(value or b"") + 16)
    return bytearray(legacy_message(magic, attrs, offset, key, value, ts))


def mutate_chain(
    rng: random.Random,
    buf: bytes,
    kv: KVMutate,
    byte_mutate: ByteMutate,
    max_size: int,
    depth: int = 0,
    other: bytes | None = None,
) -> bytes:
    """One structure-aware edit of a segment (a chain of v2 batches and/or legacy messages), at most
    ``max_size`` bytes: bytes of one entry with its CRC (and length) recomputed, a header field, record
    or key/value at an extreme (:func:`_mutate_v2`, :func:`_mutate_legacy`; ``kv`` edits keys and values;
    ``depth`` > 0 inside a legacy wrapper), a length field at an extreme, entries duplicated, dropped,
    swapped or spliced from ``other``, the segment cut short or padded with zeros, or plain
    ``byte_mutate``."""
    entries, tail = split_chain(buf)
    r = rng.random()
    if not entries or r < 0.12:
        return byte_mutate(buf, max_size)
    i = rng.randrange(len(entries))
    if r < 0.22:  # bytes of one entry, then CRC (and length) fixed: corruption behind the CRC
        e = entries[i]
        start = rng.choice((12, 16, 17, 21, BATCH_HEADER_SIZE)) if len(e) > BATCH_HEADER_SIZE else 12
        e2 = bytearray(e[:start]) + bytearray(byte_mutate(bytes(e[start:]), len(e) + 64))
        entries[i] = fix_entry(e2, length=rng.random() < 0.9)
    elif r < 0.75:
        e = entries[i]
        if e[16] == 2:
            entries[i] = _mutate_v2(rng, e, kv, byte_mutate, max_size)
        elif e[16] in (0, 1):
            entries[i] = _mutate_legacy(rng, e, kv, byte_mutate, max_size, depth)
        else:
            entries[i] = fix_entry(bytearray(byte_mutate(bytes(e), len(e) + 8)))
    elif r < 0.80:  # the length field at an extreme (CRC untouched)
        entries[i][8:12] = struct.pack(">i", extreme(rng, 32))
    elif r < 0.85:
        entries.insert(rng.randrange(len(entries) + 1), bytearray(entries[i]))
    elif r < 0.88 and len(entries) > 1:
        del entries[i]
    elif r < 0.91 and len(entries) > 1:
        j = rng.randrange(len(entries))
        entries[i], entries[j] = entries[j], entries[i]
    elif r < 0.94:  # splice an entry of another input
        o, _ = split_chain(other) if other else ([], b"")
        if o:
            entries.insert(rng.randrange(len(entries) + 1), rng.choice(o))
    elif r < 0.97:  # cut the segment short, or end it with preallocated zeros
        out = b"".join(entries) + tail
        return out[: rng.randrange(len(out) + 1)] if rng.random() < 0.6 else out + bytes(rng.choice((1, 17, 64, 4096)))
    else:
        tail = byte_mutate(tail, len(tail) + 64)
    out = b"".join(entries) + tail
    return out[:max_size]


# =========================================================================== per-format mutators


def _rng(seed: int) -> random.Random:
    return random.Random(seed)


def segment_mutator(kv: KVMutate) -> Callable:
    """A libFuzzer custom mutator ``(data, max_size, seed[, byte_mutate]) -> bytes`` for segment inputs:
    :func:`mutate_chain` with the record key/value mutator ``kv``."""

    def mutate(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate) -> bytes:
        return mutate_chain(_rng(seed), data, kv, byte_mutate, max_size)

    return mutate


def index_container_mutator(
    data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate
) -> bytes:
    """Custom mutator of ``tail_scan_index`` inputs: the index (:func:`mutate_index`), the segment base
    offset or the segment (:func:`mutate_chain`), keeping :func:`split_index_container`'s layout."""
    rng = _rng(seed)
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
            entry = struct.pack(">ii", _wrap(rel, 32), _wrap(p, 32))
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


def index_mutator(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate) -> bytes:
    """Custom mutator of ``index_file`` inputs: :func:`mutate_index` against :func:`index_segment`."""
    rng = _rng(seed)
    if rng.random() < 0.15:
        return byte_mutate(data, max_size)
    return mutate_index(rng, data, index_segment()[0], byte_mutate)[:max_size]


def codec_mutator(codec: int) -> Callable:
    """Custom mutator of a codec harness's inputs (:func:`split_codec_container`): the compressed stream
    itself, the record count or container, a block inflating to many tiny records, or the records inside
    (decompressed, edited with :func:`_mutate_records` or :func:`mutate_chain`, compressed again)."""

    def mutate(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate) -> bytes:
        rng = _rng(seed)
        container, count, payload = split_codec_container(data)
        r = rng.random()
        legacy_magic = None if container == 0 else 2 - container
        if r < 0.10:
            return byte_mutate(data, max_size)
        if r < 0.25:  # the compressed stream itself: frame headers, block sizes, checksums
            payload = byte_mutate(payload, max(max_size - 5, 0))
        elif r < 0.32:
            count = extreme(rng, 32)
        elif r < 0.36:
            container = rng.randrange(3)
        elif r < 0.42:  # a block inflating to many tiny records
            legacy_magic = None if container == 0 else 2 - container
            big = codec != 2 and not (codec == 3 and legacy_magic == 0)
            size = rng.choice((1 << 20, 16 << 20, 80 << 20)) if big else rng.choice((1 << 20, 8 << 20))
            payload, n = _bomb(codec, rng.choice(("tiny", "tiny", "zeros")), size, legacy_magic)
            count = n if rng.random() < 0.8 else extreme(rng, 32)
        else:  # the records inside, then compressed again
            plain = _decompress_for_mutation(codec, payload, legacy_magic)
            if plain is None:
                payload = byte_mutate(payload, max(max_size - 5, 0))
            elif legacy_magic is None:
                plain, n = _mutate_records(rng, plain, offsets_kv_mutator, byte_mutate, max_size)
                if n is not None and rng.random() < 0.8:
                    count = n
                payload = compress(codec, plain, rng)
            else:
                plain = mutate_chain(rng, plain, offsets_kv_mutator, byte_mutate, max_size, depth=1)
                payload = compress(codec, plain, rng, legacy_magic)
        return join_codec_container(container, count, payload)[:max_size]

    return mutate


def kv_records_mutator(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate) -> bytes:
    """Custom mutator of ``offsets_records`` inputs (:func:`split_kv_records`): one record's key or value
    edited structurally, a record duplicated or dropped, or a value's bytes mutated."""
    return _kv_records_mutate(offsets_kv_mutator, data, max_size, seed, byte_mutate)


def _kv_records_mutate(kv: KVMutate, data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate) -> bytes:
    rng = _rng(seed)
    recs = split_kv_records(data)
    r = rng.random()
    if not recs or r < 0.1:
        return byte_mutate(data, max_size)
    i = rng.randrange(len(recs))
    if r < 0.8:
        recs[i] = kv(rng, *recs[i])
    elif r < 0.88:
        recs.insert(rng.randrange(len(recs) + 1), recs[i])
    elif r < 0.94 and len(recs) > 1:
        del recs[i]
    else:
        k, v = recs[i]
        recs[i] = (k, None if v is None else byte_mutate(v, len(v) + 32))
    return join_kv_records(recs)[:max_size]


def share_records_mutator(
    data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate
) -> bytes:
    """Custom mutator of ``share_state_records`` inputs (:func:`split_kv_records`): as
    :func:`kv_records_mutator`, records edited with :func:`share_kv_mutator`."""
    return _kv_records_mutate(share_kv_mutator, data, max_size, seed, byte_mutate)


def _share_value_edit(rng: random.Random, data: bytes) -> bytes:
    """``share_state_value`` input (:func:`split_share_value`): the record type (unknown ones too) or the value
    (:func:`mutate_share_value`, read as that record type's)."""
    rtype, value = split_share_value(data)
    if rng.random() < 0.1:
        return join_share_value(rng.choice(_SHARE_RECORD_TYPES), value)
    return join_share_value(rtype, mutate_share_value(rng, value, rtype, tombstones=False) or b"")


def value_mutator(fn: Callable) -> Callable:
    """Custom mutator of single-value inputs: ``fn(rng, value)`` (a structural edit) or a byte mutation."""

    def mutate(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate) -> bytes:
        rng = _rng(seed)
        if rng.random() < 0.25:
            return byte_mutate(data, max_size)
        out = fn(rng, data)
        return (out if out is not None else b"")[:max_size]

    return mutate


def _group_value_edit(rng: random.Random, value: bytes) -> bytes:
    """GroupMetadataValue: version, string lengths (int16 or compact), generation, member count."""
    if len(value) < 2:
        return poke(rng, value)
    op = rng.randrange(4)
    if op == 0:
        return struct.pack(">h", rng.choice((0, 1, 2, 3, 4, 5, -1, 0x7FFF))) + value[2:]
    return poke(rng, value, 2)


_TOKENS = (
    "0",
    "1",
    "-1",
    "+1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "1_0",
    "\u0663",
    "\uff11",
    "1e3",
    "0x10",
    "",
    " ",
    "\t",
    "\x00",
    "nan",
    "9" * 5000,
    "-" + "9" * 30,
    "__consumer_offsets",
    "a b",
    "\u2028",
    "=",
    "node.id",
    "broker.id",
)
_SEPS = (" ", "\t", "  ", "\x0b", "\x0c", "\r", "\u00a0", "\u3000")
_NEWLINES = ("\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028")


def text_mutator(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = _simple_byte_mutate) -> bytes:
    """Line- and token-aware edit of a checkpoint or properties file: a number at an extreme or in
    another script, a wrong entry count, other whitespace and line breaks, many lines."""
    rng = _rng(seed)
    if rng.random() < 0.15:
        return byte_mutate(data, max_size)
    lines = data.decode("utf-8", "replace").split("\n")
    i = rng.randrange(len(lines))
    op = rng.randrange(8)
    if op <= 2:
        toks = lines[i].split(" ") if " " in lines[i] else lines[i].split("=")
        sep = " " if " " in lines[i] else "="
        j = rng.randrange(len(toks))
        toks[j] = rng.choice(_TOKENS)
        lines[i] = sep.join(toks)
    elif op == 3:
        lines[i] = lines[i].replace(" ", rng.choice(_SEPS), 1)
    elif op == 4:
        sep = rng.choice(_NEWLINES)
        return (sep.join(lines).encode("utf-8", "surrogatepass"))[:max_size]
    elif op == 5:  # many entries (bounded by max_size)
        k = min(rng.choice((2, 10, 1000, 50000)), max(max_size // (len(lines[i]) + 1), 1))
        lines[i : i + 1] = [lines[i]] * k
    elif op == 6 and len(lines) > 1:
        lines[1] = rng.choice(_TOKENS)
    else:
        del lines[i]
    return "\n".join(lines).encode("utf-8", "surrogatepass")[:max_size]


# =========================================================================== seeds


def _files(pattern: str) -> list[Path]:
    roots = [SHARED_DATA, REPO / "tests/data"]
    out = []
    for root in roots:
        out.extend(sorted(p for p in root.glob(pattern) if p.is_file()))
    return out


def _trim(buf: bytes, limit: int) -> bytes:
    """The leading whole batches of a segment, at most ``limit`` bytes (at least one batch)."""
    entries, _ = split_chain(buf)
    out = bytearray()
    for e in entries:
        if out and len(out) + len(e) > limit:
            break
        out += e
    return bytes(out) if out else buf[:limit]


def _dedup(seeds: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    seen, out = set(), []
    for name, b in seeds:
        if b not in seen:
            seen.add(b)
            out.append((name, b))
    return out


def _rel(p: Path) -> str:
    for root in (SHARED_DATA, REPO):
        try:
            return str(p.relative_to(root)).replace("/", "__")
        except ValueError:
            pass
    return p.name


def _offsets_segments(limit: int) -> list[tuple[str, bytes]]:
    return _dedup(
        [(_rel(p), _trim(p.read_bytes(), limit)) for p in _files("**/__consumer_offsets-*/*.log") if p.stat().st_size]
    )


def _metadata_segments(limit: int) -> list[tuple[str, bytes]]:
    return _dedup(
        [(_rel(p), _trim(p.read_bytes(), limit)) for p in _files("**/__cluster_metadata-*/*.log") if p.stat().st_size]
    )


def _user_segments(limit: int) -> list[tuple[str, bytes]]:
    return _dedup(
        [
            (_rel(p), _trim(p.read_bytes(), limit))
            for p in _files("**/*-[0-9]*/*.log")
            if p.stat().st_size and "__" not in p.parent.name
        ]
    )


def _real_records(
    kind: str = "offsets", limit: int = 400, per_kind: int = 40
) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, batch attributes) of distinct real records, at most ``per_kind`` per (key type,
    value version) so rare record types are not crowded out."""
    segs = _offsets_segments(1 << 30) if kind == "offsets" else _metadata_segments(1 << 30)
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


def _v2_payloads(limit: int = 24) -> list[tuple[bytes, int]]:
    """(uncompressed records block, record count) of real __consumer_offsets batches."""
    out = []
    for _name, buf in _offsets_segments(1 << 30):
        for e in split_chain(buf)[0][:4]:
            if e[16] == 2 and len(e) > BATCH_HEADER_SIZE and not e[22] & 0x27:  # uncompressed, not control
                out.append((bytes(e[BATCH_HEADER_SIZE:]), struct.unpack_from(">i", e, 57)[0]))
            if len(out) >= limit:
                return out
    return out


def _legacy_sets() -> list[tuple[str, bytes]]:
    """Legacy message sets (magic 0 and 1, uncompressed and gzip/snappy/lz4 wrappers) holding real
    ``__consumer_offsets`` keys and values, with the offsets a broker assigns."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    recs = [(k, v) for k, v, _a in _real_records("offsets", 60) if k is not None][:40]
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


def _codec_seeds(codec: int) -> list[tuple[str, bytes]]:
    out = []
    for i, (plain, count) in enumerate(_v2_payloads(12)):
        out.append((f"v2-{i}", join_codec_container(0, count, compress(codec, plain))))
    if codec != 4:
        recs = [(k, v) for k, v, _a in _real_records("offsets", 40) if k is not None][:12]
        for magic in (0, 1):
            for start in (0, 6):
                inner = b"".join(
                    legacy_message(magic, 0, i if magic == 1 else 100 + i, k, v)
                    for i, (k, v) in enumerate(recs[start : start + 6])
                )
                out.append(
                    (f"magic{magic}-{start}", join_codec_container(2 - magic, 6, compress(codec, inner, None, magic)))
                )
    return out


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
    real = [(k, v) for k, v, _a in _real_records("offsets", 400)]
    for i in range(0, len(real), 16):
        out.append((f"real-{i}", join_kv_records(real[i : i + 16])))
    return _dedup(out)


def _group_values() -> list[tuple[str, bytes]]:
    vals = [v for k, v, _a in _real_records("offsets", 400) if k and k[:2] == b"\x00\x02" and v]
    return _dedup([(f"group-{i}", v) for i, v in enumerate(vals)])


def _metadata_values() -> list[tuple[str, bytes]]:
    out, seen = [], set()
    for _k, v, attrs in _real_records("metadata", 5000):
        if v is None or attrs & 0x20:
            continue
        sig = v[:3]
        if sig in seen:
            continue
        seen.add(sig)
        out.append((f"api{v[1]}-v{v[2]}-{len(out)}", v))
    return out


def _index_pairs() -> list[tuple[str, bytes]]:
    out = []
    for idx in _files("**/*.index"):
        log = idx.with_suffix(".log")
        if idx.stat().st_size and log.exists() and log.stat().st_size <= 200_000:
            out.append((_rel(idx), join_index_container(idx.read_bytes(), int(idx.name[:20]), log.read_bytes())))
    return _dedup(out)


def _text_files(names: tuple[str, ...]) -> list[tuple[str, bytes]]:
    out = []
    for name in names:
        out.extend((_rel(p), p.read_bytes()) for p in _files(f"**/{name}"))
    return _dedup(out)


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


def _share_records() -> list[tuple[str, bytes | None, bytes | None]]:
    """``(label, key, value)`` of ``__share_group_state`` records built field by field per Kafka's
    ShareSnapshotKey/Value and ShareUpdateKey/Value schemas: what the share coordinator writes over a
    share-partition's life (an initial snapshot, updates of 0-3 batches with DeliveryCompleteCount, snapshots),
    0, 1, 126, 127 and 200 state batches (the StateBatches count takes a second varint byte from 127), tagged
    fields (DeliveryCompleteCount, unknown tags in a batch and in the value), tombstones, the Kafka 4.0 layout,
    then what must become a ``decode_error``: other record types and value versions, cut keys and values."""
    rng = random.Random(932)
    tid2 = bytes(rng.randrange(256) for _ in range(16))
    out: list[tuple[str, bytes | None, bytes | None]] = []

    def add(label, rtype, value, group="share-g", partition=0, tid=SHARE_TOPIC_ID):
        out.append((label, share_key(rtype, group, tid, partition), value))

    # one share-partition's life, as the coordinator writes it (lab: Kafka 4.4)
    add("snapshot-initial", 0, ShareValue(True, state_epoch=2, start_offset=-1).encode())
    add(
        "update-1-batch-dcc",
        1,
        ShareValue(False, start_offset=0, batches=[[0, 2, 2, 1, b"\x00"]], tags=[dcc_tag(3)]).encode(),
    )
    b3 = [[0, 3, 2, 1, b"\x00"], [4, 28, 0, 1, b"\x00"], [29, 30, 2, 1, b"\x00"]]
    add("update-3-batches-dcc", 1, ShareValue(False, start_offset=0, batches=b3, tags=[dcc_tag(6)]).encode())
    add("update-unchanged", 1, ShareValue(False, leader_epoch=-1, start_offset=-1, batches=b3[1:2]).encode())
    add(
        "update-archived",
        1,
        ShareValue(False, start_offset=31, batches=[[31, 40, 4, 5, b"\x00"]], tags=[dcc_tag(10)]).encode(),
    )
    add(
        "snapshot-dcc-0",
        0,
        ShareValue(True, snapshot_epoch=1, state_epoch=2, start_offset=41, tags=[dcc_tag(0)]).encode(),
    )
    for n in (0, 1, 126, 127, 200):
        bs = share_batches(rng, n, 1000)
        add(
            f"snapshot-{n}-batches", 0, ShareValue(True, 3, 2, 5, 1000, batches=bs, tags=[dcc_tag(n)]).encode(), "g2", 1
        )
        add(
            f"update-{n}-batches",
            1,
            ShareValue(False, 3, leader_epoch=5, start_offset=1000, batches=bs).encode(),
            "g2",
            1,
        )
        add(
            f"snapshot-4.0-{n}-batches",
            0,
            ShareValue(True, 65535, 1, 0, 1000, batches=bs, layout="4.0").encode(),
            "g3",
            2,
            tid2,
        )
    add(
        "update-4.0",
        1,
        ShareValue(False, 7, leader_epoch=0, start_offset=5, batches=b3, layout="4.0").encode(),
        "g3",
        2,
        tid2,
    )
    ub = [list(b) for b in b3]
    ub[1][4] = b"\x01\x07\x01\x00"  # an unknown tagged field in a batch: skipped
    add("update-batch-unknown-tag", 1, ShareValue(False, start_offset=0, batches=ub, tags=[dcc_tag(6)]).encode())
    tags = [dcc_tag(5), (1, b"\x00\x01"), (9, b"")]
    add("snapshot-unknown-tags", 0, ShareValue(True, state_epoch=2, start_offset=0, batches=b3, tags=tags).encode())
    add("snapshot-timestamps-unset", 0, ShareValue(True, create_timestamp=-1, write_timestamp=-1).encode())
    out.append(("tombstone", share_key(0, "share-g"), None))
    out.append(("tombstone-update", share_key(1, "g2", partition=1), None))
    add("group-unicode", 1, ShareValue(False, start_offset=0, batches=b3[:1]).encode(), "gruppe-\u00fc", 49)
    add("group-long", 0, ShareValue(True, start_offset=-1).encode(), "s" * 249, 0x7FFFFFFF)
    add("group-empty", 0, ShareValue(True, start_offset=-1).encode(), "", 0)
    # what must become a decode_error
    add("unknown-record-type-2", 2, ShareValue(False, start_offset=0, batches=b3).encode())
    add("unknown-record-type-7fff", 0x7FFF, ShareValue(True).encode())
    add("unknown-value-version-1", 0, ShareValue(True, version=1).encode())
    add("dcc-wrong-size", 1, ShareValue(False, batches=b3, tags=[(0, b"\x00\x00\x07")]).encode())
    add("null-state-batches", 1, ShareValue(False, batch_count=b"\x00").encode())
    add("bytes-after-value", 1, ShareValue(False, batches=b3, trailing=b"\x00").encode())
    big = ShareValue(True, 3, 2, 5, 1000, batches=share_batches(rng, 200, 1000)).encode()
    add("snapshot-200-cut-mid-batch", 0, big[: 38 + 2 + 20 * 100 + 7])
    add("snapshot-200-cut-in-last-batch", 0, big[:-5])
    add("snapshot-cut-in-head", 0, big[:21])
    add("update-cut-in-tags", 1, ShareValue(False, batches=b3, tags=[dcc_tag(6)]).encode()[:-2])
    add("value-1-byte", 1, b"\x00")
    out.append(("key-cut", share_key(1, "share-g")[:-1], ShareValue(False).encode()))
    out.append(("key-1-byte", b"\x00", ShareValue(False).encode()))
    out.append(("null-key", None, ShareValue(False).encode()))
    return out


def _share_kv_seeds() -> list[tuple[str, bytes]]:
    """Records of :func:`_share_records` in ``share_state_records`` inputs: six mixes of every kind (each
    record in one), all of them in one input, and each value of over 2,000 bytes alone."""
    recs = _share_records()
    out = [(f"mix-{j}", join_kv_records([(k, v) for _l, k, v in recs[j::6]])) for j in range(6)]
    out.append(("all", join_kv_records([(k, v) for _l, k, v in recs])))
    out += [(label, join_kv_records([(k, v)])) for label, k, v in recs if v is not None and len(v) > 2000]
    return _dedup(out)


def _share_values() -> list[tuple[str, bytes]]:
    out = []
    for label, k, v in _share_records():
        if v is None:
            continue
        rtype = struct.unpack_from(">h", k)[0] if k is not None and len(k) >= 2 else 1
        out.append((label, join_share_value(rtype, v)))
    out.append(("snapshot-as-update", join_share_value(1, ShareValue(True, state_epoch=2, start_offset=0).encode())))
    out.append(("unknown-record-type--1", join_share_value(-1, ShareValue(False, start_offset=0).encode())))
    return _dedup(out)


def _cstr(x: str | None) -> bytes:
    """A compact (nullable) string of the flexible versions."""
    return b"\x00" if x is None else uvarint(len(x.encode()) + 1) + x.encode()


def _carray(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _task_ids(tasks: list[tuple[str, list[int]]]) -> bytes:
    """``[]TaskIds`` of ``StreamsGroupCurrentMemberAssignmentValue.json``: SubtopologyId, Partitions, tags."""
    return _carray([_cstr(sub) + _carray([struct.pack(">i", x) for x in ps]) + b"\x00" for sub, ps in tasks])


def _topic_infos(names: list[str]) -> bytes:
    """``[]TopicInfo`` of ``StreamsGroupTopologyValue.json``: Name, Partitions, ReplicationFactor, TopicConfigs."""
    configs = _carray([_cstr("cleanup.policy") + _cstr("compact") + b"\x00"])
    return _carray([_cstr(n) + struct.pack(">ih", 0, -1) + configs + b"\x00" for n in names])


#: One ``CopartitionGroup``: SourceTopics [0], SourceTopicRegex [], RepartitionSourceTopics [1] (int16 indexes), tags.
_COPARTITION = _carray([struct.pack(">h", 0)]) + _carray([]) + _carray([struct.pack(">h", 1)]) + b"\x00"


def _streams_values() -> list[tuple[str, bytes]]:
    """Streams group values (types 19, 22, 23) laid out per their schema files of Kafka 4.1-4.4."""
    out = []
    for i, (instance, process) in enumerate([(None, "0b2c6a52-2d0e-4a51-9d2b-5f7c3d1e8a90"), ("inst-1", "p")]):
        member = (
            struct.pack(">h", 0) + _cstr(instance) + _cstr("rack-a" if i else None) + _cstr(f"app-{i}-StreamThread-1")
        )
        member += _cstr("/127.0.0.1") + struct.pack(">ii", 300000, 1 + i) + _cstr(process)
        member += (b"\x01" + _cstr("localhost") + struct.pack(">H", 8080) + b"\x00") if i else b"\xff"
        member += _carray([_cstr("az") + _cstr("1") + b"\x00"] if i else []) + b"\x00"
        out.append((f"streams-member-{i}", join_group_record(19, member)))
    for i, active in enumerate([[("0", [0, 2]), ("1", [1])], [], [("0", list(range(64)))]]):
        a = struct.pack(">hiib", 0, 7 + i, 6 + i, 1 + i % 3) + _task_ids(active) + _task_ids([("1", [0])])
        a += _task_ids([]) * 4 + b"\x00"
        out.append((f"streams-assignment-{i}", join_group_record(22, a)))
    sub0 = _cstr("0") + _carray([_cstr("in")]) + _carray([]) + _topic_infos(["app-store-changelog"])
    sub0 += _carray([_cstr("app-rep")]) + _topic_infos([]) + _carray([_COPARTITION]) + b"\x00"
    sub1 = _cstr("1") + _carray([]) + _carray([_cstr("re.*")]) + _topic_infos([]) + _carray([])
    sub1 += _topic_infos(["app-rep"]) + _carray([]) + b"\x00"
    out.append(("streams-topology", join_group_record(23, struct.pack(">hi", 0, 3) + _carray([sub0, sub1]) + b"\x00")))
    out.append(("streams-topology-empty", join_group_record(23, struct.pack(">hi", 0, 0) + _carray([]) + b"\x00")))
    return out


def _group_record_values() -> list[tuple[str, bytes]]:
    """``group_record_value`` seeds: the real KIP-848 and share group member and assignment values Kafka 4.4.0
    wrote (``tests/data/kafka-4.4.0``), streams group values per their schema files, and a share member subscribed
    to many topics."""
    out: list[tuple[str, bytes]] = []
    for k, v, _a in _real_records("offsets", 2000, per_kind=8):
        if k is not None and v is not None and len(k) >= 2 and struct.unpack_from(">h", k)[0] in GROUP_RECORD_TYPES:
            rtype = struct.unpack_from(">h", k)[0]
            out.append((f"real-type-{rtype}-{len(out)}", join_group_record(rtype, v)))
    share = struct.pack(">h", 0) + _cstr(None) + _cstr("c-1") + _cstr("/10.0.0.7")
    share += _carray([_cstr(f"topic-{i}") for i in range(40)]) + b"\x00"
    out.append(("share-member-40-topics", join_group_record(10, share)))
    return _dedup(out + _streams_values())


def _group_record_edit(rng: random.Random, data: bytes) -> bytes:
    """``group_record_value`` input (:func:`split_group_record`): another record type for the same value, the
    version, a cut, or an extreme integer in the value."""
    record_type, value = split_group_record(data)
    op = rng.randrange(8)
    if op == 0:
        return join_group_record(rng.choice(GROUP_RECORD_TYPES), value)
    if op == 1 and len(value) >= 2:
        return join_group_record(record_type, struct.pack(">h", rng.choice((0, 1, -1, 0x7FFF))) + value[2:])
    if op == 2 and value:
        return join_group_record(record_type, value[: rng.randrange(len(value))])
    return join_group_record(record_type, poke(rng, value, 2))


def _share_block(records: list[tuple[bytes | None, bytes | None]], ts: int = 1_700_000_000_000) -> bytes:
    """An uncompressed v2 records block of ``(key, value)`` (offset deltas 0.., no headers)."""
    return join_records([build_record([0, i, i, k, v, b"\x00"]) for i, (k, v) in enumerate(records)])


def _share_segment(groups: list[list[tuple[bytes | None, bytes | None]]], codec: int = 0, epoch: int = 0) -> bytes:
    """A segment of CRC-valid v2 batches, one per group of records, offsets following on."""
    out, base = bytearray(), 0
    for recs in groups:
        block = _share_block(recs)
        out += v2_batch(compress(codec, block) if codec else block, len(recs), codec, base_offset=base, epoch=epoch)
        base += len(recs)
    return bytes(out)


def _share_segments() -> list[tuple[str, bytes]]:
    """``__share_group_state`` segments: one record a batch as the coordinator appends them, several records a
    batch, compressed batches, a transaction marker among them, the 4.0 layout, many state batches, records
    that must become decode errors, a cut last batch."""
    recs = {label: (k, v) for label, k, v in _share_records()}
    life = [
        recs[x]
        for x in (
            "snapshot-initial",
            "update-1-batch-dcc",
            "update-3-batches-dcc",
            "update-unchanged",
            "update-batch-unknown-tag",
            "update-archived",
            "snapshot-dcc-0",
            "snapshot-unknown-tags",
            "group-unicode",
            "tombstone",
        )
    ]
    many = [recs[f"{t}-{n}-batches"] for n in (0, 1, 126, 127, 200) for t in ("snapshot", "update")]
    v40 = [recs[f"snapshot-4.0-{n}-batches"] for n in (0, 1, 127)] + [recs["update-4.0"]]
    bad = [v for label, v in recs.items() if label.startswith(("unknown", "dcc-", "null-", "bytes-", "key-", "value-"))]
    bad += [recs["snapshot-200-cut-mid-batch"], recs["update-cut-in-tags"]]
    marker = v2_batch(_share_block([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")]), 1, 0, 10, attributes=0x30)
    episode = _share_segment([[r] for r in life], epoch=3)
    comp = {name: _share_segment([life[:5], life[5:]], codec) for codec, name in _CODEC_NAMES.items()}
    out = [  # in this order, --write-seeds commits the 1st, 3rd, ... 11th
        ("life-one-record-a-batch", episode),
        ("life-one-batch", _share_segment([life])),
        ("decode-errors", _share_segment([[r] for r in bad] + [bad], epoch=1)),
        ("life-with-marker", episode + marker),
        ("kafka-4.0-layout", _share_segment([[r] for r in v40])),
        ("many-state-batches-0-127", _share_segment([many[:4], many[4:6], many[6:8]])),
        ("many-state-batches-200", _share_segment([many[8:9], many[9:]])),
        ("life-gzip", comp["gzip"]),
        ("torn-last-batch", episode + _share_segment([life[:3]])[:-9]),
        ("life-snappy", comp["snappy"]),
        ("life-zstd", comp["zstd"]),
        ("life-lz4", comp["lz4"]),
    ]
    return _dedup(out)


# =========================================================================== registry


@dataclass
class Harness:
    """One fuzz target: ``fn(data)``, a mutator, and where its seeds come from."""

    name: str
    fn: Callable[[bytes], None]
    seeds: Callable[[], list[tuple[str, bytes]]]
    mutate: Callable | None = None
    #: the first sentence of ``fn``'s docstring (``python -m bench.fuzz --list``)
    doc: str = field(default="")


def _h(name, fn, seeds, mutate) -> Harness:
    first = re.split(r"\.(?:\s|$)", " ".join((fn.__doc__ or "").split()), maxsplit=1)[0]
    return Harness(name, fn, seeds, mutate, first)


_offsets_mut = segment_mutator(offsets_kv_mutator)
_meta_mut = segment_mutator(metadata_kv_mutator)
_share_mut = segment_mutator(share_kv_mutator)

HARNESSES: dict[str, Harness] = {
    h.name: h
    for h in [
        _h(
            "record_batches_v2",
            record_batches,
            lambda: _offsets_segments(48 << 10) + _metadata_segments(48 << 10) + _user_segments(16 << 10),
            _offsets_mut,
        ),
        _h("record_batches_legacy", record_batches, _legacy_sets, _offsets_mut),
        _h(
            "tail_scan",
            tail_scan,
            lambda: _offsets_segments(48 << 10) + _user_segments(16 << 10) + _legacy_sets()[:8],
            _offsets_mut,
        ),
        _h("tail_scan_index", tail_scan_index, _index_pairs, index_container_mutator),
        _h("index_file", index_file, _index_seeds, index_mutator),
        _h("offsets_segment", offsets_segment, lambda: _offsets_segments(48 << 10) + _legacy_sets(), _offsets_mut),
        _h(
            "offsets_segment_latest",
            offsets_segment_latest,
            lambda: _offsets_segments(48 << 10) + _legacy_sets()[:8],
            _offsets_mut,
        ),
        *[
            _h(f"codec_{n}", _codec(c), (lambda c=c: _codec_seeds(c)), codec_mutator(c))
            for c, n in _CODEC_NAMES.items()
        ],
        _h("offsets_records", offsets_records, _kv_seeds, kv_records_mutator),
        _h("group_metadata_value", group_metadata_value, _group_values, value_mutator(_group_value_edit)),
        _h("metadata_value", metadata_value, _metadata_values, value_mutator(mutate_metadata_value)),
        _h("metadata_segment", metadata_segment, lambda: _metadata_segments(48 << 10), _meta_mut),
        _h(
            "leader_epoch_checkpoint",
            leader_epoch_checkpoint,
            lambda: _text_files(("leader-epoch-checkpoint",)),
            text_mutator,
        ),
        _h(
            "offset_checkpoint",
            offset_checkpoint,
            lambda: _text_files(
                (
                    "replication-offset-checkpoint",
                    "log-start-offset-checkpoint",
                    "recovery-point-offset-checkpoint",
                    "cleaner-offset-checkpoint",
                )
            ),
            text_mutator,
        ),
        _h("meta_properties", meta_properties, lambda: _text_files(("meta.properties",)), text_mutator),
        _h("share_state_segment", share_state_segment, _share_segments, _share_mut),
        _h("share_state_records", share_state_records, _share_kv_seeds, share_records_mutator),
        _h("share_state_value", share_state_value, _share_values, value_mutator(_share_value_edit)),
        _h("group_record_value", group_record_value, _group_record_values, value_mutator(_group_record_edit)),
    ]
}


def build_seeds(name: str) -> list[tuple[str, bytes]]:
    """Seeds of harness ``name`` built from the real Kafka bytes under :data:`SHARED_DATA` (and the
    repository's recorded lab data): ``[(seed name, bytes)]``, de-duplicated."""
    return _dedup(HARNESSES[name].seeds())


def saved_inputs(root: Path, name: str) -> list[Path]:
    """Files under ``root/<name>/`` (committed seeds or regression inputs of one harness)."""
    d = root / name
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith(".")) if d.is_dir() else []


# =========================================================================== tiered storage: __remote_log_metadata

# Appended (with its own imports) so the sections above stay as they are; registered in HARNESSES at the end.
from audit.formats.remote_log_metadata import (  # noqa: E402
    NULL_VALUE,
    PARTITION_DELETE_STATE_NAMES,
    RECORD_TYPES as REMOTE_RECORD_TYPES,
    REMOTE_RAW_SCHEMA,
    REMOTE_VALUE_FIELDS,
    SEGMENT_STATE_NAMES,
    UNDECODABLE,
    UNSUPPORTED,
    RemoteLogMetadataDecodeError,
    decode_remote_log_metadata_segment,
    decode_remote_log_metadata_value,
)
from audit.formats.metadata_log import uuid_to_str  # noqa: E402

#: The path and partition the ``remote_log_metadata_segment`` harness reports its input under.
REMOTE_SEGMENT_PATH = "/fuzz/broker-1/__remote_log_metadata-13/00000000000000000000.log"
REMOTE_PARTITION = 13
REMOTE_TOPIC_ID = bytes.fromhex("0123456789abcdeffedcba9876543210")
REMOTE_SEGMENT_ID = bytes.fromhex("11112222333344445555666677778888")
_REMOTE_VALUE_SCHEMA = pa.schema(REMOTE_VALUE_FIELDS)
_REMOTE_VALUE_NAMES = tuple(n for n, _ in REMOTE_VALUE_FIELDS)
_REMOTE_API_KEYS = (0, 1, 2, 3, 0, 1, 4, 5, 99, 127, 128, 0x7FFF, 0x8000, 1 << 28)
_REMOTE_VERSIONS = (0, 0, 1, 2, 0x7FFF, 0x8000)
_REMOTE_STATES = (0, 1, 2, 3, 0, 1, 4, -1, 127, -128)
#: Values Kafka 4.4.0's ``RemoteLogMetadataSerde.serialize`` wrote (kafka-storage 4.4.0 on the JVM; the fields are
#: listed in ``tests/test_remote_log_metadata.py``, which holds the same bytes).
_KAFKA_REMOTE_VALUES = {
    "kafka-4.4-segment-custom-txn": "010000076f72646572730123456789abcdeffedcba987654321000000003001111222233334444555566"
    "66777788880000000000000003e800000000000007cf000000020000018bcfe5687b0000018bcfe569c8030000000500000000000003e8"
    "000000000700000000000005dc0000100000040102030001000101",
    "kafka-4.4-update-custom": "010100076f72646572730123456789abcdeffedcba9876543210000000030011112222333344445555666677"
    "77888800000000020000018bcfe56b150309080100",
    "kafka-4.4-partition-delete": "010200076f72646572730123456789abcdeffedcba9876543210000000030000000bb80000018bcfe56b"
    "e80000",
    "kafka-4.4-snapshot": "0103001111222233334444555566667777888800000000000007d00000000000000bb7000000050000018bcfe56f"
    "d00000018bcfe56fd1030000000500000000000003e8000000000700000000000005dc0000000309000201000101",
}


@dataclass
class RemoteValue:
    """A ``__remote_log_metadata`` value as its fields (schemas in the docstring of
    ``audit.formats.remote_log_metadata``); :meth:`encode` gives its bytes.  ``layout``: which record's body
    (0-3) is written, whatever ``api_key`` says; ``topic``: the TopicIdPartition Name's raw bytes (None: null);
    ``epochs``: ``[leader epoch, offset, the entry's tagged-field section]``; ``*_tags``: tagged fields
    ``[(tag, bytes)]`` of TopicIdPartition, RemoteLogSegmentId and the record; ``name_len`` / ``epochs_count`` /
    ``custom_len`` / ``tag_section`` / ``header``: raw bytes in place of the encoded Name length, SegmentLeaderEpochs
    length, CustomMetadata length, record tagged-field section or frame header, when set; ``trailing``: bytes after
    the value.  ``flaws``: what :func:`parse_remote_value` found Kafka's readers refuse."""

    layout: int
    api_key: int = -1
    version: int = 0
    frame_version: int = 1
    topic: bytes | None = b"orders"
    topic_id: bytes = REMOTE_TOPIC_ID
    partition: int = 3
    segment_id: bytes = REMOTE_SEGMENT_ID
    start_offset: int = 0
    end_offset: int = 999
    broker_id: int = 1
    max_timestamp: int = 1_700_000_000_000
    event_timestamp: int = 1_700_000_000_500
    epochs: list = field(default_factory=lambda: [[0, 0, b"\x00"]])
    size: int = 1 << 20
    custom: bytes | None = None
    state: int = 0
    tip_tags: list = field(default_factory=list)
    sid_tags: list = field(default_factory=list)
    tags: list = field(default_factory=list)
    name_len: bytes | None = None
    epochs_count: bytes | None = None
    custom_len: bytes | None = None
    tag_section: bytes | None = None
    header: bytes | None = None
    trailing: bytes = b""
    flaws: list = field(default_factory=list)

    def __post_init__(self):
        if self.api_key < 0:
            self.api_key = self.layout

    def _tip(self) -> bytes:
        if self.topic is None:
            name = self.name_len if self.name_len is not None else b"\x00"
        else:
            name = (self.name_len if self.name_len is not None else uvarint(len(self.topic) + 1)) + self.topic
        return name + self.topic_id + struct.pack(">i", _wrap(self.partition, 32)) + tagged_fields(self.tip_tags)

    def _segment_fields(self) -> bytes:
        out = struct.pack(
            ">qqiqq",
            _wrap(self.start_offset, 64),
            _wrap(self.end_offset, 64),
            _wrap(self.broker_id, 32),
            _wrap(self.max_timestamp, 64),
            _wrap(self.event_timestamp, 64),
        )
        out += self.epochs_count if self.epochs_count is not None else uvarint(len(self.epochs) + 1)
        out += b"".join(struct.pack(">iq", _wrap(e, 32), _wrap(o, 64)) + t for e, o, t in self.epochs)
        return out + struct.pack(">i", _wrap(self.size, 32)) + self._custom() + self._state_and_tags()

    def _custom(self) -> bytes:
        if self.custom is None:
            return self.custom_len if self.custom_len is not None else b"\x00"
        return (self.custom_len if self.custom_len is not None else uvarint(len(self.custom) + 1)) + self.custom

    def _state_and_tags(self) -> bytes:
        tags = self.tag_section if self.tag_section is not None else tagged_fields(self.tags)
        return struct.pack(">b", _wrap(self.state, 8)) + tags

    def encode(self) -> bytes:
        head = self.header
        if head is None:
            head = uvarint(self.frame_version) + uvarint(self.api_key) + uvarint(self.version)
        sid_entry = self._tip() + self.segment_id + tagged_fields(self.sid_tags)
        times = struct.pack(">iq", _wrap(self.broker_id, 32), _wrap(self.event_timestamp, 64))
        if self.layout == 0:
            body = sid_entry + self._segment_fields()
        elif self.layout == 1:
            body = sid_entry + times + self._custom() + self._state_and_tags()
        elif self.layout == 2:
            body = self._tip() + times + self._state_and_tags()
        else:
            body = self.segment_id + self._segment_fields()
        return head + body + self.trailing


class _Short(Exception):
    """The bytes end inside a field (the parser's own signal, never a decoder's)."""


class _Cur:
    def __init__(self, b: bytes, pos: int = 0):
        self.b, self.p = b, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.b):
            raise _Short()
        self.p += n
        return self.b[self.p - n : self.p]

    def num(self, fmt: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def uv(self) -> int:
        r = read_uvarint(self.b, self.p, 5)
        if r is None:
            raise _Short()
        self.p = r[1]
        return r[0]

    def tags(self, flaws: list, where: str) -> list:
        count = self.uv()
        if count > 10000:
            flaws.append(f"{count} tagged fields in {where}")
        out = []
        for _ in range(count):
            tag = self.uv()
            out.append((tag, self.take(self.uv())))
        return out


def parse_remote_value(value: bytes) -> RemoteValue | None:
    """The fields of a ``__remote_log_metadata`` value (bytes after the body in ``trailing``; what Kafka's
    generated readers refuse although the bytes are there in ``flaws``), its body read as its api key's; None when
    the frame header is unterminated, the api key is not 0-3 or the bytes end inside a field.  Written apart from
    the decoder under test, from the schema JSON."""
    c = _Cur(value)
    try:
        fv, key, ver = c.uv(), c.uv(), c.uv()
        if key not in (0, 1, 2, 3):
            return None
        m = RemoteValue(key, key, ver, fv, epochs=[])
        flaws = m.flaws

        def tip():
            n = c.uv() - 1
            if n < 0:
                m.topic, m.name_len = None, b"\x00"
                flaws.append("null Name")
            else:
                if n > 0x7FFF:
                    flaws.append(f"Name of {n} bytes")
                m.topic = c.take(n)
            m.topic_id, m.partition = c.take(16), c.num(">i")
            m.tip_tags = c.tags(flaws, "TopicIdPartition")

        def sid():
            tip()
            m.segment_id = c.take(16)
            m.sid_tags = c.tags(flaws, "RemoteLogSegmentId")

        def custom():
            n = c.uv() - 1
            m.custom = None if n < 0 else c.take(n)

        def state_and_tags():
            m.state = c.num(">b")
            m.tags = c.tags(flaws, "the record")
            if m.layout in (0, 3):
                flaws.extend(f"TxnIndexEmpty of {len(v)} bytes" for t, v in m.tags if t == 0 and len(v) != 1)

        def segment_fields():
            f = struct.unpack(">qqiqq", c.take(36))
            m.start_offset, m.end_offset, m.broker_id, m.max_timestamp, m.event_timestamp = f
            n = c.uv() - 1
            if n < 0:
                m.epochs_count = b"\x00"
                flaws.append("null SegmentLeaderEpochs")
            for _ in range(max(n, 0)):
                e, o = c.num(">i"), c.num(">q")
                start = c.p
                entry_flaws: list = []
                c.tags(entry_flaws, "SegmentLeaderEpochEntry")
                flaws.extend(entry_flaws)
                m.epochs.append([e, o, value[start : c.p]])
            m.size = c.num(">i")
            custom()
            state_and_tags()

        if key == 0:
            sid()
            segment_fields()
        elif key in (1, 2):
            if key == 1:
                sid()
            else:
                tip()
            m.broker_id, m.event_timestamp = c.num(">i"), c.num(">q")
            if key == 1:
                custom()
            state_and_tags()
        else:
            m.segment_id = c.take(16)
            segment_fields()
    except _Short:
        return None
    m.trailing = value[c.p :]
    return m


def remote_reference(value: bytes | None) -> dict | str:
    """What ``decode_remote_log_metadata_value`` must give for ``value``: the decoded dict, or the
    ``RemoteLogMetadataDecodeError.reason`` it must raise with, per the schemas and the decoder's documented checks
    (framing as ``AbstractApiMessageSerde.read``), from :func:`parse_remote_value`."""
    if value is None:
        return NULL_VALUE
    c = _Cur(value)
    try:
        if c.uv() != 1:  # the frame version is checked before the api key is read
            return UNSUPPORTED
        key, ver = c.uv(), c.uv()
    except _Short:
        return UNDECODABLE
    if key not in (0, 1, 2, 3) or ver != 0:
        return UNSUPPORTED
    m = parse_remote_value(value)
    if m is None or m.flaws or m.trailing:
        return UNDECODABLE
    seg = m.layout in (0, 3)
    names = PARTITION_DELETE_STATE_NAMES if m.layout == 2 else SEGMENT_STATE_NAMES
    has_tp = m.layout in (0, 1, 2)
    txn = [v for t, v in m.tags if t == 0]
    return {
        "record_type": REMOTE_RECORD_TYPES[m.layout],
        "api_key": m.layout,
        "topic": m.topic.decode("utf-8", "replace") if has_tp else None,
        "topic_id": uuid_to_str(m.topic_id) if has_tp else None,
        "partition": m.partition if has_tp else None,
        "segment_id": uuid_to_str(m.segment_id) if m.layout != 2 else None,
        "start_offset": m.start_offset if seg else None,
        "end_offset": m.end_offset if seg else None,
        "broker_id": m.broker_id,
        "event_timestamp": m.event_timestamp,
        "max_timestamp": m.max_timestamp if seg else None,
        "segment_leader_epochs": [{"leader_epoch": e, "start_offset": o} for e, o, _t in m.epochs] if seg else None,
        "segment_size_bytes": m.size if seg else None,
        "state": m.state,
        "state_name": names.get(m.state),
        "custom_metadata": m.custom if m.layout != 2 else None,
        "txn_index_empty": (txn[-1] != b"\x00" if txn else False) if seg else None,
    }


def _remote_batch(values: list[bytes | None], base: int = 0, codec: int = 0, keys=None) -> bytes:
    keys = keys or [None] * len(values)
    block = join_records([build_record([0, 7 * i, i, k, v, b"\x00"]) for i, (k, v) in enumerate(zip(keys, values))])
    return v2_batch(compress(codec, block) if codec else block, len(values), codec, base_offset=base)


def _check_remote_batch(b: pa.RecordBatch) -> None:
    _check(b.schema.equals(REMOTE_RAW_SCHEMA), "a decoded batch not in REMOTE_RAW_SCHEMA")
    try:
        b.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise HarnessViolation(f"an invalid Arrow batch: {exc}") from None


def _single_remote(value: bytes | None) -> tuple[dict | None, str | None, str | None]:
    """(decoded dict, decode_error, detail) of one value through ``decode_remote_log_metadata_value``."""
    try:
        return decode_remote_log_metadata_value(value), None, None
    except RemoteLogMetadataDecodeError as exc:
        return None, exc.reason, str(exc)


def _check_remote_rows(rows: pa.Table, values: list[bytes | None]) -> None:
    """Each record row equals the single-value decode of its value (columns, ``decode_error``, ``detail``);
    ``source_file`` is set exactly on the rows with a ``decode_error``.  Column by column, each distinct value
    decoded once."""
    _check(rows.num_rows == len(values), f"{rows.num_rows} record rows for {len(values)} records")
    memo: dict = {}
    want = []
    for v in values:
        if v not in memo:
            row, err, detail = _single_remote(v)
            d = {name: (row[name] if row else None) for name in _REMOTE_VALUE_NAMES}
            memo[v] = dict(d, decode_error=err, detail=detail, source_file=REMOTE_SEGMENT_PATH if err else None)
        want.append(memo[v])
    names = [*_REMOTE_VALUE_NAMES, "decode_error", "detail", "source_file"]
    schema = pa.schema([REMOTE_RAW_SCHEMA.field(n) for n in names])
    want_t = pa.Table.from_pylist(want, schema=schema)
    got = rows.select(names)
    if all(got.column(n).equals(want_t.column(n)) for n in names):
        return
    for i in range(len(values)):
        g, w = got.slice(i, 1).to_pylist()[0], want[i]
        if g != w:
            diff = {n: (g[n], w[n]) for n in names if g[n] != w[n]}
            raise HarnessViolation(f"record {i}: segment row (left) and single-value decode (right) differ: {diff}")
    raise HarnessViolation("segment rows differ from the single-value decode in their Arrow types")


def remote_log_metadata_value(data: bytes) -> None:
    """One ``__remote_log_metadata`` value through ``decode_remote_log_metadata_value``: the decoded dict (or the
    ``RemoteLogMetadataDecodeError`` reason) must equal :func:`remote_reference`'s, fit the Arrow columns of
    ``REMOTE_RAW_SCHEMA``, and the same value in a v2 batch through ``decode_remote_log_metadata_segment`` must give
    the same row.  Documented exception: ``RemoteLogMetadataDecodeError``."""
    row, err, detail = _single_remote(data)
    ref = remote_reference(data)
    if row is None:
        _check(err in (UNDECODABLE, UNSUPPORTED), f"decode_error {err!r} for a non-null value")
        _check(bool(detail), "a RemoteLogMetadataDecodeError without a message")
        _check(ref == err, f"the decoder raised ({err}: {detail}) where the reference gives {ref!r}")
    else:
        _check(ref == row, f"decoded {row} where the reference gives {ref!r}")
        try:
            pa.RecordBatch.from_pylist([row], schema=_REMOTE_VALUE_SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise HarnessViolation(f"decoded row does not fit its Arrow columns: {exc}") from None
    seg = _remote_batch([data], base=40)
    out = decode_remote_log_metadata_segment(seg, REMOTE_SEGMENT_PATH, REMOTE_PARTITION)
    for b in out:
        _check_remote_batch(b)
    table = pa.Table.from_batches(out, schema=REMOTE_RAW_SCHEMA)
    _check(table.num_rows == 1 and table.column("kind")[0].as_py() == "record", "not one record row for one value")
    _check(table.column("offset").to_pylist() == [40], "the record row not at its offset")
    _check_remote_rows(table, [data])


def remote_log_metadata_segment(data: bytes) -> None:
    """A ``__remote_log_metadata`` segment through ``decode_remote_log_metadata_segment``: batches, records and
    every record value (the four record types, tagged fields, null values, broken values).  Issue rows carry the
    file and a byte position inside it; every data record of the batches the segment reader accepts is one row,
    at its batch's position and its offset, equal to the single-value decode of its value.  Documented
    exceptions: none."""
    from audit.formats.record_batch import ATTR_CONTROL

    out = decode_remote_log_metadata_segment(data, REMOTE_SEGMENT_PATH, REMOTE_PARTITION)
    _check(len(out) <= 2, f"{len(out)} batches, not at most records + issues")
    for b in out:
        _check_remote_batch(b)
    table = pa.Table.from_batches(out, schema=REMOTE_RAW_SCHEMA)
    n = len(data)
    kind = table.column("kind")
    _require(table, pc.is_in(kind, pa.array(["issue", "record"])), "a row neither issue nor record")
    _require(table, pc.equal(table.column("source_partition"), REMOTE_PARTITION), "a row without its partition")
    issues = table.filter(pc.equal(kind, "issue"))
    _require(issues, pc.equal(issues.column("source_file"), REMOTE_SEGMENT_PATH), "an issue row without its file")
    _require(issues, pc.greater(pc.utf8_length(issues.column("decode_error")), 0), "an issue row without a reason")
    pos = issues.column("position")
    _require(issues, pc.and_(pc.greater_equal(pos, 0), pc.less_equal(pos, n)), "an issue without a byte position")
    rows = table.filter(pc.equal(kind, "record"))
    _require(rows, pc.equal(rows.column("records_affected"), 1), "a record row not of one record")
    scan = scan_batches(data)
    recs = extract_records(data, scan)
    keep = np.flatnonzero((scan.attributes[recs.batch] & ATTR_CONTROL) == 0) if len(recs) else np.zeros(0, np.int64)
    d = recs.data
    values = [
        None if vl < 0 else d[vs : vs + vl].tobytes()
        for vs, vl in zip(recs.value_start[keep].tolist(), recs.value_len[keep].tolist())
    ]
    _check_remote_rows(rows, values)
    where = (
        (scan.position[recs.batch[keep]].tolist(), recs.offset[keep].tolist(), recs.timestamp[keep].tolist())
        if len(keep)
        else ([], [], [])
    )
    got = (rows.column("position").to_pylist(), rows.column("offset").to_pylist(), rows.column("timestamp").to_pylist())
    _check(got == where, "record rows not at their batch position, offset and timestamp")


# ---- mutators


def random_remote_value(rng: random.Random, layout: int | None = None) -> RemoteValue:
    """A value as the RemoteLogMetadataManager writes one: a random record type and state, 1-3 leader epochs
    (200 at times), CustomMetadata and TxnIndexEmpty at times."""
    layout = rng.randrange(4) if layout is None else layout
    start = rng.choice((0, 1000, 1 << 40))
    n = rng.choice((1, 1, 2, 3, 200))
    epochs = [[e, start + 10 * e, b"\x00"] for e in range(n)]
    v = RemoteValue(
        layout,
        topic=rng.choice((b"orders", b"t", b"x" * 249, "t\u00fcpic".encode())),
        partition=rng.choice((0, 3, 49, 1 << 20)),
        segment_id=bytes(rng.randrange(256) for _ in range(16)),
        start_offset=start,
        end_offset=start + rng.choice((0, 99, 1 << 20)),
        broker_id=rng.choice((0, 1, 3000)),
        epochs=epochs,
        size=rng.choice((0, 4096, 1 << 30)),
        custom=rng.choice((None, None, b"", b"\x01\x02\x03", bytes(200))),
        state=rng.choice((0, 1, 2, 3) if layout != 2 else (0, 1, 2)),
    )
    if layout in (0, 3) and rng.random() < 0.5:
        v.tags = [(0, rng.choice((b"\x01", b"\x00")))]
    return v


def _remote_tag_list(rng: random.Random, tags: list, layout: int, top: bool) -> list:
    """A tagged-field list with one edit: an unknown tag, TxnIndexEmpty (tag 0, of 0-2 bytes) at the top, a tag
    twice, the tags reversed, 10001 empty tags, or none."""
    tags = list(tags)
    op = rng.randrange(7)
    if op == 0:
        tag = rng.choice((1, 2, 7, 127, 128, 0x3FFF, 0x7FFFFFFF))
        tags.insert(rng.randrange(len(tags) + 1), (tag, bytes(rng.randrange(256) for _ in range(rng.randrange(9)))))
    elif op == 1 and top:
        tags = [(0, rng.choice((b"\x01", b"\x00", b"\x07", b"", b"\x01\x00")))] + [t for t in tags if t[0] != 0]
    elif op == 2 and tags:
        tags.append(rng.choice(tags))
    elif op == 3:
        tags = list(reversed(tags + [(5, b"x")]))
    elif op == 4 and rng.random() < 0.2:
        tags = [(i, b"") for i in range(rng.choice((10000, 10001)))]
    elif op == 5:
        tags = []
    return tags


def mutate_remote_value(rng: random.Random, value: bytes | None) -> bytes:
    """A ``__remote_log_metadata`` value with one structural edit: frame version, api key (unknown ones too),
    version, another record's body, a numeric field or the state at an extreme, the topic name (empty, 32767 /
    32768 bytes, not UTF-8, null, its length at an extreme), an id, the leader epochs (none, many, their count at
    an extreme, an entry's tagged fields), CustomMetadata (null, empty, large, its length at an extreme), the tagged
    fields of any struct (TxnIndexEmpty, unknown tags, 10000+ tags, the section's count at an extreme), bytes
    after the value, a cut; or a fresh value."""
    if value is None or rng.random() < 0.03:
        return random_remote_value(rng).encode()
    m = parse_remote_value(value)
    if m is None or rng.random() < 0.08:
        c = _Cur(value)
        try:
            c.uv(), c.uv(), c.uv()
            rest = value[c.p :]
        except _Short:
            rest = value
        op = rng.randrange(5)
        if op == 0:
            fv = rng.choice((1, 1, 1, 0, 2, 0x7FFF))
            return uvarint(fv) + uvarint(rng.choice(_REMOTE_API_KEYS)) + uvarint(rng.choice(_REMOTE_VERSIONS)) + rest
        if op == 1:
            return b"\x01" + uvarint(rng.randrange(4)) + b"\x00" + rest  # back to a known frame
        if op == 2:
            return value[: rng.randrange(len(value) + 1)]
        if op == 3:
            return value + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        return poke(rng, value, 3)
    op = rng.randrange(19)
    if op == 0:
        m.api_key = rng.choice(_REMOTE_API_KEYS)
    elif op == 1:
        m.version = rng.choice(_REMOTE_VERSIONS)
    elif op == 2:
        m.frame_version = rng.choice((0, 2, 1 << 20))
    elif op == 3:
        name = rng.choice(
            ("start_offset", "end_offset", "broker_id", "max_timestamp", "event_timestamp", "size", "partition")
        )
        setattr(m, name, extreme(rng, 32 if name in ("broker_id", "size", "partition") else 64))
    elif op == 4:
        m.state = rng.choice(_REMOTE_STATES)
    elif op == 5:
        m.topic, m.name_len = (
            rng.choice((b"", b"a" * 249, b"x" * 32767, b"x" * 32768, "\u00fc\u00e9".encode(), b"\xff\xfe\xc3", None)),
            None,
        )
    elif op == 6:
        m.name_len = rng.choice((extreme_varint(rng), b"\x00", overlong_uvarint(len(m.topic or b"") + 1)))
    elif op == 7:
        uid = rng.choice((bytes(16), b"\xff" * 16, bytes(rng.randrange(256) for _ in range(16))))
        if rng.random() < 0.5:
            m.topic_id = uid
        else:
            m.segment_id = uid
    elif op == 8:
        k = rng.choice((0, 1, 2, 126, 127, 128, 300))
        src = m.epochs or [[0, 0, b"\x00"]]
        m.epochs = [[e + i, o + i, t] for i, (e, o, t) in enumerate(src[j % len(src)] for j in range(k))]
        m.epochs_count = None
    elif op == 9:
        n1 = len(m.epochs) + 1
        m.epochs_count = rng.choice(
            (b"\x00", uvarint(n1 + 1), uvarint(n1 - 1), overlong_uvarint(n1), extreme_varint(rng))
        )
    elif op == 10 and m.epochs:
        x = rng.choice(m.epochs)
        j = rng.randrange(3)
        if j == 2:
            x[2] = rng.choice(
                (b"\x01\x07\x01\x00", b"\x01\x00\x00", b"\x02\x01\x00\x05\x02\xab\xcd", extreme_varint(rng))
            )
        else:
            x[j] = extreme(rng, (32, 64)[j])
    elif op == 11:
        m.custom, m.custom_len = rng.choice((None, b"", b"\x00", bytes(300), bytes(1 << 14))), None
    elif op == 12:
        m.custom_len = extreme_varint(rng)
    elif op == 13:
        m.tags = _remote_tag_list(rng, m.tags, m.layout, True)
    elif op == 14:
        if rng.random() < 0.5:
            m.tip_tags = _remote_tag_list(rng, m.tip_tags, m.layout, False)
        else:
            m.sid_tags = _remote_tag_list(rng, m.sid_tags, m.layout, False)
    elif op == 15:
        m.tag_section = rng.choice(
            (extreme_varint(rng), b"\x01\x00" + extreme_varint(rng), b"\x01" + extreme_varint(rng), b"")
        )
    elif op == 16:
        m.trailing = rng.choice((b"\x00", b"\x00\x00", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))))
    elif op == 17:
        m.layout = rng.choice([x for x in range(4) if x != m.layout])  # another record's body, same api key
    else:
        b = m.encode()
        return b[: rng.randrange(len(b) + 1)] if rng.random() < 0.5 else poke(rng, b, 3)
    return m.encode()


def remote_kv_mutator(rng, key, value):
    """(key, value) of a ``__remote_log_metadata`` record: the value edited structurally, at times a null value or
    a key (Kafka 4.4 writes neither)."""
    r = rng.random()
    if r < 0.03:
        return key, None
    if r < 0.06:
        return rng.choice((None, b"", b"\x00\x01", bytes(rng.randrange(256) for _ in range(8)))), value
    return key, mutate_remote_value(rng, value)


def _remote_value_edit(rng: random.Random, value: bytes) -> bytes:
    return mutate_remote_value(rng, value)


# ---- seeds


def _remote_values() -> list[tuple[str, bytes]]:
    """Values Kafka 4.4.0 wrote, then values built field by field per the four schemas: every state of every
    record type, the lifecycle fields at their limits, tagged fields in every struct, and broken ones."""
    out = [(label, bytes.fromhex(h)) for label, h in _KAFKA_REMOTE_VALUES.items()]
    for layout in range(4):
        for state in (0, 1, 2, 3) if layout != 2 else (0, 1, 2):
            out.append((f"type{layout}-state{state}", RemoteValue(layout, state=state).encode()))
    unknown = [(7, b"\xde\xad"), (300, b"")]
    out += [
        ("segment-200-epochs", RemoteValue(0, epochs=[[e, 10 * e, b"\x00"] for e in range(200)]).encode()),
        ("segment-no-epochs", RemoteValue(0, epochs=[]).encode()),
        (
            "segment-tags-everywhere",
            RemoteValue(
                0,
                tip_tags=unknown,
                sid_tags=[(1, b"x")],
                epochs=[[1, 2, b"\x01\x09\x02\x01\x02"], [3, 4, b"\x00"]],
                tags=[(0, b"\x01"), *unknown],
                custom=bytes(300),
            ).encode(),
        ),
        ("update-custom-300", RemoteValue(1, custom=bytes(300), state=1, tags=unknown).encode()),
        ("delete-unicode-topic", RemoteValue(2, topic="t\u00fcpic.\u00e9".encode(), state=2).encode()),
        ("snapshot-txn", RemoteValue(3, tags=[(0, b"\x01")], custom=b"meta").encode()),
        ("broken-trailing", RemoteValue(1, trailing=b"\x00").encode()),
        (
            "broken-version-1",
            RemoteValue(1, version=1, tags=[(0, struct.pack(">i", 5)), (1, struct.pack(">q", 99))]).encode(),
        ),
        ("broken-api-key-4", RemoteValue(2, api_key=4).encode()),
        ("broken-frame-0", RemoteValue(0, frame_version=0).encode()),
        ("broken-null-name", RemoteValue(2, topic=None).encode()),
        ("broken-txn-2-bytes", RemoteValue(3, tags=[(0, b"\x01\x00")]).encode()),
    ]
    return _dedup(out)


def _remote_segments() -> list[tuple[str, bytes]]:
    """``__remote_log_metadata`` segments: three remote segments' lives and a partition's deletion, one record a
    batch (as the RemoteLogMetadataManager's producer sends them) and several a batch, compressed, with a
    transaction marker, records that do not decode, a cut last batch."""
    life = []
    for i, sid in enumerate((REMOTE_SEGMENT_ID, REMOTE_SEGMENT_ID[::-1], bytes(range(16)))):
        start = 1000 * i
        life.append(RemoteValue(0, segment_id=sid, start_offset=start, end_offset=start + 999).encode())
        life.append(RemoteValue(1, segment_id=sid, state=1).encode())
    for sid in (REMOTE_SEGMENT_ID, REMOTE_SEGMENT_ID[::-1]):
        life += [RemoteValue(1, segment_id=sid, state=s).encode() for s in (2, 3)]
    life += [RemoteValue(2, state=s, broker_id=3000 if s == 0 else 1).encode() for s in (0, 1, 2)]
    bad = [v for label, v in _remote_values() if label.startswith("broken-")] + [None, b"", b"\x01"]

    def seg(groups, codec=0):
        out, base = bytearray(), 0
        for g in groups:
            out += _remote_batch(g, base, codec)
            base += len(g)
        return bytes(out)

    commit = build_record([0, 0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", b"\x00"])
    marker = v2_batch(join_records([commit]), 1, 0, 30, attributes=0x30)
    one = seg([[v] for v in life])
    out = [  # in this order, --write-seeds commits the 1st, 2nd, 4th, 6th, 8th and 10th
        ("life-one-record-a-batch", one),
        ("decode-errors", seg([[v] for v in bad] + [bad])),
        ("life-one-batch", seg([life])),
        ("life-with-marker", one + marker),
        ("life-gzip", seg([life[:6], life[6:]], 1)),
        ("torn-last-batch", one + seg([life[:3]])[:-9]),
        ("life-zstd", seg([life[:6], life[6:]], 4)),
        ("kafka-4.4-values", seg([[bytes.fromhex(h) for h in _KAFKA_REMOTE_VALUES.values()]])),
        ("life-snappy", seg([life], 2)),
        (
            "tags-and-many-epochs",
            seg([[v for label, v in _remote_values() if label.startswith(("segment", "update"))]]),
        ),
        ("life-lz4", seg([life], 3)),
    ]
    return _dedup(out)


HARNESSES.update(
    {
        h.name: h
        for h in [
            _h(
                "remote_log_metadata_value",
                remote_log_metadata_value,
                _remote_values,
                value_mutator(_remote_value_edit),
            ),
            _h(
                "remote_log_metadata_segment",
                remote_log_metadata_segment,
                _remote_segments,
                segment_mutator(remote_kv_mutator),
            ),
        ]
    }
)
