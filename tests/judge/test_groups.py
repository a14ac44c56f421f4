"""committed_offsets' bounds and lag, and the groups table (sql/groups.sql), on small inline tables."""

from datetime import datetime, timezone

import pytest

from audit.groups import DEFAULT_STALE_AFTER_SECONDS, group_status
from audit.judge import with_verdicts
from audit.tables import FINDING_COLUMNS, TABLES, conform

COMMITS = (
    "group_id string, topic string, partition int, committed_offset long, committed_leader_epoch int, "
    "metadata string, commit_timestamp timestamp, value_version short, source_partition int, "
    "source_offset long, is_latest boolean, broker_id int, topic_id string"
)
BOUNDS = "topic string, partition int, log_start_offset long, log_end_offset long, high_watermark long"
T0 = datetime(2026, 11, 22, 7, 0, 0)
INFO = "group_id string, group_type string, group_state string, group_protocol_type string, group_protocol string, group_members int"


def _commit(group, partition, offset, ts=T0, latest=True, topic="t"):
    return (group, topic, partition, offset, 0, "", ts, 3, 0, partition, latest, 1, None)


def _finding(spark, rows):
    """findings rows from (group, topic, partition, offset, ts, finding, severity, records_at_risk)."""
    cols = {c: None for c in FINDING_COLUMNS}
    out = []
    for g, t, p, o, ts, name, sev, risk in rows:
        r = dict(
            cols,
            group_id=g,
            topic=t,
            partition=p,
            committed_offset=o,
            commit_timestamp=ts,
            finding=name,
            severity=sev,
            records_at_risk=risk,
            detail="d",
        )
        out.append(r)
    df = spark.createDataFrame(
        out,
        ", ".join(f"{c} {t}" for c, t in [(c.name, c.type) for c in TABLES["findings"] if c.name in FINDING_COLUMNS]),
    )
    return df


def test_committed_offsets_carry_bounds_and_unclamped_lag(spark):
    c = spark.createDataFrame(
        [
            _commit("g", 0, 100),
            _commit("g", 1, 250),
            _commit("g", 2, 5),
            _commit("g", 0, 50, latest=False),
            _commit("h", 0, 80, ts=None),
        ],
        COMMITS,
    )
    b = spark.createDataFrame([("t", 0, 10, 120, 118), ("t", 1, 0, 200, 200)], BOUNDS)
    f = _finding(
        spark,
        [
            ("g", "t", 1, 250, T0, "OFFSET_OUT_OF_RANGE", "error", None),
            ("g", "t", 0, 100, T0, "LOG_TRUNCATION", "critical", 40),
            ("g", "t", 0, 100, T0, "OFFSET_REWIND", "warning", 55),
            ("h", "t", 0, 80, None, "EPOCH_UNVERIFIABLE", "info", None),
            (None, "t", 0, None, None, "REPLICA_DIVERGENCE", "critical", 7),
        ],
    )
    rows = {(r.group_id, r.partition): r for r in with_verdicts(c, f, b).collect()}
    assert set(rows) == {("g", 0), ("g", 1), ("g", 2), ("h", 0)}
    g0, g1, g2, h0 = rows["g", 0], rows["g", 1], rows["g", 2], rows["h", 0]
    assert (g0.verdict, g0.log_start_offset, g0.log_end_offset, g0.high_watermark, g0.lag) == (
        "LOG_TRUNCATION",
        10,
        120,
        118,
        20,
    )
    assert g0.records_at_risk == 55  # the largest count of the commit's findings, not only the verdict's
    assert (g1.verdict, g1.lag, g1.records_at_risk) == ("OFFSET_OUT_OF_RANGE", -50, None)  # past the log end: negative
    assert (g2.verdict, g2.log_end_offset, g2.lag) == ("OK", None, None)  # partition without bounds
    assert h0.verdict == "EPOCH_UNVERIFIABLE"  # a commit without a commit timestamp still takes its finding
    conform("committed_offsets", with_verdicts(c, f, b))  # every column is in the contract


def _committed(spark, rows):
    """committed_offsets rows: (group, topic, partition, offset, ts, verdict, log_end, risk)."""
    data = [
        dict(
            group_id=g,
            topic=t,
            partition=p,
            committed_offset=o,
            commit_timestamp=ts,
            verdict=v,
            log_end_offset=le,
            lag=None if le is None else le - o,
            records_at_risk=risk,
        )
        for g, t, p, o, ts, v, le, risk in rows
    ]
    df = spark.createDataFrame(
        data,
        "group_id string, topic string, partition int, committed_offset long, "
        "commit_timestamp timestamp, verdict string, log_end_offset long, lag long, "
        "records_at_risk long",
    )
    return conform("committed_offsets", df)


def test_groups_status_worst_partition_lag_and_counts(spark):
    t_old, t_new = datetime(2026, 11, 20, 0, 0, 0), datetime(2026, 11, 22, 12, 0, 0)
    committed = _committed(
        spark,
        [
            ("risky", "a", 0, 100, t_new, "OK", 150, None),
            ("risky", "b", 3, 90, t_new, "LOG_TRUNCATION", 60, 30),
            ("risky", "a", 1, 10, t_new, "BEHIND_METADATA_EPOCH", 10, None),
            ("stale", "a", 0, 5, t_old, "OK", 25, None),  # 2.5 days old with 20 records waiting
            ("idle", "a", 0, 25, t_old, "OK", 25, None),  # as old, but nothing waits: not stale
            ("warned", "a", 0, 7, t_new, "OFFSET_REWIND", 9, 3),
            ("unknown", "z", 0, 7, t_new, "EPOCH_UNVERIFIABLE", None, None),
        ],
    )
    findings = _finding(
        spark,
        [
            ("risky", "b", 3, 90, t_new, "LOG_TRUNCATION", "critical", 30),
            ("risky", "a", 1, 10, t_new, "BEHIND_METADATA_EPOCH", "error", None),
            ("warned", "a", 0, 7, t_new, "OFFSET_REWIND", "warning", 3),
            ("unknown", "z", 0, 7, t_new, "EPOCH_UNVERIFIABLE", "info", None),
            (None, "a", 0, None, None, "REPLICA_DIVERGENCE", "critical", 4),
        ],
    )
    info = spark.createDataFrame(
        [("risky", "classic", "Stable", "consumer", "range", 2), ("stale", "consumer", "Empty", "consumer", None, 0)],
        INFO,
    )
    out = {
        r.group_id: r
        for r in conform("groups", group_status(spark, committed, findings, info, stale_after_seconds=86400)).collect()
    }
    assert set(out) == {"risky", "stale", "idle", "warned", "unknown"}
    r = out["risky"]
    assert (r.status, r.worst_verdict, r.worst_severity, r.worst_topic, r.worst_partition) == (
        "AT_RISK",
        "LOG_TRUNCATION",
        "critical",
        "b",
        3,
    )
    assert (r.partitions_committed, r.total_lag, r.max_lag, r.max_lag_topic, r.max_lag_partition) == (3, 20, 50, "a", 0)
    assert (r.findings_critical, r.findings_error, r.findings_warning, r.findings_info, r.records_at_risk) == (
        1,
        1,
        0,
        0,
        30,
    )
    assert (r.group_type, r.group_state, r.group_protocol, r.group_members) == ("classic", "Stable", "range", 2)
    # log dirs: the audit's time is the newest audited commit
    assert r.audited_as_of == t_new and r.latest_commit_age_seconds == 0
    s = out["stale"]
    assert (s.status, s.worst_verdict, s.worst_severity, s.worst_topic, s.latest_commit_age_seconds) == (
        "STALE",
        "OK",
        None,
        None,
        int((t_new - t_old).total_seconds()),
    )
    assert (out["idle"].status, out["idle"].total_lag) == ("OK", 0)
    assert (out["warned"].status, out["warned"].worst_severity, out["warned"].group_type) == ("WARN", "warning", None)
    u = out["unknown"]
    assert (u.status, u.partitions_unknown, u.total_lag, u.max_lag_topic) == ("OK", 1, None, None)


def test_groups_age_against_a_given_time_and_threshold(spark):
    t = datetime(2026, 11, 22, 12, 0, 0)
    committed = _committed(spark, [("g", "a", 0, 5, t, "OK", 6, None)])
    findings = _finding(spark, [])
    as_of = datetime(2026, 11, 22, 13, 0, 0, tzinfo=timezone.utc)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    row = group_status(spark, committed, findings, None, as_of=as_of, stale_after_seconds=3599).first()
    assert (row.latest_commit_age_seconds, row.status) == (3600, "STALE")
    row = group_status(spark, committed, findings, None, as_of=as_of, stale_after_seconds=3600).first()
    assert row.status == "OK"
    with pytest.raises(ValueError, match="stale_after_seconds"):
        group_status(spark, committed, findings, None, stale_after_seconds=-1)


# ---- the shared scenario: the lag kafka-consumer-groups --describe printed on the same cluster


def _ground_truth():
    import json
    from ..paths import SCENARIO

    return [
        r for r in json.loads((SCENARIO / "ground_truth.json").read_text()) if r.get("kafka_consumer_groups_describe")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["latest", "history"])
def test_scenario_lag_equals_kafka_consumer_groups_describe(request, mode):
    _result, out = request.getfixturevalue(f"scenario_{mode}")
    import pandas as pd

    committed = pd.read_parquet(out / "committed_offsets")
    got = {(r.group_id, r.topic, r.partition): r for r in committed.itertuples()}
    truth = _ground_truth()
    assert len(truth) >= 20
    negative = 0
    for t in truth:
        d = t["kafka_consumer_groups_describe"]
        r = got[t["group"], t["topic"], t["partition"]]
        assert (r.committed_offset, r.log_end_offset, r.lag) == (
            d["current_offset"],
            d["log_end_offset"],
            int(d["lag"]),
        ), t
        negative += int(d["lag"]) < 0
    assert negative == 2  # the tool does not clamp either: the two commits past the log end


def test_scenario_groups_sum_committed_offsets_and_findings(scenario_latest):
    import pandas as pd

    _result, out = scenario_latest
    committed = pd.read_parquet(out / "committed_offsets")
    findings = pd.read_parquet(out / "findings")
    groups = pd.read_parquet(out / "groups").set_index("group_id")
    assert sorted(groups.index) == sorted(committed.group_id.unique())
    rank = {"critical": 4, "error": 3, "warning": 2, "info": 1}
    for gid, rows in committed.groupby("group_id"):
        g = groups.loc[gid]
        assert g.partitions_committed == len(rows) and g.total_lag == rows.lag.sum() and g.max_lag == rows.lag.max()
        fs = findings[findings.group_id == gid]
        assert (g.findings_critical, g.findings_error, g.findings_warning, g.findings_info) == tuple(
            int((fs.severity == s).sum()) for s in ("critical", "error", "warning", "info")
        )
        worst = max((rank[s] for s in fs.severity), default=0)
        # log dirs: ages are taken at the newest audited commit; the CLI's default --stale-after is a day
        stale = g.latest_commit_age_seconds > DEFAULT_STALE_AFTER_SECONDS and g.total_lag > 0
        assert g.status == ("AT_RISK" if worst >= 3 else "STALE" if stale else "WARN" if worst == 2 else "OK"), gid
        assert g.latest_commit_timestamp == rows.commit_timestamp.max()
    # the commits past the log end belong to groups the audit marks at risk
    assert set(committed[committed.lag < 0].group_id) <= set(groups[groups.status == "AT_RISK"].index)


@pytest.mark.slow
def test_expectations_catch_a_groups_table_that_disagrees(scenario_latest, spark, tmp_path):
    import shutil

    import pandas as pd

    from audit.report.expectations import run_expectations

    _result, out = scenario_latest
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    assert run_expectations(spark, str(copy), assets=["groups"]).success
    groups = pd.read_parquet(copy / "groups")
    groups.loc[groups.index[0], "partitions_committed"] += 1
    worst = groups.worst_verdict != "OK"
    groups.loc[worst[worst].index[0], "worst_verdict"] = "OK"
    shutil.rmtree(copy / "groups")
    (copy / "groups").mkdir()
    groups.to_parquet(copy / "groups" / "part-0.parquet", coerce_timestamps="us")
    outcome = run_expectations(spark, str(copy), assets=["groups"])
    assert not outcome.success
    assert {"groups.partitions_match_committed", "groups.worst_verdict_is_a_partitions"} <= set(outcome.failed_checks)


@pytest.mark.slow
def test_report_lists_every_group_worst_first(scenario_latest, spark, tmp_path):
    import re
    import shutil

    import pandas as pd

    from audit.report.html import write_html_report

    _result, out = scenario_latest
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    page = open(write_html_report(spark, str(copy)), encoding="utf-8").read()
    statuses = re.findall(r'<tr class="group-row" data-status="([A-Z_]+)"><td>([^<]+)</td>', page)
    groups = pd.read_parquet(copy / "groups")
    assert sorted(g for _s, g in statuses) == sorted(groups.group_id)
    order = ["AT_RISK", "STALE", "WARN", "OK"]
    assert [order.index(s) for s, _g in statuses] == sorted(order.index(s) for s, _g in statuses)
    assert statuses[0][0] == "AT_RISK"
    page = open(write_html_report(spark, str(copy), max_groups_in_table=2), encoding="utf-8").read()
    assert page.count('class="group-row"') == 2 and f"{len(groups) - 2} more groups are in groups/" in page


def test_group_changes_between_runs(spark, tmp_path):
    from audit.report.history import append_run, group_changes

    hist = str(tmp_path / "history")
    summary = {
        "started_at": "2026-11-27T01:00:00+00:00",
        "exit_status": 0,
        "findings": {"total": 0, "by_severity": {}},
        "offset_commits": {"group_partitions": 3},
        "records_read": {"total": 9},
        "records_skipped": {"by_reason": {}},
    }
    cols = "group_id string, status string, worst_verdict string, total_lag bigint, records_at_risk bigint"
    first = spark.createDataFrame(
        [("a", "OK", "OK", 5, None), ("b", "OK", "OK", 0, None), ("c", "WARN", "OFFSET_REWIND", 1, 2)], cols
    )
    empty_findings = _finding(spark, [])
    append_run(spark, hist, "r1", summary, empty_findings, "out", groups=first)
    now = spark.createDataFrame(
        [("a", "AT_RISK", "LOG_TRUNCATION", -3, 8), ("b", "OK", "OK", 7, None), ("d", "STALE", "OK", 40, None)], cols
    )
    changes, info = group_changes(spark, hist, "r2", now)
    got = {
        r.group_id: (r.change, r.status, r.previous_status, r.total_lag, r.previous_total_lag)
        for r in changes.collect()
    }
    assert got == {
        "a": ("changed", "AT_RISK", "OK", -3, 5),
        "c": ("gone", None, "WARN", None, 1),
        "d": ("new", "STALE", None, 40, None),
    }
    assert info == {"groups_new": 1, "groups_gone": 1, "groups_changed": 1}
    conform("group_changes", changes)
