"""spark-submit jobs/audit_offsets.py on real executor JVMs (local-cluster): nothing may depend
on driver-local state, and the result must equal the embedded run's."""

import json
import os
import shutil
import subprocess
import sys


from .paths import REPO, SCENARIO


def test_spark_submit_on_local_cluster_matches_ground_truth(tmp_path):
    submit = shutil.which("spark-submit", path=os.path.dirname(sys.executable))
    assert submit, "spark-submit comes with the pyspark package"
    out = tmp_path / "out"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TMPDIR=str(scratch))
    proc = subprocess.run(
        [
            submit,
            "--master",
            "local-cluster[2,1,1024]",
            "--conf",
            "spark.ui.enabled=false",
            str(REPO / "jobs/audit_offsets.py"),
            "--log-dirs",
            str(SCENARIO / "brokers"),
            "--output",
            str(out),
            "--fail-on",
            "critical",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # critical findings exist
    assert "LOG_TRUNCATION" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["findings"]["by_name"]["LOG_TRUNCATION"] == 3
    assert summary["findings"]["by_name"]["OFFSET_OUT_OF_RANGE"] == 3
    truth = json.loads((SCENARIO / "ground_truth.json").read_text())
    assert summary["offset_commits"]["group_partitions"] == sum(1 for r in truth if r["committed_offset"] is not None)
    # the zip of the audit package shipped to the executors is removed when the job ends
    assert not list(scratch.glob("koa-pyfiles-*"))
