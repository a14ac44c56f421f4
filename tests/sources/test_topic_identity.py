"""Replicas of another topic incarnation (KIP-516 topic ids): :func:`audit.sources.logdirs.topic_id_mismatches`
over inline tables, the metadata log's current ids from ``sql/topic_ids.sql``."""

from __future__ import annotations

from pyspark.sql import functions as F

from audit.queries import load_sql
from audit.sources.logdirs import topic_id_mismatches

REPLICAS = "broker_id int, topic string, partition int, topic_id string, log_end_offset long"
OLD, NEW, GONE = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"


def _replicas(spark):
    return spark.createDataFrame(
        [
            (1, "orders", 0, NEW, 10),
            (3, "orders", 0, NEW, 10),
            (2, "orders", 0, OLD, 40),  # re-created
            (1, "gone", 0, GONE, 5),  # deleted
            (1, "unknown", 0, OLD, 7),  # a name the metadata log read does not hold: not judged
            (2, "noid", 0, None, 3),  # no partition.metadata
        ],
        REPLICAS,
    )


def test_current_ids_from_the_metadata_log(spark):
    meta = spark.createDataFrame(
        [
            ("TopicRecord", "orders", OLD, 1),
            ("TopicRecord", "gone", GONE, 2),
            ("RemoveTopicRecord", None, OLD, 3),
            ("TopicRecord", "orders", NEW, 4),
            ("RemoveTopicRecord", None, GONE, 5),
        ],
        "record_type string, topic_name string, topic_id string, seq long",
    ).withColumn("decode_error", F.lit(None).cast("string"))
    meta.createOrReplaceTempView("metadata_records")
    current = spark.sql(load_sql("topic_ids"))
    got = {r["topic"]: (r["current_topic_id"], sorted(r["topic_ids"])) for r in current.collect()}
    assert got == {"orders": (NEW, sorted([OLD, NEW])), "gone": (None, [GONE])}
    rows = topic_id_mismatches(_replicas(spark), current)
    assert [
        (r["broker_id"], r["topic"], r["topic_id"], r["current_topic_id"], r["stale"], r["reason"], r["log_end_offset"])
        for r in rows
    ] == [(1, "gone", GONE, None, True, "deleted_topic", 5), (2, "orders", OLD, NEW, True, "stale_incarnation", 40)]


def test_without_the_metadata_log_disagreeing_replicas_are_listed_not_dropped(spark):
    rows = topic_id_mismatches(_replicas(spark), None)
    assert [(r["broker_id"], r["topic"], r["topic_id"], r["stale"], r["reason"]) for r in rows] == [
        (1, "orders", NEW, False, "conflicting_topic_ids"),
        (2, "orders", OLD, False, "conflicting_topic_ids"),
        (3, "orders", NEW, False, "conflicting_topic_ids"),
    ]
