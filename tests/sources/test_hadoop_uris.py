"""Inputs and output through a Hadoop filesystem that is not ``file:``, as on a cluster (hdfs://, s3a://).

Hadoop's ``viewfs://`` mounts local directories under a non-local scheme, so every Hadoop code
path runs for real here: listing and small files through ``FileSystem``, segment bytes through
Spark's ``binaryFile``, the staged output renamed into place, and the reports built locally and
copied into the output.  The result must be the local run's, and still match Kafka's consumer.
"""

import json
import shutil

import pytest

from ..paths import SCENARIO

MOUNT = "koatest"


@pytest.fixture(scope="module")
def viewfs(spark, tmp_path_factory):
    """(viewfs root of the scenario's brokers, viewfs output dir, local dir behind the output)."""
    out_dir = tmp_path_factory.mktemp("viewfs-out")
    data = tmp_path_factory.mktemp("viewfs-data") / "brokers"
    shutil.copytree(SCENARIO / "brokers", data)
    hc = spark._jsc.hadoopConfiguration()
    hc.set(f"fs.viewfs.mounttable.{MOUNT}.link./data", f"file://{data}")
    hc.set(f"fs.viewfs.mounttable.{MOUNT}.link./out", f"file://{out_dir}")
    return f"viewfs://{MOUNT}/data", f"viewfs://{MOUNT}/out/audit", out_dir / "audit"


def test_hadoop_uri_audit_equals_the_local_one_and_writes_the_reports(spark, viewfs, scenario_latest):
    from audit.pipeline import AuditConfig, run

    src, out_uri, out_local = viewfs
    result = run(AuditConfig(log_dirs=[src], output=out_uri, quiet=True), spark)
    local, local_out = scenario_latest
    assert result.summary["findings"] == local.summary["findings"]
    assert result.summary["offset_commits"] == local.summary["offset_commits"]
    assert result.summary["inputs"]["metadata_log"].startswith("broker 100 viewfs://")
    key = ["group_id", "topic", "partition", "finding"]
    got = [r.asDict() for r in spark.read.parquet(out_uri + "/findings").orderBy(*key).collect()]
    want = [r.asDict() for r in spark.read.parquet(str(local_out / "findings")).orderBy(*key).collect()]
    assert got == want and {r["divergence_offset"] for r in got if r["finding"] == "LOG_TRUNCATION"} == {60, 50}
    # the reports, built locally, were copied into the (non-local) output
    reports = result.summary["reports"]
    assert reports["expectations"]["statistics"]["evaluated_expectations"] > 0
    validation = json.loads((out_local / "expectations/validation_result.json").read_text())
    assert validation["success"] == reports["expectations"]["success"]
    assert (
        validation["statistics"]["evaluated_expectations"]
        == reports["expectations"]["statistics"]["evaluated_expectations"]
    )
    assert (out_local / "data_docs/index.html").is_file()
    page = (out_local / "report.html").read_text()
    assert "LOG_TRUNCATION" in page and out_uri in page
    assert json.loads((out_local / "summary.json").read_text())["reports"]["html_report"] == "report.html"
    # a rerun replaces the output through the Hadoop filesystem's rename
    again = run(AuditConfig(log_dirs=[src], output=out_uri, quiet=True, reports=False), spark)
    assert again.summary["findings"] == local.summary["findings"]
    assert not (out_local / "report.html").exists()
    assert sorted(p.name for p in out_local.parent.iterdir()) == ["audit"]
