"""The Spark job budget of an audit: an audit is a short, fixed sequence of Spark jobs.

Every job costs fixed time on each run (and a round trip under Spark Connect), so the number of jobs an audit of
the bundled scenario starts is bounded here, counted from Spark's own status tracker (every job of the session
without a job group: the audit sets none).  A change that adds a job per rule, table or report query fails this
test; ``python -m bench.job_budget`` prints the jobs per stage.
"""

from __future__ import annotations

import pytest

from ..paths import SCENARIO

#: jobs of one audit of the bundled scenario, latest mode, reports on (``report.html``, Data Docs, metrics)
BUDGET_REPORTS = 16
#: the same with ``--skip-reports``
BUDGET_SKIP_REPORTS = 14


def _job_ids(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


@pytest.mark.parametrize("reports, budget", [(True, BUDGET_REPORTS), (False, BUDGET_SKIP_REPORTS)])
def test_audit_runs_within_its_spark_job_budget(spark, tmp_path, reports, budget):
    from audit.pipeline import AuditConfig, run

    cfg = AuditConfig(log_dirs=[str(SCENARIO / "brokers")], output=str(tmp_path / "out"), quiet=True, reports=reports)
    before = _job_ids(spark)
    result = run(cfg, spark)
    jobs = len(_job_ids(spark) - before)
    # the audit did its work: the scenario's findings are there (a run that skipped its stages would be cheap)
    assert result.summary["findings"]["total"] == 15
    assert (tmp_path / "out" / "findings").is_dir() and (tmp_path / "out" / "report.html").exists() == reports
    assert jobs <= budget, f"the audit ran {jobs} Spark jobs, over its budget of {budget}"
