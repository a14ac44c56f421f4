"""Live-cluster checks of the collector and the kafka_offsets_topic data source.

Against the cluster ``KAFKA_BOOTSTRAP_SERVERS`` names (``host:port[,host:port]``; ``KAFKA_CLIENT_PROPERTIES`` may
name a client ``.properties`` file for SASL/TLS), else against the session's lab cluster (``lab_live``: real
brokers of the first lab Kafka version, with commits in ``__consumer_offsets``).
Everything here is read-only: Metadata, OffsetsForLeaderEpoch, ListOffsets and
Fetch of ``__consumer_offsets`` without a group; nothing is committed or written.
"""

from __future__ import annotations

import os

import pytest

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
PROPERTIES = os.environ.get("KAFKA_CLIENT_PROPERTIES", "").strip() or None
TOPIC = "__consumer_offsets"


@pytest.fixture(scope="module")
def bootstrap(request) -> str:
    return BOOTSTRAP or request.getfixturevalue("lab_live")[0]


@pytest.fixture(scope="module")
def collector(bootstrap):
    from audit.sources.collector import open_collector

    c = open_collector(PROPERTIES, bootstrap_servers=bootstrap, deadline_ms=60_000)
    yield c
    c.close()


def test_metadata_for_the_offsets_topic_only(collector):
    states = collector.fetch_metadata([TOPIC])
    assert states, f"{TOPIC} has no partitions?"
    assert {t for t, _ in states} == {TOPIC}
    assert all(s.leader_id >= 0 for s in states.values()), "offline __consumer_offsets partitions"
    assert collector.brokers, "metadata lists no brokers"
    assert collector.stats["requests.MetadataRequest"] >= 1


def test_bounds_and_epoch_end_offsets_agree(collector):
    states = collector.fetch_metadata([TOPIC])
    bounds = collector.log_bounds([TOPIC])
    assert len(bounds) == len(states)
    by_tp = {(b["topic"], b["partition"]): b for b in bounds}
    for b in bounds:
        assert 0 <= b["log_start_offset"] <= b["log_end_offset"] == b["high_watermark"]
    requests = [(t, p, s.leader_epoch) for (t, p), s in states.items() if s.leader_epoch >= 0]
    assert requests, "the brokers report no leader epochs (Metadata v7+ does, on every Kafka the audit supports)"
    rows = collector.epoch_end_offsets(requests)
    assert len(rows) == len(requests)
    for r in rows:
        state = states[(r["topic"], r["partition"])]
        # the current epoch ends at the leader's log end offset, which is >= the high watermark
        assert r["leader_epoch"] == r["requested_epoch"] == state.leader_epoch
        assert r["end_offset"] >= by_tp[(r["topic"], r["partition"])]["log_end_offset"]
        assert r["answered_by_broker"] == state.leader_id


def test_data_source_reads_the_offsets_topic(spark, bootstrap):
    from audit.sources.kafka_datasource import KafkaOffsetsTopicReader, reader_from_options, register

    options = {"bootstrap.servers": bootstrap, "poll.timeout.ms": "30000"}
    if PROPERTIES:
        options["client.properties"] = PROPERTIES
    planner = reader_from_options(options)
    assert isinstance(planner, KafkaOffsetsTopicReader)
    plan = {r.partition: r for task in planner.partitions() for r in task.ranges}
    register(spark)
    reader = spark.read.format("kafka_offsets_topic")
    for k, v in options.items():
        reader = reader.option(k, v)
    rows = reader.load().select("source_partition", "source_offset").collect()
    for r in rows:
        assert r.source_partition in plan
        # records appended after planning may exist, but never before the planned start
        assert r.source_offset >= plan[r.source_partition].start_offset
    assert len({(r.source_partition, r.source_offset) for r in rows}) == len(rows)
    if not BOOTSTRAP:  # the lab cluster's groups committed
        assert rows


def test_reading_share_group_state_creates_nothing(spark, bootstrap):
    """The live read of ``__share_group_state`` (share groups, KIP-932) asks Metadata without auto-creation: on a
    cluster without the topic it gives None and the topic still does not exist afterwards (a broker creates an
    internal topic a Metadata request names when the request allows auto-creation)."""
    from audit.sources.cluster import read_share_state_topic
    from audit.sources.collector import open_collector

    def exists() -> bool:
        c = open_collector(PROPERTIES, bootstrap_servers=bootstrap, deadline_ms=30_000)
        try:
            return bool(c.fetch_metadata(["__share_group_state"]))
        except Exception:  # noqa: BLE001 - a missing topic may be reported as an error
            return False
        finally:
            c.close()

    before = exists()
    raw = read_share_state_topic(spark, bootstrap, PROPERTIES)
    assert exists() == before
    if not before:
        assert raw is None
    else:
        assert raw is not None and set(raw.columns) >= {"group_id", "topic_id", "start_offset", "state_batches"}


def test_local_log_start_is_the_log_start_without_tiered_storage(collector):
    """ListOffsets EARLIEST_LOCAL (-4; KIP-1005, ListOffsets v8+, negotiated through ApiVersions): a topic without
    tiered storage has its whole log on the leader's disk, so its local log start is its log start, DeleteRecords
    included (the lab's ``events``-1 starts at 10).  ``__consumer_offsets`` can never be tiered; a broker without
    ListOffsets v8 (before Kafka 3.5) gives None."""
    topics = [TOPIC] if BOOTSTRAP else [TOPIC, "events"]
    bounds = collector.log_bounds(topics)
    assert bounds
    for b in bounds:
        assert b["local_log_start_offset"] in (None, b["log_start_offset"]), b
    if not BOOTSTRAP:  # the lab's brokers are 3.9+: every partition answers
        assert all(b["local_log_start_offset"] == b["log_start_offset"] for b in bounds), bounds
        events = {b["partition"]: b for b in bounds if b["topic"] == "events"}
        assert events[1]["log_start_offset"] == events[1]["local_log_start_offset"] == 10
