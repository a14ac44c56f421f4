"""``__remote_log_metadata`` (tiered storage, KIP-405): values per Kafka's four schemas and whole segments.

The ``KAFKA_4_4`` values were written by Kafka 4.4.0's own ``RemoteLogMetadataSerde.serialize`` (kafka-storage
4.4.0 on the JVM, from RemoteLogSegmentMetadata / ...Update / RemotePartitionDeleteMetadata /
RemoteLogSegmentMetadataSnapshot objects with the fields given next to them); the small encoder below writes the
same bytes field by field from the schema JSON (checked against them), and the other values (unknown tagged fields
in every struct, extremes, broken bytes) with it.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from audit.formats.remote_log_metadata import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    DELETE_PARTITION_FINISHED,
    DELETE_PARTITION_MARKED,
    DELETE_PARTITION_STARTED,
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    NULL_VALUE,
    PARTITION_DELETE_STATE_NAMES,
    REMOTE_LOG_METADATA_TOPIC,
    REMOTE_RAW_SCHEMA,
    REMOTE_VALUE_FIELDS,
    SEGMENT_STATE_NAMES,
    UNDECODABLE,
    UNSUPPORTED,
    RemoteLogMetadataDecodeError,
    decode_remote_log_metadata_segment,
    decode_remote_log_metadata_value,
)
from bench.fuzz_harnesses import build_record, compress, join_records, v2_batch

TOPIC_ID = bytes.fromhex("0123456789abcdeffedcba9876543210")
SEGMENT_ID = bytes.fromhex("11112222333344445555666677778888")
#: Kafka's Uuid.toString() of the two ids above (printed by org.apache.kafka.common.Uuid 4.4.0)
TOPIC_ID_STR = "ASNFZ4mrze_-3LqYdlQyEA"
SEGMENT_ID_STR = "EREiIjMzRERVVWZmd3eIiA"


# --------------------------------------------------------------------------- a small encoder, per the schema JSON


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def cbytes(b: bytes | None) -> bytes:
    return b"\x00" if b is None else uvarint(len(b) + 1) + b


def tags(fields=()) -> bytes:
    """A tagged-field section: count, then (tag, size, bytes) per field."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in fields)


def topic_id_partition(name="orders", tid=TOPIC_ID, partition=3, tagged=()) -> bytes:
    return cstr(name) + tid + struct.pack(">i", partition) + tags(tagged)


def segment_id_entry(tip: bytes | None = None, sid=SEGMENT_ID, tagged=()) -> bytes:
    return (topic_id_partition() if tip is None else tip) + sid + tags(tagged)


def epochs(pairs, entry_tags=()) -> bytes:
    return uvarint(len(pairs) + 1) + b"".join(struct.pack(">iq", e, o) + tags(entry_tags) for e, o in pairs)


def frame(api_key: int, body: bytes, version: int = 0, frame_version: int = 1) -> bytes:
    return uvarint(frame_version) + uvarint(api_key) + uvarint(version) + body


def segment_fields(start, end, broker, max_ts, event_ts, pairs, size, custom, state, txn=None, tagged=(), ep=None):
    """StartOffset .. RemoteLogSegmentState and the tagged fields (TxnIndexEmpty as tag 0 when ``txn`` is set)."""
    t = list(tagged) + ([(0, b"\x01" if txn else b"\x00")] if txn is not None else [])
    return (
        struct.pack(">qqiqq", start, end, broker, max_ts, event_ts)
        + (epochs(pairs) if ep is None else ep)
        + struct.pack(">i", size)
        + cbytes(custom)
        + struct.pack(">b", state)
        + tags(sorted(t))
    )


def segment_value(sid_entry=None, **kw) -> bytes:
    """RemoteLogSegmentMetadataRecord (api key 0)."""
    return frame(0, (segment_id_entry() if sid_entry is None else sid_entry) + segment_fields(**kw))


def update_value(broker, event_ts, custom, state, sid_entry=None, tagged=()) -> bytes:
    """RemoteLogSegmentMetadataUpdateRecord (api key 1)."""
    body = (segment_id_entry() if sid_entry is None else sid_entry) + struct.pack(">iq", broker, event_ts)
    return frame(1, body + cbytes(custom) + struct.pack(">b", state) + tags(tagged))


def delete_value(broker, event_ts, state, tip=None, tagged=()) -> bytes:
    """RemotePartitionDeleteMetadataRecord (api key 2)."""
    body = (topic_id_partition() if tip is None else tip) + struct.pack(">iqb", broker, event_ts, state)
    return frame(2, body + tags(tagged))


def snapshot_value(sid=SEGMENT_ID, **kw) -> bytes:
    """RemoteLogSegmentMetadataSnapshotRecord (api key 3)."""
    return frame(3, sid + segment_fields(**kw))


# --------------------------------------------------------------------------- Kafka 4.4.0's own bytes

KAFKA_4_4 = {
    # RemoteLogSegmentMetadata(orders-3, start 1000, end 1999, maxTs 1700000000123, broker 2, eventTs 1700000000456,
    # size 1048576, CustomMetadata [1, 2, 3], COPY_SEGMENT_STARTED, epochs {5: 1000, 7: 1500}, txnIdxEmpty true)
    "segment_custom_txn": "010000076f72646572730123456789abcdeffedcba98765432100000000300111122223333444455556666777788880"
    "000000000000003e800000000000007cf000000020000018bcfe5687b0000018bcfe569c8030000000500000000000003e8000000000700"
    "000000000005dc0000100000040102030001000101",
    # the same segment id: start 0, end 999, maxTs 1700000000000, broker 1, eventTs 1700000000001, size 4096,
    # no CustomMetadata, COPY_SEGMENT_STARTED, epochs {0: 0}, txnIdxEmpty false
    "segment_plain": "010000076f72646572730123456789abcdeffedcba98765432100000000300111122223333444455556666777788880000"
    "0000000000000000000000000003e7000000010000018bcfe568000000018bcfe56801020000000000000000000000000000001000000000",
    # RemoteLogSegmentMetadataUpdate(eventTs 1700000000789, CustomMetadata [9, 8], COPY_SEGMENT_FINISHED, broker 2)
    "update_custom": "010100076f72646572730123456789abcdeffedcba9876543210000000030011112222333344445555666677778888"
    "00000000020000018bcfe56b150309080100",
    # RemoteLogSegmentMetadataUpdate(eventTs 1700000000999, no CustomMetadata, DELETE_SEGMENT_FINISHED, broker 4)
    "update_plain": "010100076f72646572730123456789abcdeffedcba9876543210000000030011112222333344445555666677778888"
    "00000000040000018bcfe56be7000300",
    # RemotePartitionDeleteMetadata(orders-3, DELETE_PARTITION_MARKED, eventTs 1700000001000, broker 3000)
    "partition_delete": "010200076f72646572730123456789abcdeffedcba9876543210000000030000000bb80000018bcfe56be80000",
    # RemoteLogSegmentMetadataSnapshot(segment id, start 2000, end 2999, maxTs 1700000002000, broker 5,
    # eventTs 1700000002001, size 777, no CustomMetadata, DELETE_SEGMENT_STARTED, epochs {5: 1000, 7: 1500}, true)
    "snapshot": "0103001111222233334444555566667777888800000000000007d00000000000000bb7000000050000018bcfe56fd00000018b"
    "cfe56fd1030000000500000000000003e8000000000700000000000005dc0000000309000201000101",
}

ORDERS = {"topic": "orders", "topic_id": TOPIC_ID_STR, "partition": 3}
NO_SEGMENT = {
    "start_offset": None,
    "end_offset": None,
    "max_timestamp": None,
    "segment_leader_epochs": None,
    "segment_size_bytes": None,
}
EP_5_7 = [{"leader_epoch": 5, "start_offset": 1000}, {"leader_epoch": 7, "start_offset": 1500}]

EXPECTED = {
    "segment_custom_txn": dict(
        ORDERS,
        record_type="RemoteLogSegmentMetadataRecord",
        api_key=0,
        segment_id=SEGMENT_ID_STR,
        start_offset=1000,
        end_offset=1999,
        broker_id=2,
        event_timestamp=1700000000456,
        max_timestamp=1700000000123,
        segment_leader_epochs=EP_5_7,
        segment_size_bytes=1048576,
        state=0,
        state_name="COPY_SEGMENT_STARTED",
        custom_metadata=b"\x01\x02\x03",
        txn_index_empty=True,
    ),
    "segment_plain": dict(
        ORDERS,
        record_type="RemoteLogSegmentMetadataRecord",
        api_key=0,
        segment_id=SEGMENT_ID_STR,
        start_offset=0,
        end_offset=999,
        broker_id=1,
        event_timestamp=1700000000001,
        max_timestamp=1700000000000,
        segment_leader_epochs=[{"leader_epoch": 0, "start_offset": 0}],
        segment_size_bytes=4096,
        state=0,
        state_name="COPY_SEGMENT_STARTED",
        custom_metadata=None,
        txn_index_empty=False,
    ),
    "update_custom": dict(
        ORDERS,
        **NO_SEGMENT,
        record_type="RemoteLogSegmentMetadataUpdateRecord",
        api_key=1,
        segment_id=SEGMENT_ID_STR,
        broker_id=2,
        event_timestamp=1700000000789,
        state=1,
        state_name="COPY_SEGMENT_FINISHED",
        custom_metadata=b"\x09\x08",
        txn_index_empty=None,
    ),
    "update_plain": dict(
        ORDERS,
        **NO_SEGMENT,
        record_type="RemoteLogSegmentMetadataUpdateRecord",
        api_key=1,
        segment_id=SEGMENT_ID_STR,
        broker_id=4,
        event_timestamp=1700000000999,
        state=3,
        state_name="DELETE_SEGMENT_FINISHED",
        custom_metadata=None,
        txn_index_empty=None,
    ),
    "partition_delete": dict(
        ORDERS,
        **NO_SEGMENT,
        record_type="RemotePartitionDeleteMetadataRecord",
        api_key=2,
        segment_id=None,
        broker_id=3000,
        event_timestamp=1700000001000,
        state=0,
        state_name="DELETE_PARTITION_MARKED",
        custom_metadata=None,
        txn_index_empty=None,
    ),
    "snapshot": dict(
        record_type="RemoteLogSegmentMetadataSnapshotRecord",
        api_key=3,
        topic=None,
        topic_id=None,
        partition=None,
        segment_id=SEGMENT_ID_STR,
        start_offset=2000,
        end_offset=2999,
        broker_id=5,
        event_timestamp=1700000002001,
        max_timestamp=1700000002000,
        segment_leader_epochs=EP_5_7,
        segment_size_bytes=777,
        state=2,
        state_name="DELETE_SEGMENT_STARTED",
        custom_metadata=None,
        txn_index_empty=True,
    ),
}


def test_the_contract_names_states_and_columns():
    assert REMOTE_LOG_METADATA_TOPIC == "__remote_log_metadata"
    # RemoteLogSegmentState / RemotePartitionDeleteState ids of Kafka's storage-api
    assert (COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED) == (0, 1)
    assert (DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED) == (2, 3)
    assert (DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED, DELETE_PARTITION_FINISHED) == (0, 1, 2)
    assert SEGMENT_STATE_NAMES == {
        0: "COPY_SEGMENT_STARTED",
        1: "COPY_SEGMENT_FINISHED",
        2: "DELETE_SEGMENT_STARTED",
        3: "DELETE_SEGMENT_FINISHED",
    }
    assert PARTITION_DELETE_STATE_NAMES == {
        0: "DELETE_PARTITION_MARKED",
        1: "DELETE_PARTITION_STARTED",
        2: "DELETE_PARTITION_FINISHED",
    }
    assert issubclass(RemoteLogMetadataDecodeError, ValueError)
    el = pa.struct([("leader_epoch", pa.int32()), ("start_offset", pa.int64())])
    assert REMOTE_RAW_SCHEMA == pa.schema(
        [
            ("source_file", pa.string()),
            ("source_partition", pa.int32()),
            ("kind", pa.string()),
            ("position", pa.int64()),
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("record_type", pa.string()),
            ("api_key", pa.int16()),
            ("topic", pa.string()),
            ("topic_id", pa.string()),
            ("partition", pa.int32()),
            ("segment_id", pa.string()),
            ("start_offset", pa.int64()),
            ("end_offset", pa.int64()),
            ("broker_id", pa.int32()),
            ("event_timestamp", pa.int64()),
            ("max_timestamp", pa.int64()),
            ("segment_leader_epochs", pa.list_(el)),
            ("segment_size_bytes", pa.int32()),
            ("state", pa.int8()),
            ("state_name", pa.string()),
            ("decode_error", pa.string()),
            ("detail", pa.string()),
            ("records_affected", pa.int32()),
        ]
    )


@pytest.mark.parametrize("name", sorted(KAFKA_4_4))
def test_values_kafka_4_4_wrote_decode_field_by_field(name):
    row = decode_remote_log_metadata_value(bytes.fromhex(KAFKA_4_4[name]))
    assert row == EXPECTED[name]
    # every decoded column fits its Arrow type
    pa.RecordBatch.from_pylist([row], schema=pa.schema(REMOTE_VALUE_FIELDS))


def test_the_encoder_writes_what_kafka_wrote():
    """The test encoder against Kafka's bytes, so the values below built with it are what Kafka would write."""
    ep = [(5, 1000), (7, 1500)]
    ts = 1700000000000
    assert segment_value(
        start=1000,
        end=1999,
        broker=2,
        max_ts=ts + 123,
        event_ts=ts + 456,
        pairs=ep,
        size=1048576,
        custom=b"\x01\x02\x03",
        state=0,
        txn=True,
    ) == bytes.fromhex(KAFKA_4_4["segment_custom_txn"])
    assert segment_value(
        start=0, end=999, broker=1, max_ts=ts, event_ts=ts + 1, pairs=[(0, 0)], size=4096, custom=None, state=0
    ) == bytes.fromhex(KAFKA_4_4["segment_plain"])
    assert update_value(2, ts + 789, b"\x09\x08", 1) == bytes.fromhex(KAFKA_4_4["update_custom"])
    assert update_value(4, ts + 999, None, 3) == bytes.fromhex(KAFKA_4_4["update_plain"])
    assert delete_value(3000, ts + 1000, 0) == bytes.fromhex(KAFKA_4_4["partition_delete"])
    assert snapshot_value(
        start=2000,
        end=2999,
        broker=5,
        max_ts=ts + 2000,
        event_ts=ts + 2001,
        pairs=ep,
        size=777,
        custom=None,
        state=2,
        txn=True,
    ) == bytes.fromhex(KAFKA_4_4["snapshot"])


# --------------------------------------------------------------------------- every field, tagged fields, extremes

UNKNOWN = [(7, b"\xde\xad"), (300, b"")]  # unknown tags (a 2-byte tag number, an empty field): skipped


def test_segment_record_with_unknown_tags_in_every_struct_and_extreme_values():
    """Kafka's serde reads these bytes (its RemoteLogSegmentMetadata constructor then refuses the negative start
    offset): the decoder gives them as written, signs and all."""
    tip = topic_id_partition("t\u00fcpic.\u00e9", b"\xff" * 15 + b"\xfe", -1, tagged=UNKNOWN)
    sid = segment_id_entry(tip, SEGMENT_ID[::-1], tagged=[(1, b"x")])
    pairs = [(0, 0), (2**31 - 1, 2**63 - 1), (-1, -(2**63)), (3, 17)]
    ep = uvarint(len(pairs) + 1) + b"".join(
        struct.pack(">iq", e, o) + tags([(9, b"\x01\x02")] if i == 1 else ()) for i, (e, o) in enumerate(pairs)
    )
    v = segment_value(
        sid,
        start=-(2**63),
        end=2**63 - 1,
        broker=-(2**31),
        max_ts=-1,
        event_ts=2**63 - 1,
        pairs=None,
        ep=ep,
        size=2**31 - 1,
        custom=b"",
        state=DELETE_SEGMENT_FINISHED,
        txn=False,
        tagged=UNKNOWN,
    )
    row = decode_remote_log_metadata_value(v)
    assert row == {
        "record_type": "RemoteLogSegmentMetadataRecord",
        "api_key": 0,
        "topic": "t\u00fcpic.\u00e9",
        "topic_id": "_____________________g",  # Kafka's Uuid(-1L, -2L).toString()
        "partition": -1,
        "segment_id": "iIh3d2ZmVVVERDMzIiIREQ",
        "start_offset": -(2**63),
        "end_offset": 2**63 - 1,
        "broker_id": -(2**31),
        "event_timestamp": 2**63 - 1,
        "max_timestamp": -1,
        "segment_leader_epochs": [
            {"leader_epoch": 0, "start_offset": 0},
            {"leader_epoch": 2**31 - 1, "start_offset": 2**63 - 1},
            {"leader_epoch": -1, "start_offset": -(2**63)},
            {"leader_epoch": 3, "start_offset": 17},
        ],
        "segment_size_bytes": 2**31 - 1,
        "state": 3,
        "state_name": "DELETE_SEGMENT_FINISHED",
        "custom_metadata": b"",  # empty, not null
        "txn_index_empty": False,
    }


def test_txn_index_empty_is_tag_0_of_segment_and_snapshot_records_only():
    kw = dict(start=0, end=9, broker=1, max_ts=5, event_ts=6, pairs=[(1, 0)], size=10, custom=None, state=1)
    assert decode_remote_log_metadata_value(segment_value(**kw))["txn_index_empty"] is False  # absent: default
    assert decode_remote_log_metadata_value(segment_value(**kw, txn=True))["txn_index_empty"] is True
    assert decode_remote_log_metadata_value(snapshot_value(**kw, tagged=[(0, b"\x07")]))["txn_index_empty"] is True
    # tag 0 means nothing in the update and partition delete records (version 0): skipped whatever its size
    up = decode_remote_log_metadata_value(update_value(1, 2, None, 2, tagged=[(0, b"\x00\x00\x00\x05")]))
    assert (up["state_name"], up["txn_index_empty"]) == ("DELETE_SEGMENT_STARTED", None)
    de = decode_remote_log_metadata_value(delete_value(1, 2, 1, tagged=[(0, b""), (1, b"\x00" * 8)]))
    assert (de["state_name"], de["txn_index_empty"]) == ("DELETE_PARTITION_STARTED", None)
    with pytest.raises(RemoteLogMetadataDecodeError, match="TxnIndexEmpty"):
        decode_remote_log_metadata_value(segment_value(**kw, tagged=[(0, b"\x01\x00")]))


def test_update_and_partition_delete_records_with_unknown_tags():
    tip = topic_id_partition("logs", TOPIC_ID, 0, tagged=UNKNOWN)
    row = decode_remote_log_metadata_value(
        update_value(-1, 0, b"\x00" * 300, DELETE_SEGMENT_STARTED, segment_id_entry(tip, tagged=UNKNOWN), UNKNOWN)
    )
    assert row == dict(
        NO_SEGMENT,
        record_type="RemoteLogSegmentMetadataUpdateRecord",
        api_key=1,
        topic="logs",
        topic_id=TOPIC_ID_STR,
        partition=0,
        segment_id=SEGMENT_ID_STR,
        broker_id=-1,
        event_timestamp=0,
        state=2,
        state_name="DELETE_SEGMENT_STARTED",
        custom_metadata=b"\x00" * 300,  # a 2-byte length varint
        txn_index_empty=None,
    )
    row = decode_remote_log_metadata_value(delete_value(7, 123, DELETE_PARTITION_FINISHED, tip, UNKNOWN))
    assert row == dict(
        NO_SEGMENT,
        record_type="RemotePartitionDeleteMetadataRecord",
        api_key=2,
        topic="logs",
        topic_id=TOPIC_ID_STR,
        partition=0,
        segment_id=None,
        broker_id=7,
        event_timestamp=123,
        state=2,
        state_name="DELETE_PARTITION_FINISHED",  # 2 is DELETE_SEGMENT_STARTED for a segment: not here
        custom_metadata=None,
        txn_index_empty=None,
    )


def test_snapshot_record_has_a_segment_id_and_no_topic_partition():
    v = snapshot_value(
        SEGMENT_ID[::-1],
        start=5,
        end=5,
        broker=0,
        max_ts=1,
        event_ts=2,
        pairs=[(4, 5), (6, 5)],
        size=0,
        custom=b"meta",
        state=COPY_SEGMENT_FINISHED,
        tagged=UNKNOWN,
    )
    row = decode_remote_log_metadata_value(v)
    assert (row["topic"], row["topic_id"], row["partition"]) == (None, None, None)
    assert row["segment_id"] == "iIh3d2ZmVVVERDMzIiIREQ"
    assert (row["start_offset"], row["end_offset"], row["max_timestamp"], row["event_timestamp"]) == (5, 5, 1, 2)
    assert row["segment_leader_epochs"] == [
        {"leader_epoch": 4, "start_offset": 5},
        {"leader_epoch": 6, "start_offset": 5},
    ]
    assert (row["custom_metadata"], row["txn_index_empty"]) == (b"meta", False)
    assert (row["state"], row["state_name"]) == (1, "COPY_SEGMENT_FINISHED")


def test_a_state_kafka_does_not_define_keeps_its_id_without_a_name():
    row = decode_remote_log_metadata_value(update_value(1, 2, None, 9))
    assert (row["state"], row["state_name"]) == (9, None)
    row = decode_remote_log_metadata_value(delete_value(1, 2, 3))  # 3 is a segment state, not a partition one
    assert (row["state"], row["state_name"]) == (3, None)
    row = decode_remote_log_metadata_value(update_value(1, 2, None, -128))
    assert (row["state"], row["state_name"]) == (-128, None)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("name", sorted(KAFKA_4_4))
def test_every_truncation_raises(name):
    v = bytes.fromhex(KAFKA_4_4[name])
    for n in range(len(v)):
        with pytest.raises(RemoteLogMetadataDecodeError) as e:
            decode_remote_log_metadata_value(v[:n])
        assert e.value.reason == UNDECODABLE, n


def test_framing_errors_and_leftover_bytes_raise():
    good = bytes.fromhex(KAFKA_4_4["update_plain"])
    body = good[3:]
    cases = {
        "frame version 0": (frame(1, body, frame_version=0), UNSUPPORTED),
        "frame version 2": (frame(1, body, frame_version=2), UNSUPPORTED),
        "api key 4": (frame(4, body), UNSUPPORTED),
        "api key 128": (frame(128, body), UNSUPPORTED),
        "version 1": (frame(1, body, version=1), UNSUPPORTED),
        "trailing byte": (good + b"\x00", UNDECODABLE),
        "trailing bytes": (good + b"\x01\x02", UNDECODABLE),
        "empty": (b"", UNDECODABLE),
        "frame version 2, nothing after it": (b"\x02", UNSUPPORTED),  # checked before the api key, as Kafka does
        "frame version 1, nothing after it": (b"\x01", UNDECODABLE),
        "6-byte varint": (b"\x81\x80\x80\x80\x80\x00" + good[1:], UNDECODABLE),
    }
    for what, (value, reason) in cases.items():
        with pytest.raises(RemoteLogMetadataDecodeError) as e:
            decode_remote_log_metadata_value(value)
        assert e.value.reason == reason, what
    with pytest.raises(RemoteLogMetadataDecodeError, match="api key 4"):
        decode_remote_log_metadata_value(frame(4, body))
    with pytest.raises(RemoteLogMetadataDecodeError, match="version 1"):
        decode_remote_log_metadata_value(frame(1, body, version=1))
    with pytest.raises(RemoteLogMetadataDecodeError) as e:
        decode_remote_log_metadata_value(None)
    assert e.value.reason == NULL_VALUE
    # the same bytes with one leading 1 (frame) over-long as a 2-byte varint still read
    assert decode_remote_log_metadata_value(b"\x81\x00" + good[1:]) == decode_remote_log_metadata_value(good)


def test_malformed_bodies_raise():
    kw = dict(start=0, end=9, broker=1, max_ts=5, event_ts=6, pairs=[(1, 0)], size=10, custom=None, state=1)
    tip_null_name = b"\x00" + TOPIC_ID + struct.pack(">i", 0) + tags()
    long_name = topic_id_partition("x" * 32768)
    bad = {
        "null topic name": update_value(1, 2, None, 1, segment_id_entry(tip_null_name)),
        "topic name longer than 32767": delete_value(1, 2, 0, long_name),
        "null SegmentLeaderEpochs": segment_value(**dict(kw, pairs=None), ep=b"\x00"),
        "epochs count past the end": segment_value(**dict(kw, pairs=None), ep=uvarint(1000) + struct.pack(">iq", 1, 2)),
        "custom metadata past the end": update_value(1, 2, None, 1)[:-3] + uvarint(50) + b"abc\x01\x00",
        "tag size past the end": delete_value(1, 2, 0)[:-1] + b"\x01\x05\x09\x00",
        "10001 tagged fields": delete_value(1, 2, 0, tagged=[(i, b"") for i in range(10001)]),
    }
    for what, v in bad.items():
        with pytest.raises(RemoteLogMetadataDecodeError) as e:
            decode_remote_log_metadata_value(v)
        assert e.value.reason == UNDECODABLE, what
    # Kafka reads bytes that are not UTF-8 as replacement characters (new String(bytes, UTF_8)), so does the decoder
    odd = decode_remote_log_metadata_value(delete_value(1, 2, 0, b"\x03\xff\xfe" + TOPIC_ID + bytes(5)))
    assert (odd["topic"], odd["partition"]) == ("\ufffd\ufffd", 0)
    # Kafka's limit is more than 10000: exactly 10000 is read
    many = decode_remote_log_metadata_value(delete_value(1, 2, 0, tagged=[(i + 1, b"") for i in range(10000)]))
    assert many["state_name"] == "DELETE_PARTITION_MARKED"


# --------------------------------------------------------------------------- segments

PATH = "/data/kafka/__remote_log_metadata-11/00000000000000000000.log"
BASE_TS = 1_700_000_000_000  # v2_batch's base timestamp


def block(values, ts_deltas=None) -> bytes:
    """An uncompressed records block: null keys, these values, offset deltas 0.., no headers."""
    ts_deltas = ts_deltas or [0] * len(values)
    return join_records([build_record([0, t, i, None, v, b"\x00"]) for i, (v, t) in enumerate(zip(values, ts_deltas))])


def segment_of(groups, codec: int = 0) -> tuple[bytes, list[int]]:
    """CRC-valid v2 batches (offsets following on from 100), and each batch's byte position."""
    out, base, positions = bytearray(), 100, []
    for values in groups:
        payload = block(values, [10 * i for i in range(len(values))])
        positions.append(len(out))
        out += v2_batch(compress(codec, payload) if codec else payload, len(values), codec, base_offset=base)
        base += len(values)
    return bytes(out), positions


def table_of(out) -> pa.Table:
    for b in out:
        assert b.schema.equals(REMOTE_RAW_SCHEMA)
        b.validate(full=True)
    return pa.Table.from_batches(out, schema=REMOTE_RAW_SCHEMA)


LIFE = [
    bytes.fromhex(KAFKA_4_4["segment_custom_txn"]),
    bytes.fromhex(KAFKA_4_4["update_custom"]),
    bytes.fromhex(KAFKA_4_4["update_plain"]),
    bytes.fromhex(KAFKA_4_4["partition_delete"]),
]


def _decoded(row: dict, name: str) -> bool:
    want = {k: v for k, v in EXPECTED[name].items() if k not in ("custom_metadata", "txn_index_empty")}
    return {k: row[k] for k in want} == want


def test_a_segment_decodes_to_one_row_per_record_and_a_corrupt_batch_is_an_issue():
    seg, pos = segment_of([LIFE[:2], [LIFE[2]], [LIFE[3], LIFE[2]], [LIFE[0], b"\x01\x00\x00\x00", LIFE[1]]])
    # flip one byte of the third batch's records: its CRC no longer matches
    broken = bytearray(seg)
    broken[pos[2] + 70] ^= 0xFF
    commit = build_record([0, 0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", b"\x00"])
    marker = v2_batch(join_records([commit]), 1, 0, base_offset=200, attributes=0x30)  # a transaction marker
    data = bytes(broken) + marker
    out = decode_remote_log_metadata_segment(data, PATH, 11)
    assert len(out) == 2
    t = table_of(out)
    rows = t.to_pylist()
    records = [r for r in rows if r["kind"] == "record"]
    issues = [r for r in rows if r["kind"] == "issue"]
    # batch 3 (offsets 103-104) is left out, the transaction marker (offset 200) is no row
    assert [r["offset"] for r in records] == [100, 101, 102, 105, 106, 107]
    assert [r["position"] for r in records] == [pos[0], pos[0], pos[1], pos[3], pos[3], pos[3]]
    assert [r["timestamp"] for r in records] == [BASE_TS, BASE_TS + 10, BASE_TS, BASE_TS, BASE_TS + 10, BASE_TS + 20]
    assert {r["source_partition"] for r in rows} == {11}
    assert [r["records_affected"] for r in records] == [1] * 6
    assert _decoded(records[0], "segment_custom_txn") and _decoded(records[3], "segment_custom_txn")
    assert _decoded(records[1], "update_custom") and _decoded(records[5], "update_custom")
    assert _decoded(records[2], "update_plain")
    # the record that does not decode: its reason, the decoder's message, the file, and no decoded field
    bad = records[4]
    assert (bad["decode_error"], bad["source_file"]) == (UNDECODABLE, PATH)
    assert bad["detail"] == "RemoteLogSegmentMetadataRecord v0: non-nullable string TopicIdPartition.Name is null"
    assert all(bad[name] is None for name, _ in REMOTE_VALUE_FIELDS)
    # the decoded records name no file (as the share-state rows) and no error
    assert [(r["source_file"], r["decode_error"], r["detail"]) for r in records if r is not bad] == [(None,) * 3] * 5
    assert len(issues) == 1
    issue = issues[0]
    assert (issue["decode_error"], issue["source_file"], issue["position"]) == ("crc_mismatch", PATH, pos[2])
    assert (issue["offset"], issue["records_affected"]) == (103, 2)
    assert "crc" in issue["detail"]
    assert all(issue[name] is None for name, _ in REMOTE_VALUE_FIELDS) and issue["timestamp"] is None
    # without the CRC check the flipped byte is read: batch 3's records are rows again
    loose = [r for r in table_of(decode_remote_log_metadata_segment(data, PATH, 11, verify_crc=False)).to_pylist()]
    assert [r["offset"] for r in loose] == list(range(100, 108))
    assert all(r["kind"] == "record" for r in loose)


def test_a_torn_tail_is_an_issue_and_compressed_batches_read_as_plain_ones():
    plain, _ = segment_of([LIFE[:2], LIFE[2:]])
    for codec in (1, 2, 3, 4):
        seg, pos = segment_of([LIFE[:2], LIFE[2:]], codec)
        rows = table_of(decode_remote_log_metadata_segment(seg + seg[:40], PATH, 0)).to_pylist()
        ref = table_of(decode_remote_log_metadata_segment(plain, PATH, 0)).to_pylist()
        keep = [k for k in rows[0] if k != "position"]
        assert [{k: r[k] for k in keep} for r in rows[:4]] == [{k: r[k] for k in keep} for r in ref], codec
        assert [r["position"] for r in rows[:4]] == [pos[0], pos[0], pos[1], pos[1]]
        assert rows[4]["kind"] == "issue" and rows[4]["decode_error"] == "partial_batch"
        assert (rows[4]["position"], rows[4]["source_file"]) == (len(seg), PATH)
        assert len(rows) == 5


def test_null_values_and_empty_segments():
    seg, _ = segment_of([[None, LIFE[3]]])
    rows = table_of(decode_remote_log_metadata_segment(seg, PATH, 2)).to_pylist()
    assert [(r["offset"], r["decode_error"], r["source_file"]) for r in rows] == [
        (100, NULL_VALUE, PATH),
        (101, None, None),
    ]
    assert rows[1]["state_name"] == "DELETE_PARTITION_MARKED"
    assert decode_remote_log_metadata_segment(b"", PATH, 2) == []
    assert decode_remote_log_metadata_segment(bytes(4096), PATH, 2) == []  # preallocated, unwritten
    garbage = table_of(decode_remote_log_metadata_segment(b"\x00" * 20 + b"\x07" * 50, PATH, 2)).to_pylist()
    assert [(r["kind"], r["source_file"]) for r in garbage] == [("issue", PATH)]
