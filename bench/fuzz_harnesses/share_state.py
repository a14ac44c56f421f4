"""The KIP-932 ``__share_group_state`` harnesses: ``share_state_segment``, ``share_state_records`` and
``share_state_value``, the record-by-record reference they compare the vectorised decoder with, a model of
ShareSnapshot/ShareUpdate keys and values (:class:`ShareValue`), their mutators and seeds.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.formats.record_batch import extract_records, scan_batches
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

from bench.fuzz_harnesses.common import KV_SCHEMA, HarnessViolation, check, make_harness, require
from bench.fuzz_harnesses.encoding import (
    CODEC_NAMES,
    build_record,
    compress,
    join_kv_records,
    join_records,
    overlong_uvarint,
    read_uvarint,
    split_kv_records,
    tagged_fields,
    uvarint,
    v2_batch,
    wrap,
)
from bench.fuzz_harnesses.mutators import (
    VALUE_VERSIONS,
    ByteMutate,
    extreme,
    extreme_varint,
    kv_records_mutate,
    poke,
    segment_mutator,
    simple_byte_mutate,
    value_mutator,
)
from bench.fuzz_harnesses.seeds import dedup


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


def _check_share_rows(got: pa.Table, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Each decoded row equals :func:`_share_reference` of its record: the vectorised decoder agrees with the
    record-by-record one on every record, and reports a ``decode_error`` only where that one raises.  Each
    distinct record is decoded once and the comparison is column by column (an input may hold 60,000 records)."""
    check(got.num_rows == len(records), f"{got.num_rows} rows for {len(records)} records")
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
    check(b.schema.equals(SHARE_RAW_SCHEMA), "a decoded batch not in SHARE_RAW_SCHEMA")
    try:
        b.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise HarnessViolation(f"an invalid Arrow batch: {exc}") from None


def share_state_segment(data: bytes) -> None:
    """A ``__share_group_state`` segment through ``decode_share_state_segment``: batches, records, ShareSnapshot
    and ShareUpdate keys and values (both layouts, tagged fields, tombstones).  ReadIssue rows carry the file and a
    byte position inside it; every data record of the batches the segment reader accepts is one row, equal to
    the record-by-record decode of its key and value.  Documented exceptions: none."""
    from audit.formats.record_batch import ATTR_CONTROL

    out = decode_share_state_segment(data, SHARE_SEGMENT_PATH, SHARE_PARTITION)
    for b in out:
        _check_share_batch(b)
    table = pa.Table.from_batches(out, schema=SHARE_RAW_SCHEMA)
    n = len(data)
    kind = table.column("kind")
    require(table, pc.is_in(kind, pa.array(["issue", "record"])), "a row neither issue nor record")
    issues = table.filter(pc.equal(kind, "issue"))
    require(issues, pc.equal(issues.column("source_file"), SHARE_SEGMENT_PATH), "an issue row without its file")
    require(issues, pc.greater(pc.utf8_length(issues.column("decode_error")), 0), "an issue row without a reason")
    pos = issues.column("position")
    require(issues, pc.and_(pc.greater_equal(pos, 0), pc.less_equal(pos, n)), "an issue without a byte position")
    rows = table.filter(pc.equal(kind, "record"))
    require(rows, pc.equal(rows.column("source_partition"), SHARE_PARTITION), "a record row without its partition")
    has_err, src = pc.is_valid(rows.column("decode_error")), rows.column("source_file")
    require(
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
    check(
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
        schema=KV_SCHEMA,
    )
    out = decode_share_state_rows(rb)
    check(out.num_rows == n, f"decode_share_state_rows gave {out.num_rows} rows for {n} records")
    _check_share_batch(out)
    table = pa.Table.from_batches([out])
    require(table, pc.equal(table.column("kind"), "record"), "a row that is not a record")
    check(table.column("source_partition").to_pylist() == parts, "rows not at their records' partitions")
    check(table.column("offset").to_pylist() == offsets, "rows not at their records' offsets")
    errors = table.column("decode_error").to_pylist()
    check(
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
    return struct.pack(">h", wrap(record_type, 16)) + value


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
        check(single["layout"] in ("4.1+", "4.0"), f"layout {single['layout']!r}")
        check((single["state_epoch"] is None) == (rtype != 0), "a state epoch on an update, or none on a snapshot")
        for name, bits in (("snapshot_epoch", 32), ("state_epoch", 32), ("leader_epoch", 32), ("start_offset", 64)):
            x = single[name]
            check(x is None or -(1 << (bits - 1)) <= x < 1 << (bits - 1), f"{name} {x} outside int{bits}")
        try:
            pa.array([[dict(zip(STATE_BATCH_NAMES, b)) for b in single["state_batches"]]], STATE_BATCHES)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise HarnessViolation(f"state batches do not fit the state_batches column: {exc}") from None
    try:
        _t, _g, topic, partition = decode_share_state_key(value)
        check(len(topic) == 22 and -(1 << 31) <= partition < 1 << 31, "a key that does not fit its columns")
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
    check(set(kv) == set(KV_FIELDS), "decode_share_state_kv columns differ from KV_FIELDS")
    table = pa.table({name: kv[name] for name in KV_FIELDS})
    check(table.num_rows == 2 and table.schema.equals(_SHARE_KV_SCHEMA), "decode_share_state_kv columns not KV_FIELDS")
    rows = table.to_pylist()
    ref = _share_reference(key, value, single if rtype in (0, 1) else None)
    for i, row in enumerate(rows):
        got = {name: row[name] for name in ref}
        if got != ref:
            diff = {name: (got[name], ref[name]) for name in ref if got[name] != ref[name]}
            raise HarnessViolation(
                f"copy {i}: decode_share_state_kv (left) and decode_share_state_value differ: {diff}"
            )


#: The topic id (16 bytes) of the share seeds' records.
SHARE_TOPIC_ID = bytes.fromhex("5f3c1e0a9b8d4c2e8f7a6b5c4d3e2f10")
_SHARE_RECORD_TYPES = (0, 1, 0, 1, 2, 3, 4, -1, 0x7FFF, -0x8000, 16)
_DELIVERY_STATES = (0, 2, 4, 1, 3, -1, 127, -128)


def share_key(rtype: int, group: bytes | str, topic_id: bytes = SHARE_TOPIC_ID, partition: int = 0) -> bytes:
    """A ShareSnapshotKey / ShareUpdateKey as ``CoordinatorRecordSerde`` writes it: int16 record type, then the
    key's version 0 (not flexible): int16-length GroupId, 16-byte TopicId, int32 Partition."""
    g = group.encode() if isinstance(group, str) else group
    head = struct.pack(">hh", wrap(rtype, 16), wrap(len(g), 16))
    return head + g + topic_id + struct.pack(">i", wrap(partition, 32))


def dcc_tag(count: int) -> tuple[int, bytes]:
    """The DeliveryCompleteCount tagged field (tag 0, int32; Kafka 4.2+ writes it when not -1)."""
    return 0, struct.pack(">i", wrap(count, 32))


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
        out = struct.pack(">h", wrap(self.version, 16))
        if self.layout == "4.0":  # Kafka 4.0: SnapshotEpoch uint16, no timestamps
            out += struct.pack(">H", self.snapshot_epoch & 0xFFFF)
        else:
            out += struct.pack(">i", wrap(self.snapshot_epoch, 32))
        if self.snapshot:
            out += struct.pack(">i", wrap(self.state_epoch, 32))
        out += struct.pack(">iq", wrap(self.leader_epoch, 32), wrap(self.start_offset, 64))
        if self.snapshot and self.layout != "4.0":
            out += struct.pack(">qq", wrap(self.create_timestamp, 64), wrap(self.write_timestamp, 64))
        out += self.batch_count if self.batch_count is not None else uvarint(len(self.batches) + 1)
        out += b"".join(
            struct.pack(">qqbh", wrap(f, 64), wrap(la, 64), wrap(s, 8), wrap(c, 16)) + t
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
            return struct.pack(">h", rng.choice(VALUE_VERSIONS)) + value[2:]
        if op == 1:
            return value[: rng.randrange(len(value) + 1)]
        if op == 2:
            return value + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        return poke(rng, value, 2)
    op = rng.randrange(15)
    if op == 0:
        m.version = rng.choice(VALUE_VERSIONS)
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


def share_records_mutator(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate) -> bytes:
    """Custom mutator of ``share_state_records`` inputs (:func:`split_kv_records`): as
    :func:`kv_records_mutator`, records edited with :func:`share_kv_mutator`."""
    return kv_records_mutate(share_kv_mutator, data, max_size, seed, byte_mutate)


def _share_value_edit(rng: random.Random, data: bytes) -> bytes:
    """``share_state_value`` input (:func:`split_share_value`): the record type (unknown ones too) or the value
    (:func:`mutate_share_value`, read as that record type's)."""
    rtype, value = split_share_value(data)
    if rng.random() < 0.1:
        return join_share_value(rng.choice(_SHARE_RECORD_TYPES), value)
    return join_share_value(rtype, mutate_share_value(rng, value, rtype, tombstones=False) or b"")


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
    return dedup(out)


def _share_values() -> list[tuple[str, bytes]]:
    out = []
    for label, k, v in _share_records():
        if v is None:
            continue
        rtype = struct.unpack_from(">h", k)[0] if k is not None and len(k) >= 2 else 1
        out.append((label, join_share_value(rtype, v)))
    out.append(("snapshot-as-update", join_share_value(1, ShareValue(True, state_epoch=2, start_offset=0).encode())))
    out.append(("unknown-record-type--1", join_share_value(-1, ShareValue(False, start_offset=0).encode())))
    return dedup(out)


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
    comp = {name: _share_segment([life[:5], life[5:]], codec) for codec, name in CODEC_NAMES.items()}
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
    return dedup(out)


SHARE_STATE_SEGMENT = make_harness(
    "share_state_segment", share_state_segment, _share_segments, segment_mutator(share_kv_mutator)
)
SHARE_STATE_RECORDS = make_harness("share_state_records", share_state_records, _share_kv_seeds, share_records_mutator)
SHARE_STATE_VALUE = make_harness(
    "share_state_value", share_state_value, _share_values, value_mutator(_share_value_edit)
)
