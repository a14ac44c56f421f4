"""REPLICA_DIVERGENCE (sql/finding_replica_divergence.sql) on inline replicas: the first offset where a replica's
leader-epoch cache names an older epoch than the authoritative one's is where Kafka's follower truncation ends."""

from datetime import datetime

from audit.judge import TIMELINE_TYPE, judge
from audit.tables import FINDING_COLUMNS
from .test_rules import BOUNDS, COMMITS, EPOCHS

REPLICAS = "broker_id int, topic string, partition int, log_end_offset long, high_watermark long, damage string"
T0 = datetime(2026, 11, 22, 7, 0, 0)


def run(spark, leader_cache, leader_leo, replicas, commits=(), timeline=None):
    """leader (broker 1) cache and LEO; replicas: [(broker, cache, leo, hw)]."""
    from pyspark.sql import functions as F

    epochs = [("t", 0, 1, e, s, True) for e, s in leader_cache]
    epochs += [("t", 0, b, e, s, False) for b, cache, _, _ in replicas for e, s in cache]
    reps = [(1, "t", 0, leader_leo, leader_leo, None)] + [(b, "t", 0, leo, hw, None) for b, _, leo, hw in replicas]
    c = spark.createDataFrame(
        [(g, "t", 0, o, e, "", T0, 3, 0, i, True, 1, None) for i, (g, o, e) in enumerate(commits)], COMMITS
    )
    b = spark.createDataFrame(
        [("t", 0, 0, leader_leo, leader_leo, 1, 1, "test", T0, 1 + len(replicas), True, 0, None)], BOUNDS
    )
    if timeline is not None:
        b = b.withColumn("epoch_timeline", F.lit(None).cast(TIMELINE_TYPE))
        b = b.withColumn(
            "epoch_timeline",
            F.array(
                *[
                    F.struct(
                        F.lit(e).cast("int").alias("epoch"),
                        F.lit(ts).cast("timestamp").alias("started_at"),
                        F.lit(ld).cast("int").alias("leader"),
                        F.lit(u).alias("unclean"),
                    )
                    for e, ts, ld, u in timeline
                ]
            ),
        )
    rows = judge(
        spark,
        c,
        spark.createDataFrame(epochs, EPOCHS),
        b,
        rules=["REPLICA_DIVERGENCE"],
        replicas=spark.createDataFrame(reps, REPLICAS),
    ).collect()
    return [r.asDict() for r in rows]


def test_old_leader_holds_lost_lineage(spark):
    # broker 2 led epoch 0 and wrote 0..99; broker 1 had 0..49, was elected uncleanly (epoch 1) and wrote 50..79
    rows = run(
        spark,
        [(0, 0), (1, 50)],
        80,
        [(2, [(0, 0)], 100, 90)],
        commits=[("past", 70, 0), ("new-lineage", 70, 1), ("before", 40, 0), ("at", 50, 0)],
        timeline=[(0, T0, 2, False), (1, T0, 1, True)],
    )
    assert len(rows) == 1
    r = rows[0]
    assert list(r) == FINDING_COLUMNS
    assert (r["finding"], r["group_id"], r["replica_broker"], r["divergence_offset"], r["records_at_risk"]) == (
        "REPLICA_DIVERGENCE",
        None,
        2,
        50,
        50,
    )
    assert r["severity"] == "error"  # records below broker 2's high watermark are lost
    assert r["groups_consumed"] == ["past"]  # offset 70 with epoch 0 read broker 2's lineage; epoch 1 read broker 1's
    assert (r["cause"], r["cause_leader_epoch"], r["cause_leader"]) == ("unclean_election", 1, 1)
    assert r["answered_by_broker"] == 1 and r["previous_leader_epoch"] == 0
    assert "broker 2" in r["detail"].lower() and "50..99" in r["detail"]


def test_lagging_follower_is_not_divergent(spark):
    # same lineage, only behind (a follower catching up), or exactly level
    assert (
        run(
            spark,
            [(0, 0), (1, 50), (3, 90)],
            120,
            [(2, [(0, 0), (1, 50)], 70, 70), (3, [(0, 0), (1, 50), (3, 90)], 120, 120)],
        )
        == []
    )


def test_unreplicated_tail_after_clean_change_is_a_warning(spark):
    # broker 2 led epoch 1 and wrote 50..59, which never reached its high watermark (50); broker 1 took over
    # cleanly in epoch 2 at offset 50
    rows = run(
        spark,
        [(0, 0), (1, 40), (2, 50)],
        70,
        [(2, [(0, 0), (1, 40)], 60, 50)],
        timeline=[(1, T0, 2, False), (2, T0, 1, False)],
    )
    assert [(r["divergence_offset"], r["records_at_risk"], r["severity"], r["cause"]) for r in rows] == [
        (50, 10, "warning", "unknown")
    ]


def test_newer_snapshot_of_a_replica_is_not_divergence(spark):
    # the authoritative copy was taken before a leader change that broker 2's copy already has
    assert run(spark, [(0, 0)], 100, [(2, [(0, 0), (1, 100)], 120, 120)]) == []


def test_divergence_found_below_a_later_agreement(spark):
    # broker 2 stayed in epoch 0 to offset 80; broker 1 wrote epoch 1 from 30, epoch 2 from 60
    rows = run(spark, [(0, 0), (1, 30), (2, 60)], 90, [(2, [(0, 0)], 80, 0)])
    assert [(r["divergence_offset"], r["records_at_risk"]) for r in rows] == [(30, 50)]


def test_follower_truncation_walk_agrees(spark):
    # KIP-279's example shape: the replica has epochs the leader never saw
    rows = run(spark, [(0, 0), (2, 50), (4, 70)], 100, [(3, [(0, 0), (3, 60)], 75, 0)])
    # Kafka: leader answers (2, 70) for epoch 3; replica's end for 2 is (0, 60): truncate to 60, then for
    # epoch 0 the leader answers 50: truncate to 50
    assert [(r["replica_broker"], r["divergence_offset"], r["records_at_risk"]) for r in rows] == [(3, 50, 25)]


def test_partition_rules_skipped_without_replicas(spark):
    c = spark.createDataFrame([], COMMITS)
    e = spark.createDataFrame([("t", 0, 1, 0, 0, True), ("t", 0, 2, 0, 0, False)], EPOCHS)
    b = spark.createDataFrame([("t", 0, 0, 10, 10, 1, 1, "test", T0, 2, False, 0, None)], BOUNDS)
    assert judge(spark, c, e, b).where("finding = 'REPLICA_DIVERGENCE'").count() == 0
