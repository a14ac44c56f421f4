"""Analyst views in sql/views run unchanged in spark-sql; --table-prefix registers catalog tables."""

import os
import shutil
import subprocess
import sys

import pytest

from audit.io.outputs import register_tables

from ..paths import REPO


@pytest.mark.slow
def test_analyst_views_run_in_spark_sql(scenario_latest, tmp_path):
    _result, out = scenario_latest
    script = tmp_path / "q.sql"
    script.write_text(
        (REPO / "sql/views/analyst_views.sql").read_text()
        + """
SELECT concat_ws('|', 'LATEST', group_id, topic, cast(partition AS STRING), verdict, cast(lag AS STRING)) FROM koa_latest_commits WHERE group_id = 'dev-settlement' ORDER BY partition;
SELECT concat_ws('|', 'BYGROUP', group_id, severity, finding, cast(findings AS STRING)) FROM koa_findings_by_group WHERE severity = 'critical';
SELECT concat_ws('|', 'EPOCHS', cast(leader_epoch AS STRING), cast(start_offset AS STRING), cast(end_offset AS STRING)) FROM koa_epoch_end_offsets WHERE topic = 'dev.payments' AND partition = 0 ORDER BY leader_epoch;
"""
    )
    spark_sql = shutil.which("spark-sql", path=os.path.dirname(sys.executable))
    proc = subprocess.run(
        [spark_sql, "--conf", "spark.ui.enabled=false", "-d", f"output={out}", "-f", str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if "|" in ln]
    assert "LATEST|dev-settlement|dev.payments|0|LOG_TRUNCATION|10" in lines
    assert "LATEST|dev-settlement|dev.payments|1|LOG_TRUNCATION|-30" in lines  # negative lag, not clamped
    assert "BYGROUP|dev-settlement|critical|LOG_TRUNCATION|2" in lines
    assert [ln for ln in lines if ln.startswith("EPOCHS")] == ["EPOCHS|0|0|60", "EPOCHS|2|60|110", "EPOCHS|3|110|110"]


def test_table_prefix_registers_catalog_tables(spark, scenario_latest):
    _result, out = scenario_latest
    made = register_tables(spark, str(out), "koa_test_")
    assert "koa_test_findings" in made and "koa_test_committed_offsets" in made
    assert spark.table("koa_test_findings").where("finding = 'LOG_TRUNCATION'").count() == 3
    assert spark.sql("SELECT count(*) FROM koa_test_committed_offsets").first()[0] == 26
