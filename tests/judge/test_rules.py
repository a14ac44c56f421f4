"""Each rule of AUDIT_RULES.md as its own unit, on a handful of inline rows."""

from datetime import datetime

import pytest

from audit.formats.checkpoints import end_offset_for
from audit.judge import judge, with_verdicts
from audit.tables import FINDING_COLUMNS

COMMITS = (
    "group_id string, topic string, partition int, committed_offset long, committed_leader_epoch int, "
    "metadata string, commit_timestamp timestamp, value_version short, source_partition int, "
    "source_offset long, is_latest boolean, broker_id int, topic_id string"
)
EPOCHS = "topic string, partition int, broker_id int, leader_epoch int, start_offset long, is_leader boolean"
BOUNDS = (
    "topic string, partition int, log_start_offset long, log_end_offset long, high_watermark long, "
    "leader_id int, answered_by_broker int, authority string, history_captured_at timestamp, replica_count int, "
    "caches_disagree boolean, unclean_elections int, last_unclean_election timestamp"
)
T0 = datetime(2026, 11, 22, 7, 0, 0)
LATER = datetime(2026, 11, 22, 8, 0, 0)


def commit(offset, epoch, n=0, latest=True, group="g", topic="t", partition=0, version=3, ts=T0):
    return (
        group,
        topic,
        partition,
        offset,
        epoch,
        "",
        ts,
        version,
        0,
        n,
        latest,
        1,
        "AAECAwQFBgcICQoLDA0ODw" if version >= 4 else None,
    )


def tables(
    spark,
    commits,
    cache=((0, 0), (2, 60), (3, 110)),
    log_start=0,
    log_end=120,
    unclean=0,
    disagree=False,
    captured=LATER,
    extra_epochs=(),
    metadata_epoch=None,
):
    c = spark.createDataFrame(commits, COMMITS)
    e = spark.createDataFrame([("t", 0, 1, ep, so, True) for ep, so in cache] + list(extra_epochs), EPOCHS)
    b = spark.createDataFrame(
        [("t", 0, log_start, log_end, log_end, 1, 1, "test", captured, 2, disagree, unclean, None)], BOUNDS
    )
    if metadata_epoch is not None:
        from pyspark.sql import functions as F

        b = b.withColumn("metadata_leader_epoch", F.lit(metadata_epoch))
    return c, e, b


def run(spark, rule, commits, history=False, **kw):
    c, e, b = tables(spark, commits, **kw)
    rows = judge(spark, c, e, b, history=history, rules=[rule]).collect()
    return [r.asDict() for r in rows]


# ---- FORMATS.md §4 (LeaderEpochFileCache.endOffsetFor), pure


@pytest.mark.parametrize(
    "epoch,expected",
    [
        (3, (3, 120)),  # latest epoch -> log end offset
        (0, (0, 60)),  # start offset of the next higher epoch
        (1, (0, 60)),  # epoch with no entry: largest epoch below it
        (2, (2, 110)),
        (4, (-1, -1)),  # above every epoch: undefined
        (-1, (-1, -1)),
    ],
)
def test_end_offset_for(epoch, expected):
    assert end_offset_for([(0, 0), (2, 60), (3, 110)], epoch, 120) == expected


def test_end_offset_for_epoch_below_first_entry():
    assert end_offset_for([(5, 50)], 2, 90) == (2, 50)
    assert end_offset_for([], 0, 90) == (-1, -1)


# ---- LOG_TRUNCATION


def test_truncation_past_divergence_point(spark):
    rows = run(spark, "LOG_TRUNCATION", [commit(100, 0)], unclean=1)
    assert len(rows) == 1
    r = rows[0]
    assert (r["finding"], r["severity"], r["divergence_offset"], r["records_at_risk"], r["epoch_end_offset"]) == (
        "LOG_TRUNCATION",
        "critical",
        60,
        40,
        60,
    )
    assert r["answered_by_broker"] == 1 and "unclean leader election" in r["detail"]
    assert list(r) == FINDING_COLUMNS


def test_commit_at_divergence_point_is_fine(spark):
    assert run(spark, "LOG_TRUNCATION", [commit(60, 0), commit(59, 0, n=1, group="h")]) == []


def test_clean_leader_change_gives_no_finding(spark):
    # epochs bumped with no lost records: commit within epoch 2's range
    assert run(spark, "LOG_TRUNCATION", [commit(105, 2)]) == []
    assert run(spark, "LOG_TRUNCATION", [commit(120, 3)]) == []


def test_stale_client_epoch_is_explained(spark):
    rows = run(spark, "LOG_TRUNCATION", [commit(78, 0)], cache=((0, 0), (2, 50)))
    assert rows[0]["divergence_offset"] == 50 and "stale client epoch" in rows[0]["detail"]


def test_cache_disagreement_is_evidence(spark):
    rows = run(spark, "LOG_TRUNCATION", [commit(100, 0)], disagree=True)
    assert "disagree" in rows[0]["detail"]


def test_only_the_leaders_cache_answers(spark):
    # a follower's stale cache (epoch 0 up to 200) must not hide the truncation
    rows = run(spark, "LOG_TRUNCATION", [commit(100, 0)], extra_epochs=[("t", 0, 2, 0, 0, False)])
    assert [r["divergence_offset"] for r in rows] == [60]


# ---- UNKNOWN_LEADER_EPOCH


def test_undefined_answer_from_empty_cache_is_truncation_without_divergence_point(spark):
    """Java consumer: an undefined OffsetsForLeaderEpoch answer is a truncation with no divergent offset."""
    rows = run(spark, "LOG_TRUNCATION", [commit(50, 7)], cache=())
    assert [(r["severity"], r["divergence_offset"], r["records_at_risk"]) for r in rows] == [("critical", None, None)]
    assert "no known divergence point" in rows[0]["detail"]


def test_epoch_newer_than_history_is_not_truncation(spark):
    """Kafka's consumer never validates an epoch newer than any metadata it sees (it stalls; the lab's
    oracle reports no exception), so such a commit is UNKNOWN_LEADER_EPOCH only."""
    assert run(spark, "LOG_TRUNCATION", [commit(50, 7)]) == []
    rows = run(spark, "UNKNOWN_LEADER_EPOCH", [commit(50, 7)])
    assert "stalls" in rows[0]["detail"]


def test_unknown_leader_epoch_error_when_history_newer(spark):
    rows = run(spark, "UNKNOWN_LEADER_EPOCH", [commit(50, 7)])
    assert [(r["finding"], r["severity"]) for r in rows] == [("UNKNOWN_LEADER_EPOCH", "error")]
    assert "newest: 3" in rows[0]["detail"]


def test_unknown_leader_epoch_warning_when_history_older(spark):
    rows = run(spark, "UNKNOWN_LEADER_EPOCH", [commit(50, 7, ts=LATER)], captured=T0)
    assert rows[0]["severity"] == "warning"


def test_known_epoch_is_not_unknown(spark):
    assert run(spark, "UNKNOWN_LEADER_EPOCH", [commit(50, 3)]) == []


def test_epoch_known_only_to_the_metadata_log_ends_at_the_log_end(spark):
    """Epochs 4-5 had leaders (KRaft metadata log) but no batch: the answering replica's cache stops at 3.
    The leader of epoch 5 ended it at the log end (120), as Kafka's consumer saw with the cluster up."""
    rows = run(spark, "LOG_TRUNCATION", [commit(130, 5)], metadata_epoch=5)
    assert [(r["divergence_offset"], r["epoch_end_offset"]) for r in rows] == [(120, 120)]
    assert run(spark, "LOG_TRUNCATION", [commit(120, 5)], metadata_epoch=5) == []
    assert run(spark, "UNKNOWN_LEADER_EPOCH", [commit(130, 5)], metadata_epoch=5) == []
    # above the metadata log's epoch too: still unknown
    assert [r["finding"] for r in run(spark, "UNKNOWN_LEADER_EPOCH", [commit(130, 6)], metadata_epoch=5)] == [
        "UNKNOWN_LEADER_EPOCH"
    ]


def test_epoch_claimed_before_the_cluster_had_it_is_unknown(spark):
    """KRaft timeline: epoch 5 began at LATER; a commit with epoch 5 written at T0 claimed it early
    (Kafka's consumer, resuming then, stalled); a commit written after LATER is fine."""
    timeline = _timeline((3, T0.replace(hour=6), 1, False), (5, LATER, 1, False))
    c, e, b = tables(spark, [commit(115, 5, ts=T0)], metadata_epoch=5)
    rows = judge(
        spark, c, e, b.withColumn("epoch_timeline", timeline), rules=["UNKNOWN_LEADER_EPOCH", "LOG_TRUNCATION"]
    ).collect()
    assert [(r["finding"], r["severity"]) for r in rows] == [("UNKNOWN_LEADER_EPOCH", "error")]
    assert "did not exist yet" in rows[0]["detail"] and "leader epoch was 3 then" in rows[0]["detail"]
    c, e, b = tables(spark, [commit(115, 5, ts=LATER.replace(minute=5))], metadata_epoch=5)
    assert judge(spark, c, e, b.withColumn("epoch_timeline", timeline), rules=["UNKNOWN_LEADER_EPOCH"]).collect() == []


def _timeline(*entries):
    """epoch_timeline column: (epoch, started_at, leader, unclean) entries."""
    from pyspark.sql import functions as F

    return F.array(
        *[
            F.struct(
                F.lit(e).alias("epoch"),
                F.lit(t).cast("timestamp").alias("started_at"),
                F.lit(ld).alias("leader"),
                F.lit(u).alias("unclean"),
            )
            for e, t, ld, u in entries
        ]
    )


def _truncation(spark, commits, timeline=None, **kw):
    c, e, b = tables(spark, commits, **kw)
    if timeline is not None:
        b = b.withColumn("epoch_timeline", timeline)
    return [r.asDict() for r in judge(spark, c, e, b, rules=["LOG_TRUNCATION"]).collect()]


def test_truncation_cause_unclean_election_names_the_epoch_leader_and_time(spark):
    """Cache 0@0, 2@60, 3@110: a commit 100@0 was cut at 60 by epoch 2, begun by an unclean election."""
    tl = _timeline(
        (0, T0, 1, False),
        (1, T0.replace(minute=10), -1, False),
        (2, T0.replace(minute=20), 2, True),
        (3, T0.replace(minute=30), 1, False),
    )
    [r] = _truncation(spark, [commit(100, 0)], timeline=tl)
    assert (r["cause"], r["cause_leader_epoch"], r["cause_leader"], r["cause_time"]) == (
        "unclean_election",
        2,
        2,
        T0.replace(minute=20),
    )
    assert "made broker 2 the leader in epoch 2" in r["detail"]


def test_truncation_cause_unclean_election_when_the_new_leader_wrote_nothing(spark):
    """The uncleanly elected leader took epoch 2 at offset 52 and nothing was written since (log end 52): the
    commit 62@0 lies in records the election threw away (Kafka lab, 3.9.2 seed 1)."""
    tl = _timeline(
        (0, T0, 2, False),
        (1, T0.replace(minute=10), -1, False),
        (2, T0.replace(minute=20), 3, True),
        (3, LATER, 2, False),
    )
    [r] = _truncation(spark, [commit(62, 0)], timeline=tl, cache=((0, 0),), log_end=52)
    assert (r["cause"], r["cause_leader_epoch"], r["cause_leader"], r["divergence_offset"]) == (
        "unclean_election",
        2,
        3,
        52,
    )


def test_truncation_cause_ignores_an_unclean_election_after_the_offset_was_written(spark):
    """The only unclean election (epoch 5) came after offset 99 was written (epoch 2): it did not cut this commit;
    the commit's epoch 0 is simply older than the epoch its last offset was written in."""
    tl = _timeline(
        (0, T0, 1, False),
        (2, T0.replace(minute=20), 1, False),
        (3, T0.replace(minute=30), 1, False),
        (5, LATER, 2, True),
    )
    [r] = _truncation(spark, [commit(100, 0)], timeline=tl)
    assert (r["cause"], r["cause_leader_epoch"], r["cause_time"]) == ("stale_client_epoch", None, None)
    assert "stale client epoch" in r["detail"]


@pytest.mark.parametrize(
    "kw, cause",
    [
        ({"disagree": True}, "replica_divergence"),
        ({}, "stale_client_epoch"),
        ({"unclean": 1}, "unclean_election"),  # a source with the count of unclean elections but no timeline
        ({"cache": ((0, 0), (3, 60))}, "stale_client_epoch"),
    ],
)
def test_truncation_cause_without_a_timeline(spark, kw, cause):
    [r] = _truncation(spark, [commit(100, 0)], **kw)
    assert r["cause"] == cause and r["cause_leader_epoch"] is None


def test_truncation_cause_unknown_when_the_commit_is_past_the_log_end_in_its_own_epoch(spark):
    """Epoch 0 ends at 60 and nothing was written after: the log end is 60, the commit 100@0 points past it."""
    [r] = _truncation(spark, [commit(100, 0)], cache=((0, 0),), log_end=60)
    assert r["cause"] == "unknown"


def test_other_findings_have_no_cause(spark):
    rows = judge(spark, *tables(spark, [commit(130, 3)], log_end=120)).collect()
    assert rows and all(
        r["cause"] is None and r["cause_leader_epoch"] is None for r in rows if r["finding"] != "LOG_TRUNCATION"
    )


# ---- BEHIND_METADATA_EPOCH


def test_epoch_regression_forward_move_is_error(spark):
    rows = run(spark, "BEHIND_METADATA_EPOCH", [commit(75, 2, n=0, latest=False), commit(78, 0, n=1)])
    assert [(r["severity"], r["previous_offset"], r["previous_leader_epoch"]) for r in rows] == [("error", 75, 2)]


def test_epoch_regression_backward_move_is_warning(spark):
    rows = run(spark, "BEHIND_METADATA_EPOCH", [commit(95, 2, n=0, latest=False), commit(61, 0, n=1)])
    assert [r["severity"] for r in rows] == ["warning"]


def test_regression_reference_is_highest_earlier_epoch(spark):
    rows = run(
        spark,
        "BEHIND_METADATA_EPOCH",
        [commit(90, 3, n=0, latest=False), commit(95, 2, n=1, latest=False), commit(96, 1, n=2)],
    )
    assert [(r["previous_offset"], r["previous_leader_epoch"]) for r in rows] == [(90, 3)]


def test_epoch_increase_and_epoch_minus_one_are_not_regressions(spark):
    assert run(spark, "BEHIND_METADATA_EPOCH", [commit(50, 0, n=0, latest=False), commit(70, 2, n=1)]) == []
    assert run(spark, "BEHIND_METADATA_EPOCH", [commit(50, 2, n=0, latest=False), commit(70, -1, n=1)]) == []


def test_history_mode_judges_earlier_commits(spark):
    commits = [commit(75, 2, n=0, latest=False), commit(78, 0, n=1, latest=False), commit(80, 3, n=2)]
    assert run(spark, "BEHIND_METADATA_EPOCH", commits) == []
    assert len(run(spark, "BEHIND_METADATA_EPOCH", commits, history=True)) == 1


# ---- OFFSET_OUT_OF_RANGE


def test_below_log_start(spark):
    rows = run(spark, "OFFSET_OUT_OF_RANGE", [commit(30, 0)], cache=((0, 50),), log_start=50, log_end=90)
    assert [(r["severity"], r["records_at_risk"], r["log_start_offset"]) for r in rows] == [("error", 20, 50)]
    assert "below the log start offset 50" in rows[0]["detail"]


def test_above_log_end_is_not_clamped(spark):
    rows = run(spark, "OFFSET_OUT_OF_RANGE", [commit(75, -1)], log_end=60)
    assert [(r["records_at_risk"], r["log_end_offset"]) for r in rows] == [(15, 60)]
    assert "above the log end offset 60" in rows[0]["detail"]


def test_bounds_are_inclusive(spark):
    assert (
        run(
            spark,
            "OFFSET_OUT_OF_RANGE",
            [commit(50, 0), commit(90, 0, n=1, group="h")],
            cache=((0, 50),),
            log_start=50,
            log_end=90,
        )
        == []
    )


# ---- OFFSET_REWIND


def test_rewind(spark):
    rows = run(spark, "OFFSET_REWIND", [commit(70, 0, n=0, latest=False), commit(32, 0, n=1)])
    assert [(r["severity"], r["previous_offset"], r["committed_offset"], r["records_at_risk"]) for r in rows] == [
        ("warning", 70, 32, 38)
    ]


def test_same_offset_again_is_not_a_rewind(spark):
    assert run(spark, "OFFSET_REWIND", [commit(70, 0, n=0, latest=False), commit(70, 0, n=1)]) == []


# ---- EPOCH_UNVERIFIABLE


def test_epoch_minus_one_is_unverifiable(spark):
    rows = run(spark, "EPOCH_UNVERIFIABLE", [commit(12, -1, version=1), commit(13, 0, n=1, group="h")])
    assert [(r["group_id"], r["severity"]) for r in rows] == [("g", "info")]
    assert "value version 1" in rows[0]["detail"]


def test_partition_missing_from_inputs_is_unverifiable(spark):
    rows = run(spark, "EPOCH_UNVERIFIABLE", [commit(12, 0, topic="gone")])
    assert len(rows) == 1 and "No replica of gone-0" in rows[0]["detail"]


# ---- verdicts


def test_verdict_is_most_severe_finding(spark):
    c, e, b = tables(spark, [commit(95, 2, n=0, latest=False), commit(130, 0, n=1)])
    f = judge(spark, c, e, b)
    names = {r.finding for r in f.collect()}
    assert {"LOG_TRUNCATION", "OFFSET_OUT_OF_RANGE", "BEHIND_METADATA_EPOCH"} <= names
    v = with_verdicts(c, f).collect()
    assert [(r.committed_offset, r.verdict) for r in v] == [(130, "LOG_TRUNCATION")]


def test_one_severity_order_and_fail_on_gate():
    """The severities, their ranks and the --fail-on gate are declared once (audit.tables); the CLI's choices and
    the pipeline's config type follow them."""
    import typing

    from audit.pipeline import AuditConfig
    from audit.tables import FAIL_ON_CHOICES, SEVERITIES, SEVERITY_RANK, failing_severities, fails

    assert sorted(SEVERITY_RANK, key=SEVERITY_RANK.get, reverse=True) == list(SEVERITIES)
    assert typing.get_args(AuditConfig.model_fields["fail_on"].annotation) == FAIL_ON_CHOICES
    assert failing_severities("error") == ["critical", "error"] and failing_severities("never") == []
    assert fails("error", {"critical": 0, "error": 1}) and not fails("critical", {"error": 5, "warning": 1})
    assert not fails("never", {"critical": 3})
    with pytest.raises(ValueError):
        failing_severities("info")
