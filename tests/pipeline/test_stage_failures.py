"""A crash is not a finding: each stage after the judge failing in turn keeps the judged tables and exits 3.

Each test makes one real stage raise (the report, the expectation suite, the metrics, the console table, the
history, the catalog tables) during an audit of the shared scenario with the CLI's defaults (reports on), and
checks: exit status 3 (not 1, "findings", nor 2, "usage"); ``findings/``, ``committed_offsets/``, ``epochs/``,
``bounds/`` and ``summary.json`` written and committed, the findings the same as a clean run's; summary.json's
``failed_stages`` naming the stage with its error and traceback; ``metrics.prom`` saying ``run_success 0`` and
``failed_stage{stage}`` (unless the metrics stage is the one failing); the other reports still written.
A failure before the tables (the judge) leaves the previous output untouched, exit 3, one line naming the stage.
"""

from __future__ import annotations

import json

import pytest

from audit.cli import main

from ..paths import SCENARIO


class Boom(RuntimeError):
    pass


def _boom(*_a, **_k):
    raise Boom("injected failure")


STAGES = {  # stage -> (module, attribute) to make raise
    "html_report": ("audit.report.html", "write_html_report"),
    "expectations": ("audit.report.expectations", "run_expectations"),
    "metrics": ("audit.report.metrics", "build_registry"),
    "console": ("audit.pipeline.reports", "render_console"),
    "history": ("audit.report.history", "append_run"),
    "tables": ("audit.io.outputs", "register_tables"),
}


@pytest.fixture(scope="module")
def clean_findings(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "out"
    assert (
        main(
            [
                "audit",
                "--log-dirs",
                str(SCENARIO / "brokers"),
                "--output",
                str(out),
                "--quiet",
                "--fail-on",
                "never",
                "--skip-reports",
            ]
        )
        == 0
    )
    return sorted(
        tuple(r)
        for r in spark.read.parquet(str(out / "findings"))
        .select("group_id", "topic", "partition", "finding", "severity")
        .collect()
    )


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_failed_stage_keeps_the_tables_and_exits_3(stage, spark, tmp_path, monkeypatch, capsys, clean_findings):
    import importlib

    module, attr = STAGES[stage]
    monkeypatch.setattr(importlib.import_module(module), attr, _boom)
    out = tmp_path / "out"
    args = ["audit", "--log-dirs", str(SCENARIO / "brokers"), "--output", str(out), "--fail-on", "never"]
    if stage == "history":
        args += ["--history", str(tmp_path / "history")]
    if stage == "tables":
        args += ["--table-prefix", "koa_stage_"]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert f"internal error in stage(s) {stage}" in err and "Boom: injected failure" in err, err
    for table in ("findings", "committed_offsets", "epochs", "bounds"):
        assert (out / table).is_dir(), table
    findings = sorted(
        tuple(r)
        for r in spark.read.parquet(str(out / "findings"))
        .select("group_id", "topic", "partition", "finding", "severity")
        .collect()
    )
    assert findings == clean_findings
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_status"] == 3
    failed = summary["failed_stages"]
    assert [f["stage"] for f in failed] == [stage]
    assert failed[0]["error"] == "Boom: injected failure" and "_boom" in failed[0]["traceback"]
    if stage != "metrics":
        prom = (out / "metrics.prom").read_text()
        assert "kafka_offset_audit_run_success 0.0" in prom
        assert f'kafka_offset_audit_failed_stage{{stage="{stage}"}} 1.0' in prom
        assert "kafka_offset_audit_exit_status 3.0" in prom
    else:
        assert not (out / "metrics.prom").exists()
    if stage not in ("html_report", "expectations"):
        assert (out / "report.html").is_file() and (out / "expectations" / "validation_result.json").is_file()
    if stage == "html_report":
        assert not (out / "report.html").exists() and summary["reports"]["html_report"] is None
        assert summary["reports"]["expectations"]["success"] is True
    if stage == "expectations":
        assert (out / "report.html").is_file() and "error" in summary["reports"]["expectations"]


def test_a_failure_before_the_tables_leaves_the_previous_output_and_exits_3(spark, tmp_path, monkeypatch, capsys):
    import audit.pipeline.judging

    out = tmp_path / "out"
    args = [
        "audit",
        "--log-dirs",
        str(SCENARIO / "brokers"),
        "--output",
        str(out),
        "--fail-on",
        "never",
        "--skip-reports",
        "--quiet",
    ]
    assert main(args) == 0
    before = (out / "summary.json").read_text()
    monkeypatch.setattr(audit.pipeline.judging, "judge", _boom)
    assert main(args) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("kafka-offset-audit: internal error in stage 'judge': Boom: injected failure"), err
    assert "--verbose shows the traceback" in err[-1] and "Traceback" not in "\n".join(err)
    assert (out / "summary.json").read_text() == before  # the previous output is untouched
    assert main(args + ["--verbose"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_a_metrics_query_failing_in_the_shared_job_loses_only_the_metrics_and_console(
    spark, tmp_path, monkeypatch, clean_findings
):
    # the metrics' and console's queries are collected in the same Spark job as summary.json's aggregates: one of
    # them failing while that job runs costs those two stages, not the summary nor the report
    import audit.report.metrics

    real = audit.report.metrics.group_query

    def failing(groups, limit):
        return real(groups, limit).selectExpr("*", "raise_error('injected at run time') AS boom")

    monkeypatch.setattr(audit.report.metrics, "group_query", failing)
    out = tmp_path / "out"
    args = ["audit", "--log-dirs", str(SCENARIO / "brokers"), "--output", str(out), "--fail-on", "never", "--quiet"]
    assert main(args) == 3
    summary = json.loads((out / "summary.json").read_text())
    assert [f["stage"] for f in summary["failed_stages"]] == ["metrics", "console"]
    assert all("injected at run time" in f["error"] for f in summary["failed_stages"])
    assert summary["findings"]["total"] == len(clean_findings)
    assert (out / "report.html").is_file() and summary["reports"]["expectations"]["success"] is True
    # the metrics file still says the run and its failed stages, without the per-group-partition gauges
    prom = (out / "metrics.prom").read_text()
    assert 'kafka_offset_audit_failed_stage{stage="metrics"} 1.0' in prom
    assert "kafka_offset_audit_committed_offset{" not in prom
