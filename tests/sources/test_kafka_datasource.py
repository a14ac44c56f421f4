"""Tests for the ``kafka_offsets_topic`` Spark data source.

A fake consumer replays the real ``__consumer_offsets`` segments written by
broker-1 of the unclean-election scenario (decoded with kafka-python's
``MemoryRecords``) and behaves like a read_committed KafkaConsumer: records of
aborted transactions and control batches are skipped, the end offset is the
last stable offset.  Expected rows come independently from the reference
decoding (``dumps/broker-1/__consumer_offsets-*/*.decoded.jsonl``, made with
Kafka's own record classes).
"""

from __future__ import annotations

import glob
import json
import os
import struct
import sys
from collections import Counter, namedtuple

import pytest

from ..paths import SCENARIO as _SCENARIO

SCENARIO = str(_SCENARIO)
SEGMENTS = os.path.join(SCENARIO, "brokers", "broker-1", "__consumer_offsets-{}", "00000000000000000000.log")
DECODED = os.path.join(SCENARIO, "dumps", "broker-1", "__consumer_offsets-{}", "00000000000000000000.log.decoded.jsonl")
SECRET = "Dat4source-Secret!"

pytestmark = pytest.mark.skipif(not os.path.isdir(SCENARIO), reason=f"scenario data missing: {SCENARIO}")

Record = namedtuple("Record", "topic partition offset timestamp key value")


# ------------------------------------------------------------- fake consumer


class ReplayConsumer:
    """KafkaConsumer stand-in replaying broker-1's __consumer_offsets segments (read_committed)."""

    max_records_per_poll = 3  # small, so the reader loops

    def __init__(self, **settings):
        # the data source must configure a read-only, group-less, read_committed consumer
        assert settings.get("group_id") is None, settings
        assert settings.get("enable_auto_commit") is False, settings
        assert settings.get("isolation_level") == "read_committed", settings
        assert settings.get("bootstrap_servers"), settings
        self.settings = settings
        self.assigned = []
        self.positions = {}
        self.closed = False

    # -- log model
    @staticmethod
    def _batches(partition):
        from kafka.record import MemoryRecords

        with open(SEGMENTS.format(partition), "rb") as fh:
            records = MemoryRecords(fh.read())
        out = []
        while True:
            batch = records.next_batch()
            if batch is None:
                return out
            out.append((batch, list(batch)))

    @classmethod
    def _committed_view(cls, partition):
        """(batches with an 'aborted' flag, last stable offset, log end)."""
        batches = cls._batches(partition)
        view = []
        lso = None
        for i, (batch, records) in enumerate(batches):
            aborted = False
            if batch.is_transactional and not batch.is_control_batch:
                marker = next(
                    ((b, r) for b, r in batches[i + 1 :] if b.is_control_batch and b.producer_id == batch.producer_id),
                    None,
                )
                if marker is None:
                    lso = batch.base_offset if lso is None else lso  # open transaction
                else:
                    aborted = bool(marker[1][0].abort)
            view.append((batch, records, aborted))
        log_end = batches[-1][0].next_offset if batches else 0
        return view, (lso if lso is not None else log_end), log_end

    # -- KafkaConsumer API used by the reader
    def partitions_for_topic(self, topic):
        assert topic == "__consumer_offsets"
        return {int(p.rsplit("-", 1)[1]) for p in glob.glob(SEGMENTS.format("*").rsplit("/", 1)[0])}

    def beginning_offsets(self, partitions):
        return {
            tp: (self._batches(tp.partition)[0][0].base_offset if self._batches(tp.partition) else 0)
            for tp in partitions
        }

    def end_offsets(self, partitions):
        return {tp: self._committed_view(tp.partition)[1] for tp in partitions}

    def assign(self, partitions):
        self.assigned = list(partitions)

    def seek(self, tp, offset):
        assert tp in self.assigned
        self.positions[tp] = offset

    def position(self, tp):
        return self.positions[tp]

    def poll(self, timeout_ms=0, max_records=None, update_offsets=True):
        out = {}
        for tp in self.assigned:
            view, _lso, _end = self._committed_view(tp.partition)
            got = []
            for batch, records, aborted in view:
                if batch.next_offset <= self.positions[tp]:
                    continue
                if batch.is_control_batch or aborted:
                    self.positions[tp] = batch.next_offset
                    continue
                for r in records:
                    if r.offset < self.positions[tp]:
                        continue
                    if len(got) >= self.max_records_per_poll:
                        break
                    got.append(Record(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value))
                    self.positions[tp] = r.offset + 1
                if len(got) >= self.max_records_per_poll:
                    break
            if got:
                out[tp] = got
        return out

    def commit(self, *a, **k):
        raise AssertionError("the data source must never commit")

    commit_async = commit

    def close(self, autocommit=True, timeout_ms=None):
        assert autocommit is False, "close must not auto-commit"
        self.closed = True


class StuckConsumer(ReplayConsumer):
    def poll(self, timeout_ms=0, max_records=None, update_offsets=True):
        return {}


class FailingConsumer:
    def __init__(self, **settings):
        import kafka.errors as Errors

        raise Errors.KafkaTimeoutError(
            f"Unable to bootstrap from {settings['bootstrap_servers']} as "
            f"{settings.get('sasl_plain_username')}:{settings.get('sasl_plain_password')}"
        )


class TombstoneConsumer(ReplayConsumer):
    def poll(self, timeout_ms=0, max_records=None, update_offsets=True):
        tp = self.assigned[0]
        if self.positions[tp] >= 2:
            return {}
        out = [
            Record(tp.topic, tp.partition, o, 1000 + o, b"\x00\x01k%d" % o, None if o == 1 else b"v")
            for o in range(self.positions[tp], 2)
        ]
        self.positions[tp] = 2
        return {tp: out}

    def end_offsets(self, partitions):
        return {tp: 2 for tp in partitions}

    def beginning_offsets(self, partitions):
        return {tp: 0 for tp in partitions}

    def partitions_for_topic(self, topic):
        return {0}


# ----------------------------------------------------------- expected rows


def expected_rows():
    """{partition: [(offset, timestamp, decoded json)]} of committed, non-control records."""
    rows = {}
    for partition in range(8):
        lines = [json.loads(line) for line in open(DECODED.format(partition)) if line.strip()]
        kept = []
        for i, rec in enumerate(lines):
            if rec["type"] == "control":
                continue
            if rec["is_transactional"]:
                marker = next(
                    m for m in lines[i + 1 :] if m["type"] == "control" and m["producer_id"] == rec["producer_id"]
                )
                if marker["control_type"] == "ABORT":
                    continue
            kept.append((rec["offset"], rec["timestamp"], rec))
        rows[partition] = kept
    return rows


def kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def offset_commit_key(rec):
    return struct.pack(">h", 1) + kstr(rec["group"]) + kstr(rec["topic"]) + struct.pack(">i", rec["partition"])


def offset_commit_value_v3(rec):
    return (
        struct.pack(">hqi", 3, rec["committed_offset"], rec["committed_leader_epoch"])
        + kstr(rec["metadata"])
        + struct.pack(">q", rec["commit_timestamp"])
    )


# ------------------------------------------------------------------- spark


@pytest.fixture(scope="module")
def offsets_spark(spark):
    """The shared local[2] session (tests/conftest.py), with this module's fakes shipped
    to the Python workers by value (they need not be importable there)."""
    from pyspark import cloudpickle

    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    yield spark
    cloudpickle.unregister_pickle_by_value(module)


@pytest.mark.parametrize("tasks", [None, "2"])
def test_consumer_engine_replays_real_segments_through_a_fake_read_committed_consumer(offsets_spark, tasks):
    spark = offsets_spark
    from audit.sources.kafka_datasource import SCHEMA, register

    cls = register(spark, ReplayConsumer)
    assert cls.name() == "kafka_offsets_topic"
    reader = (
        spark.read.format("kafka_offsets_topic")
        .option("bootstrap.servers", "broker-1:9092")
        .option("poll.timeout.ms", "5000")
    )
    df = (reader if tasks is None else reader.option("tasks", tasks)).load()
    assert df.rdd.getNumPartitions() == (7 if tasks is None else 2)
    assert (
        df.schema.simpleString()
        == "struct<"
        + SCHEMA.replace(" bigint", ":bigint").replace(" int", ":int").replace(" binary", ":binary").replace(", ", ",")
        + ">"
    )
    rows = df.collect()
    expected = expected_rows()

    counts = Counter(r.source_partition for r in rows)
    assert {p: counts.get(p, 0) for p in range(8)} == {p: len(v) for p, v in expected.items()}
    assert counts.get(7, 0) == 0 and counts[6] == 8 and counts[0] == 14  # aborted txn and markers dropped

    got = {(r.source_partition, r.source_offset): r for r in rows}
    assert len(got) == len(rows), "no record read twice"
    for partition, recs in expected.items():
        for offset, timestamp, rec in recs:
            row = got[(partition, offset)]
            assert row.timestamp == timestamp
            if rec["type"] == "offset_commit":
                assert bytes(row.key) == offset_commit_key(rec)
                assert bytes(row.value) == offset_commit_value_v3(rec)
            else:
                assert bytes(row.key) == struct.pack(">h", 2) + kstr(rec["group"])
                assert struct.unpack(">h", bytes(row.value)[:2])[0] == rec["value_version"]
    # the committed transactional offset commit is there, the aborted one is not
    assert (6, 6) in got and (6, 8) not in got and (6, 7) not in got and (7, 0) not in got
    explicit = got[(4, 5)]
    assert b"kafka-python explicit" in bytes(explicit.value)


def test_spark_error_does_not_leak_secrets(offsets_spark):
    spark = offsets_spark
    from audit.sources.kafka_datasource import register

    register(spark, FailingConsumer)
    reader = (
        spark.read.format("kafka_offsets_topic")
        .option("bootstrap.servers", "broker-1:9092")
        .option("kafka.security.protocol", "SASL_PLAINTEXT")
        .option("kafka.sasl.mechanism", "PLAIN")
        .option(
            "kafka.sasl.jaas.config",
            f'org.apache.kafka.common.security.plain.PlainLoginModule required username="auditor" password="{SECRET}";',
        )
    )
    with pytest.raises(Exception) as info:
        reader.load().collect()
    text = str(info.value)
    assert "broker-1:9092" in text and "no broker reachable" in text
    assert SECRET not in text
    assert "[redacted]" in text


# ----------------------------------------------------- reader without Spark


def make_reader(factory, **options):
    from audit.sources.kafka_datasource import reader_from_options

    options.setdefault("bootstrap.servers", "broker-1:9092")
    return reader_from_options(options, factory)


def test_planning_captures_start_and_end_offsets():
    reader = make_reader(ReplayConsumer)
    parts = reader.ranges()
    assert [(p.partition, p.start_offset, p.end_offset) for p in parts] == [
        (0, 0, 14),
        (1, 0, 2),
        (2, 0, 5),
        (3, 0, 3),
        (4, 0, 6),
        (5, 0, 0),
        (6, 0, 11),
        (7, 0, 2),
    ]
    # one task per non-empty partition unless told; the empty partition 5 is no task
    assert [[r.partition for r in t.ranges] for t in reader.partitions()] == [[0], [6], [4], [2], [3], [1], [7]]


def test_tasks_spread_the_partitions_by_record_count():
    from audit.sources.kafka_datasource import OffsetsTopicPartition as R
    from audit.sources.kafka_datasource import spread

    tasks = make_reader(ReplayConsumer, tasks="2").partitions()
    assert [[r.partition for r in t.ranges] for t in tasks] == [[0, 1, 2], [3, 4, 6, 7]]  # 21 and 22 records
    assert sorted(r.partition for t in tasks for r in t.ranges) == [0, 1, 2, 3, 4, 6, 7]
    assert [len(t.ranges) for t in spread([R(0, 5, 9), R(1, 0, 1)], 8)] == [1, 1]  # never more tasks than ranges
    assert [[(r.partition, r.start_offset) for r in t.ranges] for t in spread([R(0, 3, 3), R(1, 7, 7)], 2)] == [[]]
    for bad in ("0", "-1", "two"):
        with pytest.raises(Exception, match="tasks"):
            make_reader(ReplayConsumer, tasks=bad)


def test_one_consumer_reads_every_partition_of_a_task():
    from audit.sources.kafka_datasource import OffsetsTopicPartition as R
    from audit.sources.kafka_datasource import OffsetsTopicTask

    made = []

    def factory(**settings):
        made.append(ReplayConsumer(**settings))
        return made[-1]

    reader = make_reader(factory)
    rows = list(reader.read(OffsetsTopicTask([R(0, 3, 8), R(4, 0, 6), R(5, 0, 0), R(6, 0, 11)])))
    by_partition = {p: [r[1] for r in rows if r[0] == p] for p in (0, 4, 5, 6)}
    assert by_partition[0] == [3, 4, 5, 6, 7]
    assert by_partition[4] == [0, 1, 2, 3, 4, 5] and by_partition[5] == []
    expected = expected_rows()
    assert by_partition[6] == [o for o, _, _ in expected[6]]
    assert len(made) == 1 and made[0].closed
    assert {tp.partition for tp in made[0].assigned} == {0, 4, 6}


def test_read_stops_at_planned_end_offset():
    from audit.sources.kafka_datasource import OffsetsTopicPartition

    reader = make_reader(ReplayConsumer)
    rows = list(reader.read(OffsetsTopicPartition(0, 3, 8)))  # the 2nd poll returns 6, 7 and 8
    assert [r[1] for r in rows] == [3, 4, 5, 6, 7]
    assert all(r[0] == 0 for r in rows)
    assert list(reader.read(OffsetsTopicPartition(5, 0, 0))) == []


def test_tombstones_have_null_values():
    from audit.sources.kafka_datasource import OffsetsTopicPartition

    reader = make_reader(TombstoneConsumer)
    rows = list(reader.read(OffsetsTopicPartition(0, 0, 2)))
    assert rows == [(0, 0, 1000, b"\x00\x01k0", b"v"), (0, 1, 1001, b"\x00\x01k1", None)]


def test_no_progress_times_out_with_a_clear_error():
    from audit.sources.kafka_datasource import KafkaOffsetsTopicError, OffsetsTopicPartition

    reader = make_reader(StuckConsumer, **{"poll.timeout.ms": "50"})
    with pytest.raises(KafkaOffsetsTopicError) as info:
        list(reader.read(OffsetsTopicPartition(3, 0, 3)))
    assert "__consumer_offsets-3 at offset 0" in str(info.value) and "50 ms" in str(info.value)


def test_options_validation_and_redaction(tmp_path):
    from audit.sources.kafka_datasource import KafkaOffsetsTopicError

    with pytest.raises(KafkaOffsetsTopicError, match="poll.timout.ms"):
        make_reader(ReplayConsumer, **{"poll.timout.ms": "10"})
    with pytest.raises(KafkaOffsetsTopicError, match="bootstrap.servers"):
        from audit.sources.kafka_datasource import reader_from_options

        reader_from_options({}, ReplayConsumer)
    with pytest.raises(KafkaOffsetsTopicError, match="kafka.sasl.mechansim|sasl.mechansim"):
        make_reader(ReplayConsumer, **{"kafka.sasl.mechansim": "PLAIN"})
    props = tmp_path / "audit.properties"
    props.write_text(
        "bootstrap.servers=from-file:9092\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="auditor" password="{SECRET}";\n'
    )
    reader = make_reader(FailingConsumer, **{"client.properties": str(props), "kafka.client.id": "cid"})
    assert reader.client_config.bootstrap_servers == ["broker-1:9092"]  # the option wins over the file
    assert reader.client_config.settings["client_id"] == "cid"
    with pytest.raises(KafkaOffsetsTopicError) as info:
        reader.partitions()
    assert SECRET not in str(info.value) and "[redacted]" in str(info.value)
    assert "broker-1:9092" in str(info.value)


def test_consumer_settings_are_read_only():
    from audit.sources.client_config import parse_client_properties
    from audit.sources.kafka_datasource import consumer_settings

    kw = consumer_settings(
        parse_client_properties(
            {
                "bootstrap.servers": "a:1",
                "group.id": "g",
                "enable.auto.commit": "true",
                "isolation.level": "read_uncommitted",
            }
        )
    )
    from kafka import KafkaConsumer

    assert set(kw) <= set(KafkaConsumer.DEFAULT_CONFIG)
    assert kw["group_id"] is None and kw["enable_auto_commit"] is False
    assert kw["isolation_level"] == "read_committed" and kw["allow_auto_create_topics"] is False
    assert kw["bootstrap_servers"] == ["a:1"]
