"""``--source kafka-connector``: Spark's own Kafka connector reads ``__consumer_offsets`` of a real cluster.

The connector (``spark-sql-kafka-0-10`` at the installed pyspark's version) is resolved from Maven Central by
the CLI's ``spark.jars.packages``, in a fresh ``kafka-offset-audit`` process as a user would run it. On the
same lab cluster -- commits by Kafka's consumer, a commit past the log end, one below the log start after
``deleteRecords``, a transactional offset commit committed and one aborted (which ``read_committed`` must
drop) -- it must give the same committed offsets and findings as the default kafka-python source.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from . import kafka_dist
from .client import LabClient, out_of_range_commits
from .cluster import KafkaCluster

from ..paths import REPO

TOPIC = "ledger"


@pytest.fixture(scope="module", params=kafka_dist.feature_versions(0), ids=lambda v: f"kafka-{v}")
def lab(request, tmp_path_factory):
    version = request.param
    work = tmp_path_factory.mktemp(f"connector-{version}")
    cluster = KafkaCluster(version, work / "cluster", brokers=3).start()
    try:
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            out_of_range_commits(lab, TOPIC)
            lab.call(
                "txn_commit",
                transactional_id="etl-1",
                group="etl",
                offsets=[{"topic": TOPIC, "partition": 2, "offset": 12, "epoch": 0}],
            )
            lab.call(
                "txn_commit",
                transactional_id="etl-1",
                group="etl",
                abort=True,
                offsets=[{"topic": TOPIC, "partition": 2, "offset": 99, "epoch": 0}],
            )
        yield {"cluster": cluster, "work": work, "version": version}
    finally:
        cluster.stop()


def _tables(out):
    import pyarrow.parquet as pq

    committed = sorted(
        (r["group_id"], r["topic"], r["partition"], r["committed_offset"], r["committed_leader_epoch"], r["verdict"])
        for r in pq.read_table(str(out / "committed_offsets")).to_pylist()
    )
    findings = sorted(
        (r["group_id"], r["topic"], r["partition"], r["finding"], r["committed_offset"])
        for r in pq.read_table(str(out / "findings")).to_pylist()
    )
    return committed, findings


def test_connector_source_gives_the_same_audit(lab, tmp_path):
    bootstrap = lab["cluster"].bootstrap
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    runs = {}
    for source in ("kafka-python", "kafka-connector"):
        out = tmp_path / source
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "audit.cli",
                "audit",
                "--bootstrap-servers",
                bootstrap,
                "--source",
                source,
                "--output",
                str(out),
                "--skip-reports",
                "--fail-on",
                "never",
                "--master",
                "local[2]",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-5000:]
        runs[source] = _tables(out)
    committed, findings = runs["kafka-python"]
    assert runs["kafka-connector"] == runs["kafka-python"]
    # the scenario is what it should be: the aborted transactional commit is not the live one
    assert ("etl", TOPIC, 2, 12, 0, "OK") in committed, committed
    assert {f[3] for f in findings} >= {"OFFSET_OUT_OF_RANGE"}, findings
    assert len(committed) == 3 + 1 + 1 + 1
