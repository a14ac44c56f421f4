"""Legacy message sets (magic 0 and 1): logs written before Kafka 0.11 or under an old
``log.message.format.version``.  Offset commits in them are decoded like any other
(``LegacyRecord``, ``AbstractLegacyRecordBatch``), and a legacy tail gives the log end offset.

The messages are written by kafka-python's ``LegacyRecordBatchBuilder`` and then given the
offsets a broker assigns: absolute per message, and for a compressed wrapper the offset of
its last inner message (magic 1 inner offsets stay relative, magic 0 ones absolute).
"""

import struct
import zlib

import pytest

from audit.formats.record_batch import scan_batches
from audit.formats.segments import decode_offsets_segment

TS = 1_600_000_000_000
GZIP, SNAPPY, LZ4 = 1, 2, 3


def _key(group: bytes, topic: bytes, partition: int) -> bytes:
    return (
        struct.pack(">hh", 1, len(group)) + group + struct.pack(">h", len(topic)) + topic + struct.pack(">i", partition)
    )


def _value_v1(offset: int, metadata: bytes = b"") -> bytes:
    """OffsetCommitValue v1: offset, metadata, commit timestamp, expire timestamp (no leader epoch)."""
    return (
        struct.pack(">hqh", 1, offset, len(metadata))
        + metadata
        + struct.pack(">qq", TS + offset, TS + offset + 86_400_000)
    )


def _value_v0(offset: int) -> bytes:
    return struct.pack(">hqh", 0, offset, 0) + struct.pack(">q", TS + offset)


def _value_v3(offset: int, epoch: int) -> bytes:
    return struct.pack(">hqih", 3, offset, epoch, 0) + struct.pack(">q", TS + offset)


def _legacy(magic: int, codec: int, base: int, records) -> bytes:
    """A legacy message set holding ``records`` [(key, value)] at offsets ``base``.. as a broker stores it."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v) in enumerate(records):
        inner = i if (codec and magic == 1) else base + i
        assert b.append(inner, timestamp=TS + i, key=k, value=v) is not None
    buf = bytearray(b.build())
    if codec:  # the wrapper carries the offset of its last inner message (not covered by the CRC)
        buf[0:8] = struct.pack(">q", base + len(records) - 1)
    return bytes(buf)


def _v2(base: int, records) -> bytes:
    import crc32c
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=TS + 1000 + i, key=k, value=v, headers=[])
    buf = bytearray(b.build())
    buf[0:8] = struct.pack(">q", base)
    buf[17:21] = struct.pack(">I", crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def _rows(seg: bytes, **kw):
    out = decode_offsets_segment(seg, "/x/__consumer_offsets-0/00000000000000000000.log", 0, **kw)
    rows = [r for b in out for r in b.to_pylist()]
    return (
        [r for r in rows if r["kind"] == "record"],
        [r for r in rows if r["kind"] == "issue"],
        [r for r in rows if r["kind"] == "count"],
    )


COMMITS = [(_key(b"legacy-group", b"orders", p), _value_v1(10 * p + 5, b"m%d" % p)) for p in range(3)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4], ids=["none", "gzip", "snappy", "lz4"])
def test_offset_commits_in_legacy_message_sets_decode(magic, codec):
    seg = _legacy(magic, codec, 100, COMMITS)
    recs, issues, _ = _rows(seg)
    assert not issues
    assert [r["offset"] for r in recs] == [100, 101, 102]
    for p, r in enumerate(recs):
        assert (r["group_id"], r["topic"], r["partition"]) == ("legacy-group", "orders", p)
        assert (r["value_version"], r["committed_offset"], r["leader_epoch"], r["metadata"]) == (
            1,
            10 * p + 5,
            -1,
            "m%d" % p,
        )
        assert r["commit_timestamp"] == TS + 10 * p + 5 and r["expire_timestamp"] == TS + 10 * p + 5 + 86_400_000
        assert r["timestamp"] == (-1 if magic == 0 else TS + p)
        assert (r["batch_leader_epoch"], r["is_transactional"], r["decode_error"]) == (-1, False, None)
    # the log end offset of a legacy tail: one past the last message (a wrapper's offset is its last inner one)
    assert scan_batches(seg).end_offset == 103


def test_log_append_time_wrapper_gives_its_timestamp_to_every_inner_message():
    buf = bytearray(_legacy(1, GZIP, 7, COMMITS))
    buf[17] |= 0x08  # timestamp type LogAppendTime
    buf[18:26] = struct.pack(">q", TS + 999)  # the broker's append time
    buf[12:16] = struct.pack(">I", zlib.crc32(bytes(buf[16:])))
    recs, issues, _ = _rows(bytes(buf))
    assert not issues and [r["timestamp"] for r in recs] == [TS + 999] * 3


def test_legacy_then_v2_batches_keep_log_order_and_the_latest_commit():
    """After a message-format upgrade one segment holds legacy messages, then v2 batches."""
    key = _key(b"g", b"t", 0)
    seg = (
        _legacy(0, 0, 0, [(key, _value_v0(1))])
        + _legacy(1, SNAPPY, 1, [(key, _value_v1(o)) for o in (2, 3, 4)])
        + _v2(4, [(key, _value_v3(5, 0)), (key, _value_v3(6, 0))])
    )
    recs, issues, _ = _rows(seg)
    assert not issues
    assert [(r["offset"], r["committed_offset"], r["value_version"]) for r in recs] == [
        (0, 1, 0),
        (1, 2, 1),
        (2, 3, 1),
        (3, 4, 1),
        (4, 5, 3),
        (5, 6, 3),
    ]
    assert scan_batches(seg).end_offset == 6
    # the latest-mode summary folds the key to its newest commit, which stands for all six
    kept, _, counts = _rows(seg, reduce_latest=True)
    latest = [r for r in kept if r["live_count"] > 0]
    assert [(r["offset"], r["committed_offset"], r["live_count"]) for r in latest] == [(5, 6, 6)]
    assert sum(c["record_count"] for c in counts) + sum(r["record_count"] for r in kept) == 6


def test_corrupt_legacy_message_is_reported_where_it_is_and_the_others_decode():
    msgs = [_legacy(1, 0, 50 + i, [c]) for i, c in enumerate(COMMITS)]
    bad = bytearray(msgs[1])
    bad[-3] ^= 0xFF  # inside the value: the CRC-32 no longer matches
    seg = msgs[0] + bytes(bad) + msgs[2]
    recs, issues, _ = _rows(seg)
    assert [r["offset"] for r in recs] == [50, 52]
    assert [(i["decode_error"], i["position"], i["offset"]) for i in issues] == [("crc_mismatch", len(msgs[0]), 51)]


def test_undecompressable_wrapper_and_partial_tail_are_reported():
    good = _legacy(1, 0, 0, COMMITS[:1])
    wrapper = bytearray(_legacy(1, GZIP, 1, COMMITS))
    wrapper[40:48] = b"\x00" * 8  # damage the gzip stream, then make the CRC match again
    wrapper[12:16] = struct.pack(">I", zlib.crc32(bytes(wrapper[16:])))
    tail = _legacy(1, 0, 4, COMMITS[:1])[:-5]  # the broker died while writing
    recs, issues, _ = _rows(good + bytes(wrapper) + tail)
    assert [r["offset"] for r in recs] == [0]
    assert sorted((i["position"], i["decode_error"]) for i in issues) == [
        (len(good), "decompression_failed"),
        (len(good) + len(wrapper), "partial_batch"),
    ]


@pytest.mark.slow
def test_audit_of_a_legacy_format_log_dir(audit_dirs, tmp_path):
    """End to end: commits in legacy __consumer_offsets segments, and a user partition whose log
    end offset comes from its legacy tail (a wrong end would flag the first commit out of range)."""
    d = tmp_path / "broker-0"
    (d / "__consumer_offsets-0").mkdir(parents=True)
    (d / "orders-0").mkdir()
    (d / "meta.properties").write_text("version=0\nbroker.id=0\n")
    user = b"".join(_legacy(1, GZIP, 40 * i, [(b"k", b"v" * 20)] * 40) for i in range(3))  # offsets 0..119
    (d / "orders-0/00000000000000000000.log").write_bytes(user)
    (d / "orders-0/leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    offsets = _legacy(
        1, 0, 0, [(_key(b"reader", b"orders", 0), _value_v1(120)), (_key(b"ahead", b"orders", 0), _value_v1(150))]
    )
    (d / "__consumer_offsets-0/00000000000000000000.log").write_bytes(offsets)
    result, out = audit_dirs("legacy", [d], fail_on="never")
    assert result.summary["records_skipped"]["by_reason"] == {}
    assert result.summary["records_read"]["by_record_type"] == {"OffsetCommit v1": 2}
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    bounds = spark.read.parquet(str(out / "bounds")).where("topic = 'orders'").first()
    assert bounds["log_end_offset"] == 120
    verdicts = {r["group_id"]: r["verdict"] for r in spark.read.parquet(str(out / "committed_offsets")).collect()}
    assert verdicts == {"reader": "EPOCH_UNVERIFIABLE", "ahead": "OFFSET_OUT_OF_RANGE"}
    ahead = (
        spark.read.parquet(str(out / "findings"))
        .where("group_id = 'ahead' AND finding = 'OFFSET_OUT_OF_RANGE'")
        .first()
    )
    assert (ahead["log_end_offset"], ahead["records_at_risk"]) == (120, 30)
