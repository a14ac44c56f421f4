"""Great Expectations suite over the audit output (audit/report/expectations.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

try:
    from tests.conftest_reports import report_spark  # noqa: F401  (fixture)
    from tests import report_fixtures as rf
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
    from conftest_reports import report_spark  # noqa: F401
    import report_fixtures as rf

from pydantic import ValidationError

from audit.report.expectations import ExpectationsOutcome, build_suites, run_expectations
from audit.report.expectations_config import ExpectationsConfig, load_expectations_config

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------ config (no Spark)


def test_config_defaults():
    cfg = load_expectations_config()
    assert cfg.fail_on_severities == ["critical"]
    assert cfg.min_verifiable_commit_share == 0.5
    assert ("LOG_TRUNCATION", "critical") in cfg.finding_severity_pairs()
    assert load_expectations_config(cfg) is cfg


def test_config_overrides_from_json_yaml_and_dict(tmp_path):
    j = tmp_path / "exp.json"
    j.write_text(json.dumps({"min_verifiable_commit_share": 0.8, "fail_on_severities": []}))
    cfg = load_expectations_config(str(j))
    assert cfg.min_verifiable_commit_share == 0.8 and cfg.fail_on_severities == []

    y = tmp_path / "exp.yaml"
    y.write_text("fail_on_severities: [critical, error]\nmax_skipped_fraction: 0.1\n")
    cfg = load_expectations_config(y)
    assert cfg.fail_on_severities == ["critical", "error"] and cfg.max_skipped_fraction == 0.1

    assert load_expectations_config({"result_format": "complete"}).result_format == "COMPLETE"


@pytest.mark.parametrize(
    "bad",
    [
        {"min_verifiable_commit_share": 1.5},
        {"no_such_threshold": 1},
        {"fail_on_severities": ["fatal"]},
        {"finding_severities": {"NOT_A_FINDING": ["error"]}},
    ],
)
def test_config_rejects_bad_values(bad):
    with pytest.raises(ValidationError):
        ExpectationsConfig.model_validate(bad)


def test_config_rejects_unknown_file_type(tmp_path):
    p = tmp_path / "exp.toml"
    p.write_text("x = 1\n")
    with pytest.raises(ValueError):
        load_expectations_config(p)


def test_suites_name_every_check():
    suites = build_suites()
    assert set(suites) == {"findings", "committed_offsets", "commits", "epochs", "bounds", "groups", "summary"}
    checks = [e.meta["check"] for s in suites.values() for e in s.expectations]
    assert len(checks) == len(set(checks))
    for needed in (
        "findings.no_failing_severity",
        "committed_offsets.committed_offset_not_negative",
        "committed_offsets.leader_epoch_valid",
        "committed_offsets.verdict_known",
        "committed_offsets.key_unique",
        "committed_offsets.verifiable_share",
    ):
        assert needed in checks
    # thresholds come from the config
    off = build_suites({"min_verifiable_commit_share": 0.0, "fail_on_severities": []})
    off_checks = {e.meta["check"] for s in off.values() for e in s.expectations}
    assert "committed_offsets.verifiable_share" not in off_checks
    assert "findings.no_failing_severity" not in off_checks


# ------------------------------------------------------------------ validation in Spark


def _run(spark, out_dir, config=None) -> ExpectationsOutcome:
    outcome = run_expectations(spark, str(out_dir), config=config)
    assert os.path.isfile(outcome.result_path)
    assert outcome.result_path == os.path.join(str(out_dir), "expectations", "validation_result.json")
    return outcome


def test_clean_output_passes(report_spark, tmp_path):
    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=False, with_history=True)
    outcome = _run(report_spark, out)
    assert outcome.success, [(f.check, f.observed) for f in outcome.failed]
    assert outcome.failed == []
    assert outcome.skipped_assets == []
    stats = outcome.statistics
    assert stats["evaluated_expectations"] > 20
    assert stats["unsuccessful_expectations"] == 0
    assert set(stats["by_asset"]) == {
        "findings",
        "committed_offsets",
        "commits",
        "epochs",
        "bounds",
        "groups",
        "summary",
    }

    doc = json.load(open(outcome.result_path))
    assert doc["success"] is True
    assert doc["config"]["min_verifiable_commit_share"] == 0.5
    assert set(doc["validation_results"]) == set(stats["by_asset"])
    assert doc["validation_results"]["findings"]["success"] is True

    index = os.path.join(out, "data_docs", "index.html")
    assert outcome.data_docs_index == index
    assert os.path.isfile(index)
    assert "kafka_offset_audit" in open(index, encoding="utf-8").read()
    # the ephemeral context leaves nothing in the repository or the working directory
    assert not os.path.exists(os.path.join(REPO_ROOT, "gx"))
    assert not os.path.exists(os.path.join(os.getcwd(), "gx"))


def test_critical_finding_fails_the_suite(report_spark, tmp_path):
    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=True)
    outcome = _run(report_spark, out, config={"build_data_docs": False})
    assert not outcome.success
    assert outcome.failed_checks == ["findings.no_failing_severity"]
    (failed,) = outcome.failed
    assert failed.asset == "findings" and failed.column == "severity"
    assert failed.observed["unexpected_count"] == 3
    assert outcome.data_docs_index is None
    assert "commits" in outcome.skipped_assets
    doc = json.load(open(outcome.result_path))
    assert doc["success"] is False and doc["failed_checks"] == ["findings.no_failing_severity"]


def test_epoch_below_minus_one_fails_the_suite(report_spark, tmp_path):
    def bad_epoch(tables):
        tables["committed_offsets"][0]["committed_leader_epoch"] = -2

    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=False, mutate=bad_epoch)
    # Only the table that changed (the full suite passes on this data: test above).
    outcome = run_expectations(report_spark, out, assets=["committed_offsets"])
    assert not outcome.success
    assert outcome.failed_checks == ["committed_offsets.leader_epoch_valid"]
    assert outcome.failed[0].observed["partial_unexpected_list"] == [-2]
    assert set(outcome.statistics["by_asset"]) == {"committed_offsets"}
    assert os.path.isfile(outcome.data_docs_index)


def test_truncation_without_divergence_offset_is_caught(report_spark, tmp_path):
    def drop_divergence(tables):
        for f in tables["findings"]:
            if f["finding"] == "LOG_TRUNCATION" and f["topic"] == "dev.payments":
                f["divergence_offset"] = None

    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=True, mutate=drop_divergence)
    outcome = run_expectations(
        report_spark, out, config={"fail_on_severities": [], "build_data_docs": False}, assets=["findings"]
    )
    assert outcome.failed_checks == ["findings.truncation_has_divergence"]
    assert outcome.failed[0].observed["unexpected_count"] == 2


def test_verifiable_share_floor_from_yaml_config(report_spark, tmp_path):
    # 5 of the 26 latest commits carry no epoch (dev-replay-tool): 81% verifiable.
    cfg = tmp_path / "expectations.yaml"
    cfg.write_text("min_verifiable_commit_share: 0.9\nbuild_data_docs: false\n")
    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=False)
    outcome = run_expectations(report_spark, out, config=str(cfg), assets=["committed_offsets"])
    assert outcome.failed_checks == ["committed_offsets.verifiable_share"]
    assert not os.path.exists(os.path.join(out, "data_docs"))


def test_missing_required_table_raises(report_spark, tmp_path):
    with pytest.raises(FileNotFoundError):
        run_expectations(report_spark, str(tmp_path / "nowhere"))
    os.makedirs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="findings"):
        run_expectations(report_spark, str(tmp_path / "empty"))
    with pytest.raises(ValueError):
        run_expectations(report_spark, str(tmp_path / "empty"), assets=["nope"])


def test_truncation_with_an_unknown_cause_is_caught(report_spark, tmp_path):
    def bad_cause(tables):
        for f in tables["findings"]:
            if f["finding"] == "LOG_TRUNCATION" and f["topic"] == "dev.inventory":
                f["cause"] = "cosmic_rays"

    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=True, mutate=bad_cause)
    outcome = run_expectations(
        report_spark, out, config={"fail_on_severities": [], "build_data_docs": False}, assets=["findings"]
    )
    assert outcome.failed_checks == ["findings.truncation_cause_known"]


@pytest.mark.slow
def test_pandas_and_spark_engines_give_the_same_verdicts(report_spark, tmp_path):
    """The small-table fast path (GX's pandas engine) judges exactly as GX's Spark engine: same failed
    checks, same unexpected counts and values, same statistics; a table above pandas_max_rows goes to Spark."""

    def break_things(tables):
        tables["committed_offsets"][0]["committed_leader_epoch"] = -2
        tables["committed_offsets"][1]["committed_offset"] = -5
        tables["bounds"][0]["high_watermark"] = tables["bounds"][0]["log_end_offset"] + 7
        for f in tables["findings"]:
            if f["finding"] == "LOG_TRUNCATION":
                f["cause"] = "cosmic_rays"
                f["records_at_risk"] = 0

    out = rf.write_fake_output(
        report_spark, str(tmp_path / "out"), with_truncation=True, with_history=True, mutate=break_things
    )
    base = {"build_data_docs": False, "result_format": "COMPLETE", "min_verifiable_commit_share": 0.9}
    spark_o = run_expectations(report_spark, out, config={**base, "engine": "spark"})
    pandas_o = run_expectations(report_spark, out, config={**base, "engine": "pandas"})
    # one table too big for pandas: the rest still go through pandas, the verdicts do not change
    mixed_o = run_expectations(report_spark, out, config={**base, "pandas_max_rows": 10})
    assert len(spark_o.failed_checks) >= 6, spark_o.failed_checks
    assert {
        "committed_offsets.leader_epoch_valid",
        "committed_offsets.committed_offset_not_negative",
        "bounds.high_watermark_not_above_end",
        "findings.truncation_cause_known",
        "findings.truncation_records_at_risk",
        "findings.no_failing_severity",
    } <= set(spark_o.failed_checks)
    for other in (pandas_o, mixed_o):
        assert other.failed_checks == spark_o.failed_checks
        assert other.statistics == spark_o.statistics
        for a, b in zip(spark_o.failed, other.failed):
            assert a.observed.get("unexpected_count") == b.observed.get("unexpected_count"), a.check
            assert sorted(map(str, a.observed.get("partial_unexpected_list") or [])) == sorted(
                map(str, b.observed.get("partial_unexpected_list") or [])
            ), a.check
    with pytest.raises(ValueError, match="pandas_max_rows"):
        run_expectations(report_spark, out, config={**base, "engine": "pandas", "pandas_max_rows": 1})


@pytest.mark.slow
def test_great_expectations_imports_under_python_c():
    """``python -c`` (``__main__`` without a file): pyspark's Spark Connect dependency check, reached through GX's
    import, took the process for a doctest run and ended it with exit status 0, so an audit run that way wrote
    nothing and reported success.  The import must finish and the process go on."""
    code = "import sys; from audit.report.expectations import import_gx; gx = import_gx(); print('imported', gx.__name__); sys.exit(3)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "imported great_expectations" in p.stdout, p.stderr[-2000:]
    assert p.returncode == 3


@pytest.mark.slow
def test_gx_import_leaves_scipy_stats_unloaded_until_used():
    """import_gx() imports Great Expectations without loading scipy.stats (none of the suite's expectations use it;
    it was a quarter of GX's import); the first use loads the real module (a fresh interpreter each time)."""
    import subprocess
    import sys

    script = """
import sys
from audit.report.expectations import import_gx
import_gx()
print('scipy.stats._stats_py' in sys.modules)
from scipy import stats
print(round(float(stats.entropy([0.5, 0.5])), 6), 'scipy.stats._stats_py' in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "0.693147", "True"], out.stdout
