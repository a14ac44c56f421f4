"""Share groups (KIP-932): the ``__share_group_state`` decoder and the share rules on small inline inputs.

The decoder is checked against bytes laid out per Kafka's ``ShareSnapshotValue.json`` / ``ShareUpdateValue.json``
(built here field by field), its vectorised path against its record-by-record path; the rules against the
behaviour the lab records from Kafka's own ``KafkaShareConsumer`` (``tests/lab/test_lab_share_groups.py``).
"""

from __future__ import annotations

import base64
import struct

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from audit.formats.share_state import (
    SHARE_RAW_SCHEMA,
    decode_share_state_key,
    decode_share_state_kv,
    decode_share_state_segment,
    decode_share_state_value,
)

TOPIC_ID = bytes(range(16))
TOPIC_ID_STR = base64.urlsafe_b64encode(TOPIC_ID).decode().rstrip("=")


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def key(rtype: int, group: str, partition: int, topic_id: bytes = TOPIC_ID) -> bytes:
    g = group.encode()
    return struct.pack(">hh", rtype, len(g)) + g + topic_id + struct.pack(">i", partition)


def _batches(batches, batch_tags: bytes = b"\x00") -> bytes:
    return uvarint(len(batches) + 1) + b"".join(struct.pack(">qqbh", *b) + batch_tags for b in batches)


def _tags(dcc) -> bytes:
    return b"\x00" if dcc is None else b"\x01\x00\x04" + struct.pack(">i", dcc)


def snapshot(state_epoch, leader_epoch, start, batches=(), dcc=None, snap_epoch=0, ts=1000, layout="4.1+") -> bytes:
    if layout == "4.0":
        head = struct.pack(">hHiiq", 0, snap_epoch, state_epoch, leader_epoch, start)
    else:
        head = struct.pack(">hiiiqqq", 0, snap_epoch, state_epoch, leader_epoch, start, ts, ts)
    return head + _batches(batches) + _tags(dcc)


def update(leader_epoch, start, batches=(), dcc=None, snap_epoch=0, batch_tags=b"\x00") -> bytes:
    return struct.pack(">hiiq", 0, snap_epoch, leader_epoch, start) + _batches(batches, batch_tags) + _tags(dcc)


def decode_records(records) -> dict:
    """:func:`decode_share_state_kv` of (key, value or None) pairs laid out in one buffer."""
    buf, ks, kl, vs, vl = b"", [], [], [], []
    for k, v in records:
        ks.append(len(buf))
        kl.append(len(k))
        buf += k
        vs.append(len(buf) if v is not None else 0)
        vl.append(len(v) if v is not None else -1)
        buf += v or b""
    return decode_share_state_kv(np.frombuffer(buf, np.uint8), *(np.array(a, np.int64) for a in (ks, kl, vs, vl)))


def decode(records):
    return pa.table(decode_records(records)).to_pylist()


def test_snapshot_and_update_fields_decode_per_the_schema():
    rows = decode(
        [
            (key(0, "g", 3), snapshot(5, 7, 60, [(70, 79, 2, 1)], dcc=10, snap_epoch=2, ts=1234)),
            (key(1, "g", 3), update(-1, -1, [(80, 89, 0, 1), (90, 99, 4, 5)], snap_epoch=2)),
            (key(0, "g", 3), None),
        ]
    )
    s, u, t = rows
    assert (s["record_type"], s["group_id"], s["topic_id"], s["partition"]) == (0, "g", TOPIC_ID_STR, 3)
    assert (s["snapshot_epoch"], s["state_epoch"], s["leader_epoch"], s["start_offset"]) == (2, 5, 7, 60)
    assert (s["create_timestamp"], s["write_timestamp"], s["delivery_complete_count"]) == (1234, 1234, 10)
    assert s["state_batches"] == [{"first_offset": 70, "last_offset": 79, "delivery_state": 2, "delivery_count": 1}]
    assert (u["state_epoch"], u["leader_epoch"], u["start_offset"], u["delivery_complete_count"]) == (None, -1, -1, -1)
    assert [(b["first_offset"], b["delivery_state"], b["delivery_count"]) for b in u["state_batches"]] == [
        (80, 0, 1),
        (90, 4, 5),
    ]
    assert t["is_tombstone"] and t["state_batches"] is None and t["decode_error"] is None
    assert all(r["decode_error"] is None for r in rows)


def test_vectorised_path_agrees_with_the_record_by_record_decoder():
    rng = np.random.default_rng(7)
    records = []
    for i in range(400):
        n = int(rng.integers(0, 200))  # above 126 batches the count takes two varint bytes
        batches = [
            (int(a), int(a + rng.integers(0, 50)), int(rng.choice([0, 2, 4])), int(rng.integers(0, 6)))
            for a in rng.integers(0, 1 << 40, n)
        ]
        dcc = None if i % 3 else int(rng.integers(0, 1000))
        if i % 2:
            records.append((key(0, f"g{i}", i), snapshot(i, i + 1, i * 10, batches, dcc)))
        else:
            tags = b"\x00" if i % 10 else b"\x01\x07\x01\x00"  # an unknown tagged field in a batch: skipped
            records.append((key(1, f"g{i}", i), update(i + 1, i * 10, batches, dcc, batch_tags=tags)))
    rows = decode(records)
    assert len(rows) == len(records)
    for (k, v), row in zip(records, rows, strict=True):
        want = decode_share_state_value(v, row["record_type"])
        assert decode_share_state_key(k)[1:] == (row["group_id"], row["topic_id"], row["partition"])
        assert row["decode_error"] is None
        assert row["start_offset"] == want["start_offset"] and row["leader_epoch"] == want["leader_epoch"]
        assert row["delivery_complete_count"] == want["delivery_complete_count"]
        assert [tuple(b.values()) for b in row["state_batches"]] == want["state_batches"]


def test_kafka_4_0_layout_is_read_and_bad_bytes_become_decode_errors():
    rows = decode(
        [
            (key(0, "g", 0), snapshot(3, 4, 17, [(20, 29, 2, 1)], layout="4.0", snap_epoch=65535)),
            (key(1, "g", 0), struct.pack(">h", 1) + b"\x00" * 20),
            (key(1, "g", 0), update(1, 2)[:-2]),
            (key(7, "g", 0), b"\x00\x00"),
            (key(1, "g", 0)[:-1], update(1, 2)),
            (b"", update(1, 2)),
        ]
    )
    assert (rows[0]["snapshot_epoch"], rows[0]["state_epoch"], rows[0]["start_offset"]) == (65535, 3, 17)
    assert rows[0]["create_timestamp"] is None and rows[0]["state_batches"][0]["last_offset"] == 29
    assert [r["decode_error"] for r in rows[1:]] == [
        "unknown_value_version",
        "malformed_value",
        "unknown_record_type",
        "malformed_key",
        "malformed_key",
    ]


def _zigzag(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


def records_block(records) -> bytes:
    """DefaultRecord bytes (attributes, timestamp delta, offset delta, key, value, no headers) per record."""
    out = b""
    for i, (k, v) in enumerate(records):
        body = b"\x00" + _zigzag(0) + _zigzag(i) + _zigzag(len(k)) + k
        body += _zigzag(-1) if v is None else _zigzag(len(v)) + v
        body += _zigzag(0)
        out += _zigzag(len(body)) + body
    return out


def test_segment_decoder_reads_a_real_record_batch_and_reports_a_torn_tail():
    from bench.fuzz_harnesses import v2_batch

    recs = [(key(0, "g", 1), snapshot(1, 0, -1)), (key(1, "g", 1), update(3, 40, [(40, 44, 2, 1)]))]
    seg = v2_batch(records_block(recs), len(recs), 0, base_offset=100, epoch=9)
    out = decode_share_state_segment(seg + seg[:30], "/x/__share_group_state-4/00.log", 4)
    table = pa.Table.from_batches(out, SHARE_RAW_SCHEMA)
    records = [r for r in table.to_pylist() if r["kind"] == "record"]
    assert [(r["offset"], r["batch_leader_epoch"], r["source_partition"]) for r in records] == [
        (100, 9, 4),
        (101, 9, 4),
    ]
    assert records[1]["start_offset"] == 40 and records[1]["state_batches"][0]["first_offset"] == 40
    issues = [r for r in table.to_pylist() if r["kind"] == "issue"]
    assert len(issues) == 1 and issues[0]["source_file"].endswith("00.log") and issues[0]["position"] == len(seg)


# --------------------------------------------------------------------------- the rules

EPOCHS = "topic string, partition int, broker_id int, leader_epoch int, start_offset long, is_leader boolean"
BOUNDS = (
    "topic string, partition int, log_start_offset long, log_end_offset long, high_watermark long, "
    "leader_id int, answered_by_broker int, authority string, caches_disagree boolean, unclean_elections int"
)


def _raw(spark, records):
    """SHARE_RAW_SCHEMA rows of (group, partition, offset, key bytes..) records, in __share_group_state order."""
    n = len(records)
    kv = decode_records(records)
    cols = {
        "source_file": pa.nulls(n, pa.string()),
        "source_partition": pa.array([0] * n, pa.int32()),
        "kind": pa.array(["record"] * n),
        "position": pa.nulls(n, pa.int64()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
        "batch_leader_epoch": pa.nulls(n, pa.int32()),
        "detail": pa.nulls(n, pa.string()),
        "records_affected": pa.array([1] * n, pa.int32()),
        **kv,
    }
    table = pa.Table.from_arrays([cols[f.name].cast(f.type) for f in SHARE_RAW_SCHEMA], schema=SHARE_RAW_SCHEMA)
    return spark.createDataFrame(table.to_pandas())


@pytest.fixture(scope="module")
def judged_frames(spark):
    """``(findings, share_partitions, bounds)`` DataFrames of :func:`judge_shares` over the states below."""
    from audit.share import judge_shares

    # t-0: epochs 0 at 0, 1 at 20, then an unclean election began epoch 3 at 40 (the new leader never had epoch 2,
    # whose leader wrote up to 70): OffsetsForLeaderEpoch(2) = (1, 40).  t-1: no election, log start 10.
    epochs = spark.createDataFrame(
        [("t", 0, 2, 0, 0, True), ("t", 0, 2, 1, 20, True), ("t", 0, 2, 3, 40, True), ("t", 1, 1, 0, 0, True)], EPOCHS
    )
    bounds = spark.createDataFrame(
        [("t", 0, 0, 70, 70, 2, 2, "leader", False, 1), ("t", 1, 10, 50, 50, 1, 1, "leader", False, 0)], BOUNDS
    )
    names = spark.createDataFrame([(TOPIC_ID_STR, "t")], "topic_id string, topic string")
    recs = [
        # past: SPSO 60 under epoch 2; the new leader rewrote it under epoch 3 and went on to 70
        (key(0, "past", 0), snapshot(1, 0, -1)),
        (key(1, "past", 0), update(2, 60)),
        (key(1, "past", 0), update(3, 60)),
        (key(1, "past", 0), update(3, 70)),
        # acked-past: SPSO 30 with 40..59 acknowledged under epoch 2 (30..39 released: redelivered, not skipped)
        (key(0, "acked-past", 0), snapshot(1, 0, -1)),
        (key(1, "acked-past", 0), update(2, 30, [(30, 39, 0, 1), (40, 59, 2, 1)])),
        # at-divergence: exactly at 40
        (key(0, "at-divergence", 0), snapshot(1, 0, -1)),
        (key(1, "at-divergence", 0), update(2, 40)),
        # in-flight: 40..44 delivered, never acknowledged, lost with the lineage
        (key(0, "in-flight", 0), snapshot(1, 0, -1)),
        (key(1, "in-flight", 0), update(2, 35, [(40, 44, 0, 1)])),
        # reset: acked 50..59 under epoch 2, then a new snapshot (an offset reset) at 30 with no batches
        (key(0, "reset", 0), snapshot(1, 0, -1)),
        (key(1, "reset", 0), update(2, 45, [(50, 59, 2, 1)])),
        (key(0, "reset", 0), snapshot(2, 2, 30)),
        # deleted: state removed (tombstone)
        (key(0, "deleted", 0), snapshot(1, 2, 65)),
        (key(0, "deleted", 0), None),
        # behind: SPSO 5 on t-1 (log start 10), 7..8 acknowledged: 5, 6 and 9 deleted before delivery
        (key(0, "behind", 1), snapshot(1, 0, 5, [(7, 8, 2, 1)])),
        # caught-up on t-1
        (key(0, "caught-up", 1), snapshot(1, 0, 50)),
        # unknown topic id: not judged
        (key(0, "orphan", 0, topic_id=b"\xff" * 16), snapshot(1, 2, 65)),
    ]
    findings, parts = judge_shares(spark, _raw(spark, recs), epochs, bounds, names)
    return findings.withColumn("group_type", F.lit("share")), parts, bounds


@pytest.fixture(scope="module")
def judged(judged_frames):
    findings, parts, _bounds = judged_frames
    return {(r.group_id, r.finding): r for r in findings.collect()}, {r.group_id: r for r in parts.collect()}


def test_state_past_the_divergence_point_is_log_truncation_even_when_the_newest_record_hides_it(judged):
    findings, parts = judged
    f = findings[("past", "LOG_TRUNCATION")]
    assert (f.severity, f.committed_offset, f.committed_leader_epoch) == ("critical", 60, 2)
    assert (f.divergence_offset, f.records_at_risk, f.cause) == (
        40,
        20,
        "unclean_election",
    )  # bounds: 1 unclean election
    assert "never delivered" in f.detail and "Action:" in f.detail
    assert (parts["past"].start_offset, parts["past"].leader_epoch, parts["past"].verdict) == (70, 3, "LOG_TRUNCATION")
    assert parts["past"].lag == 0 and parts["past"].records_at_risk == parts["past"].records_in_log == 20


def test_acknowledged_batches_past_the_divergence_point_are_skipped_records(judged):
    findings, parts = judged
    f = findings[("acked-past", "LOG_TRUNCATION")]
    assert (f.committed_offset, f.divergence_offset, f.records_at_risk) == (30, 40, 20)
    assert parts["acked-past"].records_in_log == 20
    assert parts["acked-past"].records_in_flight_lost in (None, 0)
    # 30..39 are available again and 40..59 done: lag = 70 - 30 - 20
    assert parts["acked-past"].lag == 20


def test_states_at_the_divergence_point_or_reset_below_it_are_ok(judged):
    findings, parts = judged
    for group in ("at-divergence", "reset", "caught-up"):
        assert not [k for k in findings if k[0] == group]
        assert parts[group].verdict == "OK"
    assert parts["reset"].start_offset == 30 and parts["reset"].state_epoch == 2


def test_delivered_but_unacknowledged_records_lost_with_the_lineage_are_named_without_a_finding(judged):
    findings, parts = judged
    assert not [k for k in findings if k[0] == "in-flight"]
    assert parts["in-flight"].records_in_flight_lost == 5 and parts["in-flight"].verdict == "OK"
    assert parts["in-flight"].divergence_offset == 40 and parts["at-divergence"].divergence_offset is None


def test_start_offset_below_the_log_start_counts_records_deleted_before_the_group_finished_them(judged):
    findings, parts = judged
    f = findings[("behind", "OFFSET_OUT_OF_RANGE")]
    assert (f.severity, f.committed_offset, f.log_start_offset, f.records_at_risk) == ("error", 5, 10, 3)
    assert parts["behind"].records_in_log == 0  # deleted
    assert parts["behind"].verdict == "OFFSET_OUT_OF_RANGE"


def test_deleted_states_and_unknown_topic_ids_are_not_judged(judged):
    findings, parts = judged
    assert "deleted" not in parts and "orphan" not in parts
    assert not [k for k in findings if k[0] in ("deleted", "orphan")]


def test_share_partitions_are_metric_rows_with_their_worst_finding(spark, judged_frames):
    """metrics.prom: each judged share-partition is a group-partition row (its SPSO, lag, records at risk) with the
    severity of its share group's worst finding (critical for a LOG_TRUNCATION about an older epoch's state, which
    the newest state hides), so ``KafkaOffsetAuditCriticalFinding`` fires for it."""
    from audit.report.metrics import build_registry, group_partition_rows, render

    findings, parts, bounds = judged_frames
    committed = spark.createDataFrame(
        [("cg", "t", 1, 20, 0, None, "OK")],
        "group_id string, topic string, partition int, committed_offset bigint, committed_leader_epoch int, "
        "commit_timestamp timestamp, verdict string",
    )
    rows = {r["group_id"]: r for r in group_partition_rows(committed, findings, bounds, 100, parts)}
    assert set(rows) == {"cg"} | {r.group_id for r in parts.collect()}
    assert rows["past"] == {
        "group_id": "past",
        "topic": "t",
        "partition": 0,
        "committed_offset": 70,
        "committed_leader_epoch": 3,
        "lag": 0,
        "records_at_risk": 20,
        "verdict": "LOG_TRUNCATION",
        "severity": "critical",
    }
    assert (rows["behind"]["severity"], rows["caught-up"]["severity"], rows["cg"]["severity"]) == ("error", "ok", "ok")
    assert list(rows)[0] in ("past", "acked-past")  # worst first
    text = render(build_registry({"findings": {}}, list(rows.values()))).decode()
    assert (
        'kafka_offset_audit_verdict{group="past",partition="0",severity="critical",topic="t",verdict="LOG_TRUNCATION"} 1.0'
        in text
    )
    # without share_partitions (or findings without group_type) the rows are the consumer groups' alone
    assert [r["group_id"] for r in group_partition_rows(committed, findings, bounds, 100)] == ["cg"]


# --------------------------------------------------------------------------- share group members (owners)


def _compact(s: str | None) -> bytes:
    return b"\x00" if s is None else uvarint(len(s.encode()) + 1) + s.encode()


def test_share_group_member_and_assignment_values_decode_per_the_schema():
    from audit.formats.offsets import decode_share_group_assignment_value, decode_share_group_member_value

    member = struct.pack(">h", 0) + _compact(None) + _compact("c-1") + _compact("/10.0.0.7")
    member += uvarint(2) + _compact("t") + b"\x00"  # SubscribedTopicNames, no tags
    assert decode_share_group_member_value(member) == {
        "rack_id": None,
        "client_id": "c-1",
        "client_host": "/10.0.0.7",
        "subscribed_topics": ["t"],
    }
    assignment = struct.pack(">hiib", 0, 5, 4, 0) + uvarint(2) + TOPIC_ID + uvarint(3) + struct.pack(">ii", 0, 2)
    assignment += b"\x00" + b"\x00"  # the topic's tags, the value's tags
    a = decode_share_group_assignment_value(assignment)
    assert (a["member_epoch"], a["previous_member_epoch"], a["state"]) == (5, 4, 0)
    assert [(t, p.tolist()) for t, p in a["assigned"]] == [(TOPIC_ID_STR, [0, 2])]
    with pytest.raises(ValueError):
        decode_share_group_assignment_value(assignment + b"\x00")
    with pytest.raises(ValueError):
        decode_share_group_member_value(member[:5])


def test_streams_group_member_assignment_and_topology_values_decode_per_the_schema():
    from audit.formats.offsets import (
        decode_streams_group_assignment_value,
        decode_streams_group_member_value,
        decode_streams_group_topology_value,
    )

    member = struct.pack(">h", 0) + _compact(None) + _compact("rack") + _compact("app-1") + _compact("/10.0.0.9")
    member += struct.pack(">ii", 30000, 2) + _compact("proc-A") + b"\xff" + uvarint(1) + b"\x00"
    m = decode_streams_group_member_value(member)
    assert (m["client_id"], m["client_host"], m["process_id"], m["topology_epoch"]) == (
        "app-1",
        "/10.0.0.9",
        "proc-A",
        2,
    )

    def task_ids(tasks):  # []TaskIds{SubtopologyId, Partitions, tagged AssignmentEpochs}
        out = uvarint(len(tasks) + 1)
        for sub, parts in tasks:
            out += _compact(sub) + uvarint(len(parts) + 1) + b"".join(struct.pack(">i", x) for x in parts) + b"\x00"
        return out

    assignment = struct.pack(">hiib", 0, 7, 6, 1) + task_ids([("0", [0, 2]), ("1", [1])]) + task_ids([("0", [1])])
    assignment += task_ids([]) * 4 + b"\x00"
    a = decode_streams_group_assignment_value(assignment)
    assert (a["member_epoch"], a["state"]) == (7, 1)
    assert [(sub, p.tolist()) for sub, p in a["active"]] == [("0", [0, 2]), ("1", [1])]  # standby tasks not read

    def strings(xs):
        return uvarint(len(xs) + 1) + b"".join(_compact(x) for x in xs)

    def topic_infos(names):  # TopicInfo{Name, Partitions, ReplicationFactor, TopicConfigs}
        return uvarint(len(names) + 1) + b"".join(
            _compact(n) + struct.pack(">ih", 0, 0) + uvarint(2) + _compact("k") + _compact("v") + b"\x00" + b"\x00"
            for n in names
        )

    sub0 = _compact("0") + strings(["in"]) + strings([]) + topic_infos(["app-store-changelog"]) + strings(["app-rep"])
    sub0 += (
        topic_infos([]) + uvarint(2) + uvarint(2) + struct.pack(">h", 0) + uvarint(1) + uvarint(1) + b"\x00" + b"\x00"
    )
    sub1 = _compact("1") + strings([]) + strings(["re.*"]) + topic_infos([]) + strings([]) + topic_infos(["app-rep"])
    sub1 += uvarint(1) + b"\x00"
    topology = struct.pack(">hi", 0, 3) + uvarint(3) + sub0 + sub1 + b"\x00"
    t = decode_streams_group_topology_value(topology)
    assert t == {"epoch": 3, "sources": [("0", "in"), ("1", "app-rep")]}
    with pytest.raises(ValueError):
        decode_streams_group_topology_value(topology + b"\x00")


def test_state_batches_read_with_numpy_equal_reading_them_one_by_one():
    """``_batches`` reads runs of untagged StateBatches with numpy and tagged ones alone: the same batches and end
    position as a plain per-entry read of the schema (FirstOffset int64, LastOffset int64, DeliveryState int8,
    DeliveryCount int16, tagged fields), for values of no, few, some and only tagged entries, cut or whole."""
    import random

    from audit.formats.share_state import _batches, _Cursor

    def one_by_one(c):
        out = []
        for _ in range(c.uvarint() - 1):
            out.append((c.num(">q"), c.num(">q"), c.num(">b"), c.num(">h")))
            c.tags()
        return out

    rng = random.Random(7)
    compared = 0
    for _ in range(400):
        n, p_tag = rng.choice([0, 1, 2, 8, 9, 17, 40, 300]), rng.choice([0, 0.01, 0.3, 1])
        b = bytearray(b"\x00\x00") + uvarint(n + 1)
        for _i in range(n):
            b += struct.pack(
                ">qqbh",
                rng.getrandbits(63),
                -rng.getrandbits(63),
                rng.randrange(-128, 128),
                rng.randrange(-(2**15), 2**15),
            )
            if rng.random() < p_tag:
                k = rng.randint(1, 3)
                b += uvarint(k) + b"".join(
                    uvarint(t) + uvarint(len(d)) + d for t in range(k) for d in [bytes(rng.randint(0, 150))]
                )
            else:
                b += b"\x00"
        if rng.random() < 0.2:
            b = b[: rng.randrange(3, len(b) + 1)]
        want = got = None
        try:
            c = _Cursor(bytes(b), 2)
            want = (one_by_one(c), c.p)
        except ValueError:
            pass
        try:
            c = _Cursor(bytes(b), 2)
            got = (list(zip(*(a.tolist() for a in _batches(c, len(b))))), c.p)
        except ValueError:
            pass
        assert got == want
        compared += want is not None
    assert compared > 300
