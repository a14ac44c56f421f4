"""A process killed at each step of committing its output or its history entry loses nothing committed.

The CLI runs as users run it (a subprocess, reports on) and is killed with SIGKILL at a named step
(``KOA_KILL_AT``: ``audit.io.outputs.kill_point``): after the history's findings are written but before its
``runs`` row (the marker), after that marker, and right after the output's swap.  After each kill the
output directory holds one complete run (the previous one, or the new one once swapped) and the history holds
each run id exactly once; the next run cleans up what the killed ones left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ..paths import SCENARIO


def _run(out: Path, hist: Path, kill_at: str | None = None, reports: bool = True) -> subprocess.CompletedProcess:
    """The CLI with the user's defaults (reports on); a run to be killed, and the last one, skip the reports (the
    commit's steps come after them and do not depend on them), which keeps the test short."""
    env = dict(os.environ)
    env.pop("KOA_KILL_AT", None)
    if kill_at:
        env["KOA_KILL_AT"] = kill_at
    return subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "kafka-offset-audit"),
            "audit",
            "--log-dirs",
            str(SCENARIO / "brokers"),
            "--output",
            str(out),
            "--history",
            str(hist),
            "--run-id",
            "nightly",
            "--groups",
            "dev-settlement|dev-archiver",
            "--quiet",
            *(["--skip-reports"] if kill_at or not reports else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _committed_history(spark, hist: Path):
    from audit.report.history import committed

    runs = [(r["run_id"], r["attempt"]) for r in committed(spark, str(hist), "runs").collect()]
    findings = committed(spark, str(hist), "findings")
    return runs, sorted(
        (r["run_id"], r["attempt"], r["group_id"], r["topic"], r["partition"], r["finding"]) for r in findings.collect()
    )


def _attempt_dirs(hist: Path, table: str) -> list[str]:
    return sorted(p.name for p in hist.glob(f"{table}/run_date=*/run_id=nightly/attempt=*"))


def test_killed_at_every_commit_step_nothing_committed_is_lost(spark, tmp_path):
    out, hist = tmp_path / "out", tmp_path / "history"
    first = _run(out, hist)
    assert first.returncode == 1, first.stderr[-3000:]  # LOG_TRUNCATION (critical)
    base = _summary(out)
    runs0, findings0 = _committed_history(spark, hist)
    assert len(runs0) == 1 and findings0 and {f[1] for f in findings0} == {runs0[0][1]}

    # 1. the history's findings written, its marker not: the history and the output are the previous run's
    killed = _run(out, hist, "history-findings")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert _committed_history(spark, hist) == (runs0, findings0)
    assert len(_attempt_dirs(hist, "findings")) == 2 and len(_attempt_dirs(hist, "runs")) == 1
    assert _summary(out)["started_at"] == base["started_at"]

    # 2. the marker written: the new attempt is the run (once), its findings the same rows
    killed = _run(out, hist, "history-marker")
    assert killed.returncode == -signal.SIGKILL
    runs2, findings2 = _committed_history(spark, hist)
    assert len(runs2) == 1 and runs2 != runs0 and runs2[0][1] > runs0[0][1]
    assert [f[2:] for f in findings2] == [f[2:] for f in findings0] and {f[1] for f in findings2} == {runs2[0][1]}
    assert _summary(out)["started_at"] == base["started_at"]  # the output is committed after the history

    # 3. killed right after the swap: the new output, whole; the old one left beside it under a staging name
    killed = _run(out, hist, "after-swap")
    assert killed.returncode == -signal.SIGKILL
    new = _summary(out)
    assert new["started_at"] != base["started_at"] and new["failed_stages"] == []
    assert (out / "findings").is_dir() and (out / "committed_offsets").is_dir()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out."))
    assert left, "the killed runs' staging dirs are beside the output"

    # the next run removes what the killed ones left, in the output's parent and in the history
    last = _run(out, hist, reports=False)
    assert last.returncode == 1, last.stderr[-3000:]
    assert sorted(_summary(out)["output_leftovers"]["removed"]) == left
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("out.")]
    runs5, findings5 = _committed_history(spark, hist)
    assert len(runs5) == 1 and [f[2:] for f in findings5] == [f[2:] for f in findings0]
    assert _attempt_dirs(hist, "runs") == _attempt_dirs(hist, "findings") == [f"attempt={runs5[0][1]}"]


def test_a_history_written_before_attempts_existed_is_read_and_kept(spark, tmp_path):
    """Run directories without ``attempt=`` (written by earlier versions) read as committed runs and move under
    an attempt on the next append; a rerun of such a run id replaces it."""
    from audit.report.history import LEGACY_ATTEMPT, append_run, committed

    schema = (
        "group_id string, topic string, partition int, finding string, severity string, committed_offset bigint, "
        "records_at_risk bigint, detail string, commit_timestamp timestamp"
    )
    rows = [("g", "t", 0, "LOG_TRUNCATION", "critical", 100, 40, "past the divergence", None)]
    hist = tmp_path / "history"
    from audit.report.history import RUNS_SCHEMA
    import datetime as dt

    run_time = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    for rid in ("old-1", "old-2"):  # the earlier layout: run_date=/run_id=/ holding the Parquet files
        (
            spark.createDataFrame([(rid, run_time, "o", 1, 1, 1, 0, 0, 0, 1, 1, 0, "{}")], RUNS_SCHEMA)
            .drop("run_id")
            .write.parquet(str(hist / "runs" / "run_date=2026-11-01" / f"run_id={rid}"))
        )
        (
            spark.createDataFrame(rows, schema)
            .drop("run_id")
            .write.parquet(str(hist / "findings" / "run_date=2026-11-01" / f"run_id={rid}"))
        )
    summary = {
        "started_at": "2026-11-23T10:00:00+00:00",
        "exit_status": 1,
        "findings": {"total": 1, "by_severity": {"critical": 1}},
        "offset_commits": {"group_partitions": 1},
        "records_read": {"total": 1},
        "records_skipped": {"by_reason": {}},
    }
    append_run(spark, str(hist), "old-2", summary, spark.createDataFrame(rows, schema), "o")
    runs = sorted((r["run_id"], r["attempt"] == LEGACY_ATTEMPT) for r in committed(spark, str(hist), "runs").collect())
    assert runs == [("old-1", True), ("old-2", False)]
    assert committed(spark, str(hist), "findings").count() == 2
    assert not list(hist.glob("*/run_date=2026-11-01/run_id=old-2"))  # the replaced legacy run is gone
