"""The tiered-storage ``__remote_log_metadata`` harnesses: ``remote_log_metadata_value`` and
``remote_log_metadata_segment``, a reference decode written from the schema JSON (:class:`RemoteValue`,
:func:`parse_remote_value`, :func:`remote_reference`), their mutators and seeds.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.formats.metadata_log import uuid_to_str
from audit.formats.record_batch import extract_records, scan_batches
from audit.formats.remote_log_metadata import (
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

from bench.fuzz_harnesses.common import HarnessViolation, check, make_harness, require
from bench.fuzz_harnesses.encoding import (
    build_record,
    compress,
    join_records,
    overlong_uvarint,
    read_uvarint,
    tagged_fields,
    uvarint,
    v2_batch,
    wrap,
)
from bench.fuzz_harnesses.mutators import extreme, extreme_varint, poke, segment_mutator, value_mutator
from bench.fuzz_harnesses.seeds import dedup


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
#: listed in ``tests/formats/test_remote_log_metadata.py``, which holds the same bytes).
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
        return name + self.topic_id + struct.pack(">i", wrap(self.partition, 32)) + tagged_fields(self.tip_tags)

    def _segment_fields(self) -> bytes:
        out = struct.pack(
            ">qqiqq",
            wrap(self.start_offset, 64),
            wrap(self.end_offset, 64),
            wrap(self.broker_id, 32),
            wrap(self.max_timestamp, 64),
            wrap(self.event_timestamp, 64),
        )
        out += self.epochs_count if self.epochs_count is not None else uvarint(len(self.epochs) + 1)
        out += b"".join(struct.pack(">iq", wrap(e, 32), wrap(o, 64)) + t for e, o, t in self.epochs)
        return out + struct.pack(">i", wrap(self.size, 32)) + self._custom() + self._state_and_tags()

    def _custom(self) -> bytes:
        if self.custom is None:
            return self.custom_len if self.custom_len is not None else b"\x00"
        return (self.custom_len if self.custom_len is not None else uvarint(len(self.custom) + 1)) + self.custom

    def _state_and_tags(self) -> bytes:
        tags = self.tag_section if self.tag_section is not None else tagged_fields(self.tags)
        return struct.pack(">b", wrap(self.state, 8)) + tags

    def encode(self) -> bytes:
        head = self.header
        if head is None:
            head = uvarint(self.frame_version) + uvarint(self.api_key) + uvarint(self.version)
        sid_entry = self._tip() + self.segment_id + tagged_fields(self.sid_tags)
        times = struct.pack(">iq", wrap(self.broker_id, 32), wrap(self.event_timestamp, 64))
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
    check(b.schema.equals(REMOTE_RAW_SCHEMA), "a decoded batch not in REMOTE_RAW_SCHEMA")
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
    check(rows.num_rows == len(values), f"{rows.num_rows} record rows for {len(values)} records")
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
        check(err in (UNDECODABLE, UNSUPPORTED), f"decode_error {err!r} for a non-null value")
        check(bool(detail), "a RemoteLogMetadataDecodeError without a message")
        check(ref == err, f"the decoder raised ({err}: {detail}) where the reference gives {ref!r}")
    else:
        check(ref == row, f"decoded {row} where the reference gives {ref!r}")
        try:
            pa.RecordBatch.from_pylist([row], schema=_REMOTE_VALUE_SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise HarnessViolation(f"decoded row does not fit its Arrow columns: {exc}") from None
    seg = _remote_batch([data], base=40)
    out = decode_remote_log_metadata_segment(seg, REMOTE_SEGMENT_PATH, REMOTE_PARTITION)
    for b in out:
        _check_remote_batch(b)
    table = pa.Table.from_batches(out, schema=REMOTE_RAW_SCHEMA)
    check(table.num_rows == 1 and table.column("kind")[0].as_py() == "record", "not one record row for one value")
    check(table.column("offset").to_pylist() == [40], "the record row not at its offset")
    _check_remote_rows(table, [data])


def remote_log_metadata_segment(data: bytes) -> None:
    """A ``__remote_log_metadata`` segment through ``decode_remote_log_metadata_segment``: batches, records and
    every record value (the four record types, tagged fields, null values, broken values).  ReadIssue rows carry the
    file and a byte position inside it; every data record of the batches the segment reader accepts is one row,
    at its batch's position and its offset, equal to the single-value decode of its value.  Documented
    exceptions: none."""
    from audit.formats.record_batch import ATTR_CONTROL

    out = decode_remote_log_metadata_segment(data, REMOTE_SEGMENT_PATH, REMOTE_PARTITION)
    check(len(out) <= 2, f"{len(out)} batches, not at most records + issues")
    for b in out:
        _check_remote_batch(b)
    table = pa.Table.from_batches(out, schema=REMOTE_RAW_SCHEMA)
    n = len(data)
    kind = table.column("kind")
    require(table, pc.is_in(kind, pa.array(["issue", "record"])), "a row neither issue nor record")
    require(table, pc.equal(table.column("source_partition"), REMOTE_PARTITION), "a row without its partition")
    issues = table.filter(pc.equal(kind, "issue"))
    require(issues, pc.equal(issues.column("source_file"), REMOTE_SEGMENT_PATH), "an issue row without its file")
    require(issues, pc.greater(pc.utf8_length(issues.column("decode_error")), 0), "an issue row without a reason")
    pos = issues.column("position")
    require(issues, pc.and_(pc.greater_equal(pos, 0), pc.less_equal(pos, n)), "an issue without a byte position")
    rows = table.filter(pc.equal(kind, "record"))
    require(rows, pc.equal(rows.column("records_affected"), 1), "a record row not of one record")
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
    check(got == where, "record rows not at their batch position, offset and timestamp")


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
    return dedup(out)


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
    return dedup(out)


REMOTE_LOG_METADATA_VALUE = make_harness(
    "remote_log_metadata_value",
    remote_log_metadata_value,
    _remote_values,
    value_mutator(_remote_value_edit),
)
REMOTE_LOG_METADATA_SEGMENT = make_harness(
    "remote_log_metadata_segment",
    remote_log_metadata_segment,
    _remote_segments,
    segment_mutator(remote_kv_mutator),
)
