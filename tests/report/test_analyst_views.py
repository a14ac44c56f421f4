"""The analysts' views: installed with the package, bound to the committed run, run by ``spark-sql`` and by
``kafka-offset-audit views --query`` (the S3 output's case is in ``tests/sources/test_object_store.py``)."""

import json
import subprocess

import pyarrow.parquet as pq
import pytest

from audit.cli import main
from audit.report.views import VIEWS, analyst_views_sql, register_views, view_statements
from tests.cluster_fixtures import spark_script


def test_the_views_file_is_package_data_and_defines_every_view():
    from audit.queries import sql_dir

    text = sql_dir().joinpath("views").joinpath("analyst_views.sql").read_text()
    assert "${output}" in text
    names = [s.split()[5] for s in view_statements(text)]  # CREATE OR REPLACE TEMPORARY VIEW <name>
    assert tuple(names) == VIEWS
    import tomllib
    from pathlib import Path

    data = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "views/*.sql" in data["tool"]["setuptools"]["package-data"]["audit.sql"]  # what `pip install .` ships


def test_the_views_read_the_committed_tables(spark, scenario_latest):
    _, out = scenario_latest
    assert register_views(spark, str(out)).endswith(str(out))
    committed = pq.read_table(str(out / "committed_offsets")).num_rows
    findings = pq.read_table(str(out / "findings")).num_rows
    assert spark.sql("SELECT count(*) AS n FROM koa_latest_commits").first()["n"] == committed
    assert spark.sql("SELECT sum(findings) AS n FROM koa_findings_by_group").first()["n"] == findings
    # the unclamped lag: a commit past the log end stays negative, as committed_offsets/ has it
    lags = {
        (r["group_id"], r["topic"], r["partition"]): r["lag"]
        for r in spark.sql("SELECT group_id, topic, partition, lag FROM koa_latest_commits").collect()
    }
    want = {
        (r["group_id"], r["topic"], r["partition"]): r["lag"]
        for r in pq.read_table(
            str(out / "committed_offsets"), columns=["group_id", "topic", "partition", "lag"]
        ).to_pylist()
    }
    assert lags == want and any(v is not None and v < 0 for v in want.values())


@pytest.mark.slow
def test_spark_sql_runs_the_printed_views(scenario_latest, tmp_path, capsys):
    """``kafka-offset-audit views --output DIR`` prints the views bound to DIR; ``spark-sql -f`` runs them with a
    query after them, as docs/sql.md says."""
    _, out = scenario_latest
    assert main(["views", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == analyst_views_sql(f"file:{out}") + "\n"
    q = tmp_path / "q.sql"
    q.write_text(printed + "\nSELECT 'rows=' || count(*) FROM koa_latest_commits;\n")
    proc = subprocess.run(
        [spark_script("spark-sql"), "--conf", "spark.ui.enabled=false", "-f", str(q)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"rows={pq.read_table(str(out / 'committed_offsets')).num_rows}" in proc.stdout.split()


def test_a_query_prints_json_lines_bounded_by_max_rows(scenario_latest, capsys):
    _, out = scenario_latest
    query = "SELECT group_id, finding FROM koa_findings_by_group ORDER BY group_id, finding"
    assert main(["views", "--output", str(out), "--query", query, "--format", "json", "--max-rows", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [set(json.loads(x)) for x in lines] == [{"group_id", "finding"}] * 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--output", "{tmp}/nowhere"], "holds no kafka-offset-audit output"),
        (["--output", "{out}", "--query", "SELECT nope FROM koa_findings"], "--query: AnalysisException"),
        (["--output", "{out}", "--max-rows", "0"], "--max-rows must be at least 1"),
    ],
)
def test_bad_arguments_are_usage_errors(scenario_latest, tmp_path, capsys, argv, message):
    _, out = scenario_latest
    args = [a.format(tmp=tmp_path, out=out) for a in argv]
    assert main(["views", *args]) == 2
    assert message in capsys.readouterr().err
