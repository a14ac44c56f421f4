"""--history: runs appended by run date and run id, reruns replace, and what changed since the previous run."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from ..paths import SCENARIO


def _keys(out) -> set:
    return {
        (r["group_id"], r["topic"], r["partition"], r["finding"])
        for r in pq.read_table(str(out / "findings")).to_pylist()
    }


def _changes(out) -> dict:
    got: dict = {}
    for r in pq.read_table(str(out / "finding_changes")).to_pylist():
        got.setdefault(r["status"], set()).add((r["group_id"], r["topic"], r["partition"], r["finding"]))
    return got


@pytest.mark.slow
def test_history_follows_findings_across_runs(audit_dirs, spark, tmp_path):
    hist = tmp_path / "history"
    r1, out1 = audit_dirs(
        "hist-1", [SCENARIO / "brokers"], history=str(hist), run_id="run-1", groups="dev-settlement|dev-archiver"
    )
    first = _keys(out1)
    assert first and r1.summary["history"]["previous_run_id"] is None
    assert _changes(out1) == {"new": first}

    r2, out2 = audit_dirs(
        "hist-2",
        [SCENARIO / "brokers"],
        history=str(hist),
        run_id="run-2",
        groups="dev-settlement|dev-inventory-sync",
        reports=True,
    )
    second = _keys(out2)
    want = {"new": second - first, "persisted": second & first, "resolved": first - second}
    assert all(want.values()), want  # the scenario gives each status at least one finding
    assert _changes(out2) == want
    h = r2.summary["history"]
    assert (h["previous_run_id"], h["new"], h["persisted"], h["resolved"]) == (
        "run-1",
        len(want["new"]),
        len(want["persisted"]),
        len(want["resolved"]),
    )
    page = (out2 / "report.html").read_text()
    assert 'id="changes"' in page and f'id="changes-resolved">{len(want["resolved"])}<' in page
    assert "dev-archiver" in page.split('id="changes"')[1].split("</section>")[0]
    # the groups' status since run-1: one group came, one went, dev-settlement stayed AT_RISK (not listed)
    gchanges = {
        (r["change"], r["group_id"], r["status"], r["previous_status"])
        for r in pq.read_table(str(out2 / "group_changes")).to_pylist()
    }
    assert gchanges == {("new", "dev-inventory-sync", "AT_RISK", None), ("gone", "dev-archiver", None, "AT_RISK")}
    assert (h["groups_new"], h["groups_gone"], h["groups_changed"]) == (1, 1, 0)
    assert page.count('class="group-change"') == 2
    hg = spark.read.parquet(str(hist / "groups"))
    assert sorted(r["group_id"] for r in hg.where("run_id = 'run-1'").collect()) == ["dev-archiver", "dev-settlement"]

    from audit.report.history import _read

    runs = _read(spark, str(hist), "runs")
    assert sorted(r["run_id"] for r in runs.collect()) == ["run-1", "run-2"]
    assert {r["run_date"] for r in runs.select("run_date").collect()} == {r1.summary["started_at"][:10]}
    hf = spark.read.parquet(str(hist / "findings"))
    assert {
        (r["group_id"], r["topic"], r["partition"], r["finding"]) for r in hf.where("run_id = 'run-2'").collect()
    } == second
    n2 = hf.where("run_id = 'run-2'").count()

    # a rerun of run-2 replaces it: no duplicates, still compared with run-1
    r3, out3 = audit_dirs(
        "hist-3", [SCENARIO / "brokers"], history=str(hist), run_id="run-2", groups="dev-settlement|dev-inventory-sync"
    )
    assert r3.summary["history"]["previous_run_id"] == "run-1"
    assert _changes(out3) == want
    runs = spark.read.parquet(str(hist / "runs"))
    assert sorted(r["run_id"] for r in runs.collect()) == ["run-1", "run-2"]
    assert spark.read.parquet(str(hist / "findings")).where("run_id = 'run-2'").count() == n2
    assert not [p for p in hist.iterdir() if p.name.startswith("_staging")]


def test_history_must_be_apart_from_output_and_log_dirs(audit_dirs, tmp_path):
    from pydantic import ValidationError

    from audit.pipeline import AuditConfig

    with pytest.raises(ValidationError, match="apart from --output"):
        AuditConfig(log_dirs=["x"], output=str(tmp_path / "out"), history=str(tmp_path / "out" / "h"))
    with pytest.raises(ValidationError, match="--run-id"):
        AuditConfig(log_dirs=["x"], output=str(tmp_path / "out"), history=str(tmp_path / "h"), run_id="a/b")
    from audit.io.fs import InputError

    with pytest.raises(InputError, match="--history .* overlaps --log-dirs"):
        audit_dirs("hist-bad", [SCENARIO / "brokers"], history=str(SCENARIO / "brokers" / "hist"))


def test_findings_without_a_group_compare_across_runs(spark, tmp_path):
    """REPLICA_DIVERGENCE has no group: its replica's broker keys it, so it persists or resolves like any other."""
    from audit.report.history import append_run, finding_changes

    schema = (
        "group_id string, topic string, partition int, finding string, severity string, committed_offset bigint, "
        "records_at_risk bigint, detail string, commit_timestamp timestamp, replica_broker int"
    )
    rows = [
        (None, "t", 0, "REPLICA_DIVERGENCE", "error", None, 50, "broker 1 lost 50", None, 1),
        (None, "t", 0, "REPLICA_DIVERGENCE", "warning", None, 5, "broker 3 lost 5", None, 3),
        ("g", "t", 0, "LOG_TRUNCATION", "critical", 100, 40, "past the divergence", None, None),
    ]
    summary = {
        "started_at": "2026-11-23T10:00:00+00:00",
        "exit_status": 1,
        "findings": {"total": 3, "by_severity": {"critical": 1, "error": 1, "warning": 1, "info": 0}},
        "offset_commits": {"group_partitions": 1},
        "records_read": {"total": 1},
        "records_skipped": {"by_reason": {}},
    }
    hist = tmp_path / "history"
    append_run(spark, str(hist), "run-1", summary, spark.createDataFrame(rows, schema), str(tmp_path / "out"))
    # broker 3's replica has rejoined (truncated): its row is gone, broker 1's persists
    changes, info = finding_changes(spark, str(hist), "run-2", spark.createDataFrame([rows[0], rows[2]], schema))
    got = sorted((r.status, r.group_id or "-", r.finding, r.severity) for r in changes.collect())
    assert got == [
        ("persisted", "-", "REPLICA_DIVERGENCE", "error"),
        ("persisted", "g", "LOG_TRUNCATION", "critical"),
        ("resolved", "-", "REPLICA_DIVERGENCE", "warning"),
    ]
    assert (info["new"], info["persisted"], info["resolved"]) == (0, 2, 1)


def test_run_ids_with_characters_spark_escapes_read_back_as_given(spark, tmp_path):
    """The default run id (a timestamp) and an Airflow run id hold ':' and '+': the attempt's directories escape
    them as Spark's own partitioned writes do, and the history reads the run id back unchanged."""
    from audit.report.history import append_run, committed

    schema = "group_id string, topic string, partition int, finding string, severity string"
    summary = {
        "started_at": "2026-11-23T10:00:00+00:00",
        "exit_status": 1,
        "findings": {"total": 1, "by_severity": {"critical": 1}},
        "offset_commits": {"group_partitions": 1},
        "records_read": {"total": 1},
        "records_skipped": {"by_reason": {}},
    }
    hist = tmp_path / "history"
    ids = ["2026-11-23T10:00:00.000000Z", "manual__2026-11-23T10:00:00.5+00:00"]
    for rid in ids:
        for _ in range(2):  # a rerun replaces it
            append_run(
                spark,
                str(hist),
                rid,
                summary,
                spark.createDataFrame([("g", "t", 0, "LOG_TRUNCATION", "critical")], schema),
                "o",
            )
    assert sorted(r["run_id"] for r in committed(spark, str(hist), "runs").collect()) == sorted(ids)
    assert sorted(r["run_id"] for r in committed(spark, str(hist), "findings").collect()) == sorted(ids)
    assert sorted(p.name for p in (hist / "runs").glob("run_date=*/*")) == [
        "run_id=2026-11-23T10%3A00%3A00.000000Z",
        "run_id=manual__2026-11-23T10%3A00%3A00.5+00%3A00",
    ]
    assert len(list((hist / "findings").glob("run_date=*/*/attempt=*"))) == 2
